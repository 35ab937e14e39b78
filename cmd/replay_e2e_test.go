package cmd_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// svc replay over a recorded audit log shows exactly the decisions a
// changed threshold flips, exits 1 when anything changes and 0 when
// nothing does.
func TestReplayShowsWhatAChangedThresholdFlips(t *testing.T) {
	env := baseEnv(t)
	p := startEngine(t, env)
	var ids []string
	for range 5 { // 5, 10, 15, 20 allowed; the fifth held (25 > 20)
		r := p.decide(t, envelope(map[string]any{"agent.session_id": "replay", "action.verb": "delete", "magnitude.count": 5}))
		require.Equal(t, 200, r.Status, "%v", r.Body)
		ids = append(ids, r.str("decision_id"))
	}
	p.decide(t, envelope(map[string]any{"agent.session_id": "replay-read"}))
	p.stop(t)

	same := runSvc(t, nil, nil, "replay", "--audit", env["SVC_AUDIT_LOG"])
	assert.Equal(t, 0, same.code, same.output())
	assert.Contains(t, same.stdout, "replayed 6 decisions (0 not replayable), 0 changed")

	tighter := packWith(t, func(svc map[string]any) {
		svc["thresholds"].(map[string]any)["deletes"] = 10
	})
	table := runSvc(t, nil, nil, "replay", "--audit", env["SVC_AUDIT_LOG"], "--policy-dir", tighter)
	assert.Equal(t, 1, table.code, table.output())
	assert.Contains(t, table.stdout, "replayed 6 decisions (0 not replayable), 2 changed")
	assert.Contains(t, table.stdout, "allow svc.policy/default_allow")
	assert.Contains(t, table.stdout, "require_approval svc.policy/session_delete_budget")

	out := runSvc(t, nil, nil, "replay", "--audit", env["SVC_AUDIT_LOG"], "--policy-dir", tighter, "-o", "json")
	assert.Equal(t, 1, out.code, out.output())
	var rep struct {
		Replayed, Changed int
		Transitions       []struct {
			Old, New struct{ Decision, Rule string }
			Count    int
		}
		Changes []struct {
			DecisionID string `json:"decision_id"`
			New        struct{ Decision, Rule string }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out.stdout), &rep), out.stdout)
	assert.Equal(t, 6, rep.Replayed)
	assert.Equal(t, 2, rep.Changed)
	require.Len(t, rep.Transitions, 1)
	assert.Equal(t, 2, rep.Transitions[0].Count)
	assert.Equal(t, "svc.policy/default_allow", rep.Transitions[0].Old.Rule)
	assert.Equal(t, "svc.policy/session_delete_budget", rep.Transitions[0].New.Rule)
	require.Len(t, rep.Changes, 2)
	assert.Equal(t, ids[2], rep.Changes[0].DecisionID, "the third delete (10 prior + 5 > 10) flips")
	assert.Equal(t, ids[3], rep.Changes[1].DecisionID, "and the fourth; the fifth was already held")

	bad := runSvc(t, nil, nil, "replay", "--audit", "/nonexistent/audit.jsonl")
	assert.Equal(t, 2, bad.code, bad.output())
}

// svc policy test runs the bundled pack's tests, and an operator's tests
// against the input document the engine builds (svc.testing).
func TestPolicyTest(t *testing.T) {
	bundled := runSvc(t, nil, nil, "policy", "test")
	assert.Equal(t, 0, bundled.code, bundled.output())
	assert.Contains(t, bundled.stdout, "PASS:")

	pack := packWith(t, func(map[string]any) {})
	writeFile(t, pack, "mine_test.rego", `package mine_test

import data.svc.policy
import data.svc.testing

test_real_shape_update_allowed if {
	policy.decision.rule == "svc.policy/default_allow" with input as testing.input_document
}

test_delete_in_production_of_many if {
	d := policy.decision with input as testing.input_with({"envelope": {"action": {"verb": "delete"}, "magnitude": {"count": 21}}})
	d.rule == "svc.policy/session_delete_budget"
}
`)
	mine := runSvc(t, nil, nil, "policy", "test", "--policy-dir", pack, "--", "--run", "mine_test")
	assert.Equal(t, 0, mine.code, mine.output())
	assert.Contains(t, mine.stdout, "PASS: 2/2")

	writeFile(t, pack, "wrong_test.rego", `package wrong_test

import data.svc.policy
import data.svc.testing

test_wrong if {
	policy.decision.rule == "svc.policy/frozen" with input as testing.input_document
}
`)
	wrong := runSvc(t, nil, nil, "policy", "test", "--policy-dir", pack, "--", "--run", "wrong_test")
	assert.NotEqual(t, 0, wrong.code, wrong.output())
	assert.Contains(t, wrong.stdout, "FAIL")
}

// writeFile writes body to dir/name.
func writeFile(t *testing.T, dir, name, body string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600))
}
