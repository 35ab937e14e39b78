package engine_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
	"github.com/svc-dev/svc/engine/opa"
	"github.com/svc-dev/svc/holds"
	"github.com/svc-dev/svc/ledger"
	"github.com/svc-dev/svc/rego"
)

// pipeline is an engine over real parts: the opa binary on the bundled
// pack, a SQLite ledger and hold store, and an audit log with its JSONL.
type pipeline struct {
	engine  *engine.Engine
	db      *ledger.DB
	budgets *ledger.Budgets
	audit   *ledger.Audit
	holds   *holds.Store
}

// newPipeline builds the engine over real SQLite, audit log and opa.
func newPipeline(t *testing.T, opaBin string, obs engine.Observer) *pipeline {
	t.Helper()
	pack, cleanup, err := rego.Materialize()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, cleanup()) })
	return newPipelineWith(t, opa.NewEvalEvaluator(opaBin, pack, 10*time.Second), obs)
}

// newPipelineWith builds the engine over real SQLite and audit log with the
// given evaluator.
func newPipelineWith(t *testing.T, eval engine.Evaluator, obs engine.Observer) *pipeline {
	t.Helper()
	return newPipelineConfig(t, engine.Config{Version: "test", Window: time.Hour, HoldTTL: time.Hour}, eval, obs)
}

// newPipelineConfig is newPipelineWith with the engine's settings.
func newPipelineConfig(t *testing.T, cfg engine.Config, eval engine.Evaluator, obs engine.Observer) *pipeline {
	t.Helper()
	p := openPipeline(t, t.TempDir())
	e, err := engine.New(cfg, engine.Deps{
		Evaluator: eval,
		Budgets:   p.budgets, Holds: p.holds, Recorder: p.audit, Observer: obs, Logger: zerolog.Nop(),
	})
	require.NoError(t, err)
	p.engine = e
	return p
}

// openPipeline opens the stores of a pipeline over dir, as `svc serve`
// wires them: the SQLite database, the budgets, the hold store and the
// audit log with its JSONL. They are closed with the test; the engine is
// the caller's to build.
func openPipeline(t *testing.T, dir string) *pipeline {
	t.Helper()
	ctx := context.Background()
	db, err := ledger.Open(ctx, filepath.Join(dir, "svc.db"), ledger.DurabilityFull)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, db.Close()) })
	budgets, err := ledger.NewBudgets(ctx, db)
	require.NoError(t, err)
	store, err := holds.NewStore(ctx, db.SQL())
	require.NoError(t, err)
	audit, err := ledger.NewAudit(ctx, db, filepath.Join(dir, "audit.jsonl"), store, zerolog.Nop())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, audit.Close()) })
	return &pipeline{db: db, budgets: budgets, audit: audit, holds: store}
}

func realOPA(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("opa")
	require.NoError(t, err, "opa binary not found; run scripts/install-opa")
	return bin
}

// decide decides an internal action of count objects in staging.
func (p *pipeline) decide(t *testing.T, session, verb string, count int) engine.Decision {
	t.Helper()
	return p.decideIn(t, session, verb, count, "staging", "reversible", "single")
}

func (p *pipeline) decideIn(t *testing.T, session, verb string, count int, environment, reversibility, blast string) engine.Decision {
	t.Helper()
	d, _ := p.decideStatus(t, session, verb, count, environment, reversibility, blast)
	return d
}

// decideStatus decides and returns the decision with its HTTP status.
func (p *pipeline) decideStatus(t *testing.T, session, verb string, count int, environment, reversibility, blast string) (engine.Decision, int) {
	t.Helper()
	env, err := envelope.ParseEnvelope(fmt.Appendf(nil, `{"svc_version":"0.2",
		"agent":{"id":"agent-1","on_behalf_of":"human:alice","session_id":%q},
		"action":{"namespace":"db","verb":%q,"ability":"db/x"},
		"target":{"kind":"table","ref":"t","environment":%q},"params":{},"magnitude":{"count":%d},
		"axes":{"reversibility":%q,"blast_radius":%q,"externality":"internal"},
		"approval":{"present":false,"hold_id":null},"context":{},
		"meta":{"timestamp":"2026-01-01T00:00:00Z","nonce":"n","signature":"s"}}`,
		session, verb, environment, count, reversibility, blast))
	require.NoError(t, err)
	return p.engine.Decide(context.Background(), engine.Request{Envelope: env, Received: time.Now()})
}

