package replay

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
)

const log = `{"event":"decision","decision_id":"d1","policy_decision":"allow","policy_rule":"svc.policy/default_allow","policy_input":{"n":1}}
{"event":"hold_resolution","decision_id":"d1"}

{"event":"decision","decision_id":"d2","verdict":"deny","rule_id":"svc.core/internal_error"}
{"event":"decision","decision_id":"d3","policy_decision":"allow","policy_rule":"svc.policy/default_allow","policy_input":{"n":3}}
{"event":"decision","decision_id":"d4","policy_decision":"require_approval","policy_rule":"svc.policy/x","policy_input":{"n":4}}
`

// evaluator answers by the input's n.
type evaluator map[string]engine.Verdict

func (e evaluator) Evaluate(_ context.Context, input json.RawMessage) (engine.Verdict, error) {
	v, ok := e[string(input)]
	if !ok {
		return engine.Verdict{}, errors.New("no verdict")
	}
	return v, nil
}

func TestReadKeepsReplayableDecisions(t *testing.T) {
	records, skipped, err := Read(strings.NewReader(log))
	require.NoError(t, err)
	assert.Equal(t, 1, skipped, "d2 never reached the policy")
	require.Len(t, records, 3)
	assert.Equal(t, Record{Line: 1, DecisionID: "d1", Old: Verdict{"allow", "svc.policy/default_allow"}, Input: json.RawMessage(`{"n":1}`)}, records[0])
	assert.Equal(t, 5, records[1].Line)

	_, _, err = Read(strings.NewReader("{\"event\":\"decision\"}\nnot json\n"))
	assert.ErrorContains(t, err, "audit line 2")
}

func TestRunReportsChangesInLogOrder(t *testing.T) {
	records, _, err := Read(strings.NewReader(log))
	require.NoError(t, err)
	held := engine.Verdict{Decision: "require_approval", Rule: "svc.policy/tight", Reason: "tighter"}
	rep, err := Run(context.Background(), evaluator{
		`{"n":1}`: held,
		`{"n":3}`: held,
		`{"n":4}`: {Decision: "require_approval", Rule: "svc.policy/x"},
	}, records, 2)
	require.NoError(t, err)
	assert.Equal(t, 3, rep.Replayed)
	assert.Equal(t, 2, rep.Changed)
	assert.Equal(t, []Transition{{Old: Verdict{"allow", "svc.policy/default_allow"}, New: Verdict{"require_approval", "svc.policy/tight"}, Count: 2}}, rep.Transitions)
	assert.Equal(t, "d1", rep.Changes[0].DecisionID)
	assert.Equal(t, "d3", rep.Changes[1].DecisionID)
	assert.Equal(t, "tighter", rep.Changes[1].Reason)

	var b strings.Builder
	require.NoError(t, rep.WriteTable(&b))
	assert.Contains(t, b.String(), "replayed 3 decisions (0 not replayable), 2 changed")
	assert.Contains(t, b.String(), "d3")

	_, err = Run(context.Background(), evaluator{}, records, 1)
	assert.ErrorContains(t, err, "evaluate the candidate pack", "a replay that could not ask everything fails")
}
