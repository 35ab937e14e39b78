package holds

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
)

func TestConfigValidate(t *testing.T) {
	dir := t.TempDir()
	good := writeTokens(t, dir, testTokens)
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", DefaultConfig(), true},
		{"zero config", Config{}, true},
		{"tokens file", Config{ResolverTokens: good}, true},
		{"inline tokens", Config{ResolverTokens: `{"t": {"type": "Automation", "id": "ci"}}`}, true},
		{"policy", Config{ResolutionPolicy: `{"default": ["human"], "svc.policy/session_delete_budget": ["human", "agent"]}`}, true},
		{"policy nobody may resolve", Config{ResolutionPolicy: `{"svc.policy/x": []}`}, true},
		{"terminal rules", Config{TerminalRules: []string{"svc.policy/a"}}, true},
		{"policy not JSON", Config{ResolutionPolicy: `human`}, false},
		{"policy null", Config{ResolutionPolicy: `null`}, false},
		{"policy array", Config{ResolutionPolicy: `["human"]`}, false},
		{"policy unknown type", Config{ResolutionPolicy: `{"default": ["admin"]}`}, false},
		{"policy trailing data", Config{ResolutionPolicy: `{"default": ["human"]} {}`}, false},
		{"policy blank rule", Config{ResolutionPolicy: `{" ": ["human"]}`}, false},
		{"tokens file missing", Config{ResolverTokens: filepath.Join(dir, "absent.json")}, false},
		{"tokens directory", Config{ResolverTokens: dir}, false},
		{"tokens not an object", Config{ResolverTokens: `{"t": "human:alice"}`}, false},
		{"tokens unknown field", Config{ResolverTokens: `{"t": {"type": "human", "id": "a", "admin": true}}`}, false},
		{"tokens empty token", Config{ResolverTokens: `{"": {"type": "human", "id": "a"}}`}, false},
		{"tokens missing id", Config{ResolverTokens: `{"t": {"type": "human"}}`}, false},
		{"tokens null", Config{ResolverTokens: writeTokens(t, t.TempDir(), "null")}, false},
		{"tokens empty file", Config{ResolverTokens: writeTokens(t, t.TempDir(), "")}, false},
		{"blank terminal rule", Config{TerminalRules: []string{""}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
		})
	}
}

// A key given twice, or two keys equal once trimmed, would let map order
// or the last duplicate pick the policy or the principal of a token: both
// are refused at start-up, naming the variable and never the token.
func TestConfigRefusesAmbiguousKeys(t *testing.T) {
	const secret = "s3cr3t-resolver-token"
	tests := []struct {
		name     string
		cfg      Config
		variable string
		reason   string
	}{
		{"policy keys equal once trimmed", Config{ResolutionPolicy: `{"default": ["human"], " default ": ["automation"]}`},
			"SVC_RESOLUTION_POLICY", `rule "default" is listed more than once`},
		{"policy duplicate key", Config{ResolutionPolicy: `{"default": ["human"], "default": ["automation"]}`},
			"SVC_RESOLUTION_POLICY", `rule "default" is listed more than once`},
		{"policy duplicate rule", Config{ResolutionPolicy: `{"svc.policy/x": ["agent"], "svc.policy/x\t": []}`},
			"SVC_RESOLUTION_POLICY", `rule "svc.policy/x" is listed more than once`},
		{"policy duplicate through an escape", Config{ResolutionPolicy: `{"default": ["human"], "d\u0065fault": ["agent"]}`},
			"SVC_RESOLUTION_POLICY", `rule "default" is listed more than once`},
		{"duplicate token", Config{ResolverTokens: `{"` + secret + `": {"type": "human", "id": "alice"}, "` +
			secret + `": {"type": "automation", "id": "ci"}}`},
			"SVC_RESOLVER_TOKENS", "entries 1 and 2 have the same token"},
		{"duplicate token through an escape", Config{ResolverTokens: `{"t": {"type": "human", "id": "a"}, "b": {"type": "human", "id": "b"}, "\u0074": {"type": "agent", "id": "c"}}`},
			"SVC_RESOLVER_TOKENS", "entries 1 and 3 have the same token"},
		{"duplicate type in an entry", Config{ResolverTokens: `{"t": {"type": "agent", "type": "human", "id": "x"}}`},
			"SVC_RESOLVER_TOKENS", `member "type": members are "type" and "id", each once, spelled exactly`},
		{"type in another case", Config{ResolverTokens: `{"t": {"TYPE": "human", "id": "x"}}`},
			"SVC_RESOLVER_TOKENS", `member "TYPE"`},
		{"unknown member in an entry", Config{ResolverTokens: `{"t": {"type": "human", "id": "x", "admin": true}}`},
			"SVC_RESOLVER_TOKENS", `member "admin"`},
		{"duplicate token in a file", Config{ResolverTokens: writeTokens(t, t.TempDir(), `{"`+secret+`": {"type": "human", "id": "a"}, "`+
			secret+`": {"type": "human", "id": "b"}}`)},
			"SVC_RESOLVER_TOKENS", "entries 1 and 2 have the same token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			require.Error(t, err)
			require.ErrorContains(t, err, tt.variable)
			require.ErrorContains(t, err, tt.reason)
			require.NotContains(t, err.Error(), secret, "the error must not echo a token")
		})
	}
}

func TestResolutionPolicyKeysStillTrimmed(t *testing.T) {
	p, err := parsePolicy(`{" default ": ["agent"], "svc.policy/y": ["human"], "svc.policy/z ": ["automation"]}`)
	require.NoError(t, err)
	require.Equal(t, []string{TypeAgent}, p.allowed("svc.policy/x"))
	require.Equal(t, []string{TypeAutomation}, p.allowed("svc.policy/z"))
}

func TestResolutionPolicy(t *testing.T) {
	const budget = "svc.policy/session_delete_budget"
	tests := []struct {
		name, policy, rule, token string
		allowed                   bool
	}{
		{"default human", "", "svc.policy/irreversible_broad_prod", "tok-alice", true},
		{"default refuses agent", "", budget, "tok-bot", false},
		{"default refuses automation", "", budget, "tok-ci", false},
		{"rule opts agents in", `{"default": ["human"], "` + budget + `": ["human", "agent"]}`, budget, "tok-bot", true},
		{"opt-in is per rule", `{"default": ["human"], "` + budget + `": ["human", "agent"]}`, "svc.policy/irreversible_broad_prod", "tok-bot", false},
		{"rule opt-in leaves automation out", `{"` + budget + `": ["Human", "AGENT"]}`, budget, "tok-ci", false},
		{"rule list replaces the default", `{"` + budget + `": ["agent"]}`, budget, "tok-alice", false},
		{"default replaced", `{"default": ["automation"]}`, budget, "tok-ci", true},
		{"default replaced refuses human", `{"default": ["automation"]}`, budget, "tok-alice", false},
		{"nobody", `{"` + budget + `": []}`, budget, "tok-alice", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := verifiedConfig(t)
			cfg.ResolutionPolicy = tt.policy
			f := newFixture(t, cfg)
			h := newHold("h", t0)
			h.Rule = tt.rule
			mustCreate(t, f.store, h)
			_, err := f.svc.Resolve(context.Background(), approve("h", tt.token))
			if tt.allowed {
				require.NoError(t, err)
				return
			}
			requireErr(t, err, ErrTypeNotAllowed, map[string]any{"rule": tt.rule})
			got, err := f.store.Get(context.Background(), "h", f.clock.Now())
			require.NoError(t, err)
			require.Equal(t, engine.HoldPending, got.Status)
		})
	}
}