func (p *pipeline) totals(t *testing.T, session string) engine.Totals {
	t.Helper()
	got, err := p.budgets.Usage(context.Background(), engine.ScopeSession, session, time.Now().Add(-time.Hour))
	require.NoError(t, err)
	return got.Totals
}

// An allow's charge rides in its audit commit: an allow whose record cannot
// be written is denied and charges nothing.
func TestChargeCommitsWithTheAuditRecord(t *testing.T) {
	p := newPipeline(t, realOPA(t), nil)
	for range 2 {
		require.Equal(t, engine.Allow, p.decide(t, "s", "delete", 3).Decision)
	}
	assert.Equal(t, engine.Totals{Deletes: 6, Objects: 6}, p.totals(t, "s"))
	rows, err := p.audit.Records(context.Background(), engine.EventDecision)
	require.NoError(t, err)
	assert.Len(t, rows, 2)

	_, err = p.db.SQL().ExecContext(context.Background(), `DROP TABLE audit`)
	require.NoError(t, err)
	d := p.decide(t, "s", "delete", 3)
	assert.Equal(t, engine.Deny, d.Decision)
	assert.Equal(t, engine.RuleInternalError, d.Rule)
	assert.Equal(t, engine.Totals{Deletes: 6, Objects: 6}, p.totals(t, "s"))
}

