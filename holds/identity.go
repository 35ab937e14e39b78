package holds

import (
	"slices"
	"strings"
	"unicode"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

// Principal types (spec §2.3).
const (
	TypeHuman      = "human"
	TypeAgent      = "agent"
	TypeAutomation = "automation"
)

// maxPrincipalIDLen bounds a principal id, in bytes.
const maxPrincipalIDLen = 256

// principalType returns the canonical principal type of s, if it is one.
func principalType(s string) (string, bool) {
	switch t := envelope.Fold(s); t {
	case TypeHuman, TypeAgent, TypeAutomation:
		return t, true
	}
	return "", false
}

// maxPrefixLetters bounds the letters of one <word>: prefix that bareID
// removes.
const maxPrefixLetters = 32

// bareID is the folded identity with every leading <word>: prefix removed
// (a word of at most 32 letters, a principal type or not, or nothing), so
// that "human:alice", "human::alice", "human:human:alice", "user:alice",
// "Alice" and "ａｌｉｃｅ" all name alice.
func bareID(s string) string {
	f := envelope.Fold(s)
	for {
		word, rest, ok := strings.Cut(f, ":")
		if !ok || !prefixWord(strings.TrimSpace(word)) {
			return f
		}
		f = strings.TrimSpace(rest)
	}
}

// prefixWord reports whether s is at most maxPrefixLetters letters (none
// included).
func prefixWord(s string) bool {
	n := 0
	for _, r := range s {
		if n++; n > maxPrefixLetters || !unicode.IsLetter(r) {
			return false
		}
	}
	return true
}

// names are the identities s may stand for: its bare id and, for an
// email-like bare id local@domain, also local, without a +tag
// ("alice@example.com" and "alice+bot@example.com" name alice). Refusing an
// approver whose local part merely coincides is the fail-closed direction.
func names(s string) []string {
	id := bareID(s)
	out := []string{id}
	if local, _, ok := strings.Cut(id, "@"); ok {
		local, _, _ = strings.Cut(local, "+")
		if local = strings.TrimSpace(local); local != "" && local != id {
			out = append(out, local)
		}
	}
	return out
}

// isActor reports whether p is the requesting agent of a hold or the
// principal it acts for, whatever p's type: whether any name of p is a name
// of agent.id or agent.on_behalf_of.
func isActor(a envelope.Agent, p engine.Principal) bool {
	who := names(p.ID)
	if who[0] == "" {
		return true // an identity that folds to nothing cannot be told apart: refuse
	}
	for _, actor := range []string{a.ID, a.OnBehalfOf} {
		for _, name := range names(actor) {
			if name != "" && slices.Contains(who, name) {
				return true
			}
		}
	}
	return false
}

// canonicalPrincipal validates p and returns it with its canonical type and
// trimmed id.
func canonicalPrincipal(p engine.Principal) (engine.Principal, error) {
	t, ok := principalType(p.Type)
	if !ok {
		return engine.Principal{}, engine.InvalidField("principal", "type must be human, agent or automation")
	}
	id := strings.TrimSpace(p.ID)
	if bareID(id) == "" || len(id) > maxPrincipalIDLen {
		return engine.Principal{}, engine.InvalidField("principal", "id must be a non-empty identity of at most 256 bytes")
	}
	return engine.Principal{Type: t, ID: id}, nil
}
