package holds

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

func TestFourEyes(t *testing.T) {
	tests := []struct {
		name           string
		agentID, onBeh string
		approver       engine.Principal
		refused        bool
	}{
		{"agent itself", "agent-7", "human:carol", engine.Principal{Type: "agent", ID: "agent-7"}, true},
		{"agent in another case", "agent-7", "human:carol", engine.Principal{Type: "agent", ID: "Agent-7"}, true},
		{"agent with a zero-width space", "agent-7", "human:carol", engine.Principal{Type: "agent", ID: "agent\u200b-7"}, true},
		{"agent in fullwidth", "agent-7", "human:carol", engine.Principal{Type: "agent", ID: "ａｇｅｎｔ－７"}, true},
		{"agent with a type prefix in its id", "agent-7", "human:carol", engine.Principal{Type: "agent", ID: "agent:agent-7"}, true},
		{"agent id stored with a prefix", "agent:Agent-7", "", engine.Principal{Type: "agent", ID: "agent-7"}, true},
		{"agent id as a human", "agent-7", "human:carol", engine.Principal{Type: "human", ID: "AGENT-7"}, true},
		{"principal acted for", "agent-7", "human:carol", engine.Principal{Type: "human", ID: "carol"}, true},
		{"principal acted for, folded", "agent-7", "human:carol", engine.Principal{Type: "human", ID: " CAROL\u200b"}, true},
		{"principal acted for, bare", "agent-7", "carol", engine.Principal{Type: "human", ID: "Carol"}, true},
		{"principal acted for, other type", "agent-7", "human:carol", engine.Principal{Type: "automation", ID: "carol"}, true},
		{"principal acted for, fullwidth prefix", "agent-7", "ＨＵＭＡＮ：carol", engine.Principal{Type: "human", ID: "carol"}, true},
		{"principal acted for, Cyrillic look-alike", "agent-7", "human:c\u0430rol", engine.Principal{Type: "human", ID: "carol"}, true},
		{"someone else", "agent-7", "human:carol", engine.Principal{Type: "human", ID: "alice"}, false},
		{"a different agent", "agent-7", "human:carol", engine.Principal{Type: "agent", ID: "agent-8"}, false},
		{"a longer name", "agent-7", "human:carol", engine.Principal{Type: "human", ID: "carol2"}, false},
		{"no on_behalf_of", "agent-7", "", engine.Principal{Type: "human", ID: "alice"}, false},
		{"any letters prefix is stripped", "agent-7", "team:carol", engine.Principal{Type: "human", ID: "carol"}, true},
		{"principal acted for, doubled colon", "agent-7", "human::carol", engine.Principal{Type: "human", ID: "carol"}, true},
		{"principal acted for, doubled prefix", "agent-7", "human:human:carol", engine.Principal{Type: "human", ID: "carol"}, true},
		{"principal acted for, as a user", "agent-7", "user:carol", engine.Principal{Type: "human", ID: "carol"}, true},
		{"principal acted for, by email", "agent-7", "carol@example.com", engine.Principal{Type: "human", ID: "human:carol"}, true},
		{"principal acted for, Hangul filler", "agent-7", "carol\u3164", engine.Principal{Type: "human", ID: "human:carol"}, true},
		{"principal acted for, grapheme joiner", "agent-7", "car\u034fol", engine.Principal{Type: "human", ID: "carol"}, true},
		{"principal acted for, small capitals", "agent-7", "human:ᴄᴀʀᴏʟ", engine.Principal{Type: "human", ID: "carol"}, true},
		{"someone else by email", "agent-7", "carol@example.com", engine.Principal{Type: "human", ID: "alice@example.com"}, false},
		{"someone else with a prefix", "agent-7", "user:carol", engine.Principal{Type: "human", ID: "human:alice"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.RequireVerified = false
			cfg.ResolutionPolicy = `{"default": ["human", "agent", "automation"]}`
			f := newFixture(t, cfg)
			h := newHold("h", t0)
			h.Envelope.Agent.ID, h.Envelope.Agent.OnBehalfOf = tt.agentID, tt.onBeh
			mustCreate(t, f.store, h)
			a := tt.approver
			_, err := f.svc.Resolve(context.Background(),
				engine.ResolveRequest{HoldID: "h", Decision: DecisionApprove, Asserted: &a})
			if tt.refused {
				requireErr(t, err, ErrActorIsApprover, map[string]any{"hold_id": "h"})
				return
			}
			require.NoError(t, err)
		})
	}
}

func TestFourEyesAppliesToVerifiedApprovers(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ResolverTokens = `{"tok-7": {"type": "agent", "id": "AGENT\u200b-7"}, "tok-c": {"type": "human", "id": "ｃａｒｏｌ"}}`
	cfg.ResolutionPolicy = `{"default": ["human", "agent"]}`
	f := newFixture(t, cfg)
	mustCreate(t, f.store, newHold("h", t0))
	for _, tok := range []string{"tok-7", "tok-c"} {
		for _, d := range []string{DecisionApprove, DecisionReject} {
			_, err := f.svc.Resolve(context.Background(), engine.ResolveRequest{HoldID: "h", Credential: tok, Decision: d})
			requireErr(t, err, ErrActorIsApprover, nil)
		}
	}
}

