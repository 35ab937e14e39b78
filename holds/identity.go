package holds

import (
	"strings"

	"github.com/svc-dev/svc/engine"
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
	switch t := engine.Fold(s); t {
	case TypeHuman, TypeAgent, TypeAutomation:
		return t, true
	}
	return "", false
}

// bareID is the folded identity with one <type>: prefix removed, so that
// "human:alice", "Alice" and "ａｌｉｃｅ" all name alice.
func bareID(s string) string {
	f := engine.Fold(s)
	if t, rest, ok := strings.Cut(f, ":"); ok {
		if _, known := principalType(t); known {
			return strings.TrimSpace(rest)
		}
	}
	return f
}

// isActor reports whether p is the requesting agent of a hold or the
// principal it acts for, whatever p's type.
func isActor(a engine.Agent, p engine.Principal) bool {
	who := bareID(p.ID)
	if who == "" {
		return true // an identity that folds to nothing cannot be told apart: refuse
	}
	for _, actor := range []string{a.ID, a.OnBehalfOf} {
		if bareID(actor) == who {
			return true
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