// approvalPack writes a policy pack answering require_approval under rule
// to every input.
func approvalPack(t *testing.T, rule string) engine.Evaluator {
	t.Helper()
	dir := t.TempDir()
	pack := `package svc.policy

decision := {"decision": "require_approval", "rule": "` + rule + `", "reason": "systemic change"}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.rego"), []byte(pack), 0o600))
	return opa.NewEvalEvaluator(realOPA(t), dir, 10*time.Second)
}

// A policy that answers require_approval under the terminal rule (a custom
// pack; the bundled one denies there) gets a deny and no hold: the hold
// could never be resolved, and its agent would wait for it in vain.
func TestRequireApprovalUnderTheTerminalRuleDenies(t *testing.T) {
	p := newPipelineWith(t, approvalPack(t, engine.RuleTerminal), nil)
	d, status := p.decideStatus(t, "s", "delete", 1, "production", "irreversible", "systemic")
	assert.Equal(t, 200, status)
	assert.Equal(t, engine.Deny, d.Decision)
	assert.Equal(t, engine.RuleTerminal, d.Rule)
	assert.Contains(t, d.Reason, "systemic change; denied: rule "+engine.RuleTerminal+" is terminal")
	assert.Empty(t, d.HoldID)
	assert.Empty(t, d.ExpiresTS)
	rows, err := p.audit.Records(context.Background(), "")
	require.NoError(t, err)
	require.Len(t, rows, 1, "the deny alone is on record: no hold")
	assert.Contains(t, string(rows[0].Body), `"verdict":"deny"`)
}

// The engine and the holds service share one terminal set: a rule the
// service is configured to treat as terminal (whose holds it would never
// resolve) is denied by the engine too, while other rules still raise holds.
func TestRequireApprovalUnderAConfiguredTerminalRuleDenies(t *testing.T) {
	const custom = "svc.policy/custom_terminal"
	for _, tc := range []struct {
		rule     string
		decision string
	}{
		{custom, engine.Deny},
		{"svc.policy/custom_hold", engine.RequireApproval},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			p := openPipeline(t, t.TempDir())
			svc, err := holds.NewService(p.holds, holds.Config{TerminalRules: []string{custom}}, p.audit,
				engine.NopPublisher{}, zerolog.Nop())
			require.NoError(t, err)
			p.engine, err = engine.New(engine.Config{Version: "test", Window: time.Hour, HoldTTL: time.Hour, Terminal: svc.Terminal},
				engine.Deps{Evaluator: approvalPack(t, tc.rule), Budgets: p.budgets, Holds: p.holds, Recorder: p.audit,
					Logger: zerolog.Nop()})
			require.NoError(t, err)
			d, status := p.decideStatus(t, "s", "delete", 1, "production", "irreversible", "systemic")
			assert.Equal(t, 200, status)
			assert.Equal(t, tc.decision, d.Decision)
			assert.Equal(t, tc.rule, d.Rule)
			assert.Equal(t, tc.decision == engine.RequireApproval, d.HoldID != "", "a hold only where it can be resolved")
		})
	}
}

// A decision that creates a hold is on record with the hold's creation,
// the decision first.
func TestHoldCreationIsRecordedWithTheDecision(t *testing.T) {
	p := newPipeline(t, realOPA(t), nil)
	d := p.decideIn(t, "s", "delete", 1, "production", "irreversible", "broad")
	require.Equal(t, engine.RequireApproval, d.Decision)
	require.NotEmpty(t, d.HoldID)
	rows, err := p.audit.Records(context.Background(), "")
	require.NoError(t, err)
	require.Len(t, rows, 2)
	assert.Equal(t, engine.EventDecision, rows[0].Kind)
	assert.Equal(t, engine.EventHoldResolution, rows[1].Kind)
	for _, row := range rows {
		assert.Equal(t, d.DecisionID, row.DecisionID)
	}
	assert.Contains(t, string(rows[1].Body), `"hold_id":"`+d.HoldID+`"`)
	assert.Contains(t, string(rows[1].Body), `"status":"pending"`)
}

// Concurrent deletes of one session never exceed its budget of 20: each
// decision reads totals that include every charge granted before it.
func TestConcurrentDecisionsOfASessionRespectTheBudget(t *testing.T) {
	p := newPipeline(t, realOPA(t), nil)
	var wg sync.WaitGroup
	verdicts := make([]string, 12)
	for i := range verdicts {
		wg.Go(func() { verdicts[i] = p.decide(t, "race", "delete", 2).Decision })
	}
	wg.Wait()
	count := map[string]int{}
	for _, v := range verdicts {
		count[v]++
	}
	assert.Equal(t, map[string]int{engine.Allow: 10, engine.RequireApproval: 2}, count)
	assert.Equal(t, engine.Totals{Deletes: 20, Objects: 20}, p.totals(t, "race"))
}

// observed records what the engine reports.
type observed struct {
	mu        sync.Mutex
	decided   []string // verdict rule
	evaluated []error
}

func (o *observed) Decided(verdict, rule string, latency time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if latency > 0 {
		o.decided = append(o.decided, verdict+" "+rule)
	}
}

func (o *observed) Evaluated(latency time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if latency > 0 {
		o.evaluated = append(o.evaluated, err)
	}
}

func TestObserverSeesDecisionsAndEvaluations(t *testing.T) {
	failing, err := filepath.Abs(filepath.Join("opa", "testdata", "fakeopa", "fail.sh"))
	require.NoError(t, err)
	_, err = os.Stat(failing)
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		opa     string
		decided string
		evalErr bool
	}{
		{"healthy opa", "", "allow svc.policy/read_only_internal", false},
		{"failing opa", failing, "deny svc.core/internal_error", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := &observed{}
			bin := tc.opa
			if bin == "" {
				bin = realOPA(t)
			}
			p := newPipeline(t, bin, obs)
			p.decide(t, "s", "read", 1)
			assert.Equal(t, []string{tc.decided}, obs.decided)
			require.Len(t, obs.evaluated, 1)
			assert.Equal(t, tc.evalErr, obs.evaluated[0] != nil)
		})
	}
}
