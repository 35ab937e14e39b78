package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/opa"
)

// verdictPack writes a policy pack whose decision is the Rego object
// verdict.
func verdictPack(t *testing.T, verdict string) string {
	t.Helper()
	dir := t.TempDir()
	module := "package svc.policy\n\ndecision := " + verdict + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.rego"), []byte(module), 0o600))
	return dir
}

// checkedEvaluator is an evaluator with its start-up probe.
type checkedEvaluator interface {
	engine.Evaluator
	Check(ctx context.Context) error
}

// TestVerdictMemberNamesAreExact runs packs whose verdicts spell their
// members another way through the real opa, in eval and in server mode:
// such a verdict is an evaluation fault, denied with HTTP 500 whatever it
// says, where encoding/json's case-insensitive, last-wins matching would
// have read "deciſion":"allow" (sorted after "decision" by OPA) as an
// allow. A verdict with unrelated extra members keeps its decision.
func TestVerdictMemberNamesAreExact(t *testing.T) {
	bin := realOPA(t)
	packs := []struct {
		name     string
		verdict  string
		fault    string // the evaluation error; "" means the verdict stands
		decision string
		rule     string
	}{
		{"folded decision after decision",
			`{"decision": "deny", "rule": "svc.policy/strict", "reason": "policy says deny", "deciſion": "allow"}`,
			`"deciſion" spells "decision" another way`, engine.Deny, engine.RuleInternalError},
		{"case variants only",
			`{"Decision": "allow", "RULE": "svc.policy/loose", "Reason": "policy says allow"}`,
			`spells "decision" another way`, engine.Deny, engine.RuleInternalError},
		{"rule in another case beside rule",
			`{"decision": "allow", "rule": "svc.policy/loose", "Rule": "svc.policy/strict", "reason": "x"}`,
			`"Rule" spells "rule" another way`, engine.Deny, engine.RuleInternalError},
		{"unrelated extra members",
			`{"decision": "allow", "rule": "svc.policy/extra", "reason": "extras are ignored", "decisions": ["deny"], "why": {"Decision": "deny"}}`,
			"", engine.Allow, "svc.policy/extra"},
	}
	modes := []struct {
		name  string
		start func(t *testing.T, dir string) checkedEvaluator
	}{
		{"eval", func(_ *testing.T, dir string) checkedEvaluator {
			return opa.NewEvalEvaluator(bin, dir, 10*time.Second)
		}},
		{"server", func(t *testing.T, dir string) checkedEvaluator {
			s, err := opa.StartOPAServer(opa.OPAServerConfig{Bin: bin, PolicyDir: dir, Timeout: 10 * time.Second, Logger: zerolog.Nop()})
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, s.Close()) })
			return s
		}},
	}
	for _, mode := range modes {
		for _, pack := range packs {
			t.Run(mode.name+"/"+pack.name, func(t *testing.T) {
				t.Parallel()
				ev := mode.start(t, verdictPack(t, pack.verdict))
				// Check waits for a server to be up, and reports the fault.
				err := ev.Check(t.Context())
				if pack.fault == "" {
					require.NoError(t, err)
				} else {
					require.ErrorContains(t, err, pack.fault)
				}
				d, status := newPipelineWith(t, ev, nil).decideStatus(t, "s", "read", 1, "staging", "reversible", "single")
				assert.Equal(t, pack.decision, d.Decision)
				assert.Equal(t, pack.rule, d.Rule)
				if pack.fault == "" {
					assert.Equal(t, 200, status)
					return
				}
				assert.Equal(t, 500, status)
				assert.Contains(t, d.Reason, "policy evaluation failed")
			})
		}
	}
}
