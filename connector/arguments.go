package connector

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// rawArguments is how arguments that are not one JSON object are shown to
// the policy and the approver: their digest binds the approval to them.
func rawArguments(s string) map[string]any {
	const prefix = 512
	p := s
	if len(p) > prefix {
		p = p[:prefix]
	}
	return map[string]any{"unparsed_arguments_sha256": digest(s), "unparsed_arguments_prefix": strings.ToValidUTF8(p, "")}
}

// digest is the sha256 hex of s.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