// TestIsActor: the spellings of an identity that four eyes must see
// through — prefixes, email addresses, invisible and look-alike characters
// — and people it must not confuse.
func TestIsActor(t *testing.T) {
	alice := engine.Principal{Type: TypeHuman, ID: "human:alice"}
	tests := []struct {
		name, agentID, onBehalfOf string
		approver                  engine.Principal
		want                      bool
	}{
		{"plain", "agent-7", "human:alice", alice, true},
		{"doubled colon", "agent-7", "human::alice", alice, true},
		{"doubled prefix", "agent-7", "human:human:alice", alice, true},
		{"user prefix", "agent-7", "user:alice", alice, true},
		{"unknown prefixes, stacked", "agent-7", "urn:idp:User:alice", alice, true},
		{"empty prefix", "agent-7", ":alice", alice, true},
		{"spaced prefixes", "agent-7", " human : user: alice", alice, true},
		{"fullwidth colons", "agent-7", "human：：alice", alice, true},
		{"ratio sign as a colon", "agent-7", "human\u2236alice", alice, true},
		{"email", "agent-7", "alice@example.com", alice, true},
		{"email with a prefix", "agent-7", "mailto:Alice@Example.com", alice, true},
		{"email with a +tag", "agent-7", "alice+bot@example.com", alice, true},
		{"approver by email, actor bare", "agent-7", "human:alice", engine.Principal{Type: TypeHuman, ID: "alice@example.com"}, true},
		{"same local part, other domain", "agent-7", "alice@example.com", engine.Principal{Type: TypeHuman, ID: "alice@corp.example"}, true},
		{"Hangul filler U+3164", "agent-7", "alice\u3164", alice, true},
		{"Hangul choseong filler U+115F", "agent-7", "ali\u115fce", alice, true},
		{"Hangul jungseong filler U+1160", "agent-7", "alice\u1160", alice, true},
		{"halfwidth Hangul filler U+FFA0", "agent-7", "alice\uffa0", alice, true},
		{"combining grapheme joiner", "agent-7", "alice\u034f", alice, true},
		{"variation selector", "agent-7", "alice\ufe0f", alice, true},
		{"Braille blank", "agent-7", "alice\u2800", alice, true},
		{"combining overlay", "agent-7", "a\u0338lice", alice, true},
		{"combining short stroke", "agent-7", "a\u0335lice", alice, true},
		{"small capitals", "agent-7", "ᴀʟɪᴄᴇ", alice, true},
		{"approver spells it with a filler", "agent-7", "human:alice", engine.Principal{Type: TypeHuman, ID: "alice\u3164"}, true},
		{"the agent itself, prefixed twice", "agent:agent:agent-7", "", engine.Principal{Type: TypeAgent, ID: "agent-7"}, true},
		{"an id that folds to nothing", "agent-7", "human:alice", engine.Principal{Type: TypeHuman, ID: "\u3164\u2800"}, true},
		{"an id that is only prefixes", "agent-7", "human:alice", engine.Principal{Type: TypeHuman, ID: "human::"}, true},
		{"someone else", "agent-7", "human:alice", engine.Principal{Type: TypeHuman, ID: "bob"}, false},
		{"someone else by email", "agent-7", "alice@example.com", engine.Principal{Type: TypeHuman, ID: "bob@example.com"}, false},
		{"someone else, same domain", "agent-7", "alice@example.com", engine.Principal{Type: TypeHuman, ID: "example.com"}, false},
		{"a longer name", "agent-7", "user:alice", engine.Principal{Type: TypeHuman, ID: "alice2"}, false},
		{"an accented name", "agent-7", "human:alice", engine.Principal{Type: TypeHuman, ID: "alicé"}, false},
		{"a prefix of digits is kept", "agent-7", "42:alice", alice, false},
		{"no on_behalf_of", "agent-7", "", alice, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := isActor(envelope.Agent{ID: tt.agentID, OnBehalfOf: tt.onBehalfOf}, tt.approver)
			assert.Equal(t, tt.want, got, "agent %q on behalf of %q, approver %q", tt.agentID, tt.onBehalfOf, tt.approver.ID)
		})
	}
}

func TestBareID(t *testing.T) {
	tests := map[string]string{
		"alice":                    "alice",
		"human:alice":              "alice",
		"Human:Alice":              "alice",
		"human::alice":             "alice",
		"human:human:alice":        "alice",
		"user:alice":               "alice",
		" urn : idp : alice ":      "alice",
		"alice@example.com":        "alice@example.com",
		"mailto:alice@example.com": "alice@example.com",
		"alice\u3164":              "alice",
		"a\u0338lice\u2800":        "alice",
		"human:":                   "",
		"::":                       "",
		"42:alice":                 "42:alice",
		"agent-7:alice":            "agent-7:alice",
		strings.Repeat("x", maxPrefixLetters) + ":alice":   "alice",
		strings.Repeat("x", maxPrefixLetters+1) + ":alice": strings.Repeat("x", maxPrefixLetters+1) + ":alice",
	}
	for in, want := range tests {
		assert.Equal(t, want, bareID(in), "bareID(%q)", in)
	}
}
