package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
)

// panicking is an evaluator that panics: a fault no real opa can produce
// inside svc on demand.
type panicking struct{}

func (panicking) Evaluate(context.Context, json.RawMessage) (engine.Verdict, error) {
	panic("evaluator exploded")
}

// Each fault of the decision path denies with its rule and HTTP 500, and
// the deny is on record.
func TestDecisionPathFaultsDenyOnRecord(t *testing.T) {
	cases := []struct {
		name  string
		table string // dropped from the real database to inject the fault
		eval  engine.Evaluator
		verb  string
		held  bool
		rule  string
	}{
		{name: "ledger unreadable", table: "charges", verb: "read", rule: engine.RuleInternalError},
		{name: "hold not persisted", table: "holds", verb: "delete", held: true, rule: engine.RuleHoldCreationFailed},
		{name: "evaluator panics", eval: panicking{}, verb: "read", rule: engine.RuleInternalError},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var p *pipeline
			if c.eval != nil {
				p = newPipelineWith(t, c.eval, nil)
			} else {
				p = newPipeline(t, realOPA(t), nil)
			}
			if c.table != "" {
				_, err := p.db.SQL().ExecContext(context.Background(), "DROP TABLE "+c.table)
				require.NoError(t, err)
			}
			environment, reversibility, blast := "staging", "reversible", "single"
			if c.held {
				environment, reversibility, blast = "production", "irreversible", "broad"
			}
			d, status := p.decideStatus(t, "s", c.verb, 1, environment, reversibility, blast)
			assert.Equal(t, 500, status)
			assert.Equal(t, engine.Deny, d.Decision)
			assert.Equal(t, c.rule, d.Rule)
			assert.Empty(t, d.HoldID)
			rows, err := p.audit.Records(context.Background(), engine.EventDecision)
			require.NoError(t, err)
			require.Len(t, rows, 1, "the deny is on record")
			assert.Equal(t, d.DecisionID, rows[0].DecisionID)
			assert.Contains(t, string(rows[0].Body), `"verdict":"deny"`)
		})
	}
}
