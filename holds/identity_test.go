package holds

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
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
		{"unknown prefix is not stripped", "agent-7", "team:carol", engine.Principal{Type: "human", ID: "carol"}, false},
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
