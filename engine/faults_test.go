package engine_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/opa"
	"github.com/svc-dev/svc/rego"
)

// panicking is an evaluator that panics: a fault no real opa can produce
// inside svc on demand.
type panicking struct{}

func (panicking) Evaluate(context.Context, json.RawMessage) (engine.Verdict, error) {
	panic("evaluator exploded")
}

// stuck is an evaluator that never answers: it gives up when its context
// ends or after timeout, as the real evaluators do at SVC_OPA_TIMEOUT.
type stuck struct{ timeout time.Duration }

func (s stuck) Evaluate(ctx context.Context, _ json.RawMessage) (engine.Verdict, error) {
	select {
	case <-ctx.Done():
		return engine.Verdict{}, ctx.Err()
	case <-time.After(s.timeout):
		return engine.Verdict{}, context.DeadlineExceeded
	}
}

// Decisions queued behind a decision of their session whose evaluation
// hangs are each denied by their own deadline (SVC_OPA_TIMEOUT after their
// arrival), not one deadline after another, and each deny is on record.
func TestDecisionsQueuedBehindAStuckEvaluationDenyByTheirDeadline(t *testing.T) {
	// One deadline after another would answer the last of n after n
	// deadlines (4 s), far beyond each one's deadline plus the slack below.
	const deadline = 500 * time.Millisecond
	cfg := engine.Config{Version: "test", Window: time.Hour, HoldTTL: time.Hour, Deadline: deadline}
	p := newPipelineConfig(t, cfg, stuck{timeout: deadline}, nil)
	const n = 8
	took, statuses := make([]time.Duration, n), make([]int, n)
	decisions := make([]engine.Decision, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			start := time.Now()
			decisions[i], statuses[i] = p.decideStatus(t, "one-session", "read", 1, "staging", "reversible", "single")
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	for i := range n {
		assert.Equal(t, 500, statuses[i])
		assert.Equal(t, engine.Deny, decisions[i].Decision)
		assert.Equal(t, engine.RuleInternalError, decisions[i].Rule)
		assert.NotEmpty(t, decisions[i].EnvelopeHash)
		assert.Less(t, took[i], deadline+time.Second, "decision %d answered after its deadline", i)
	}
	rows, err := p.audit.Records(context.Background(), engine.EventDecision)
	require.NoError(t, err)
	assert.Len(t, rows, n, "every deny is on record")
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

// degradedRecord is what a test reads of a fail-closed deny recorded
// outside a commit.
type degradedRecord struct {
	DecisionID string `json:"decision_id"`
	Verdict    string `json:"verdict"`
	RuleID     string `json:"rule_id"`
	Degraded   bool   `json:"degraded"`
	AuditError string `json:"audit_error"`
}

// lastFileRecord returns the last line of the pipeline's JSONL file.
func (p *pipeline) lastFileRecord(t *testing.T) degradedRecord {
	t.Helper()
	body, err := os.ReadFile(p.auditPath())
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	var rec degradedRecord
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &rec))
	return rec
}

// lastMirrorRecord returns the last decision row of the mirror.
func (p *pipeline) lastMirrorRecord(t *testing.T) degradedRecord {
	t.Helper()
	rows, err := p.audit.Records(context.Background(), engine.EventDecision)
	require.NoError(t, err)
	require.NotEmpty(t, rows)
	var rec degradedRecord
	require.NoError(t, json.Unmarshal(rows[len(rows)-1].Body, &rec))
	return rec
}

// lockDB holds an exclusive lock on the pipeline's database from another
// connection until the test ends, as another process could: every write
// fails once SQLite's busy timeout (5 s) has passed.
func lockDB(t *testing.T, p *pipeline) {
	t.Helper()
	ctx := context.Background()
	other, err := sql.Open("sqlite3", p.db.Path())
	require.NoError(t, err)
	conn, err := other.Conn(ctx)
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, "BEGIN EXCLUSIVE")
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := conn.ExecContext(ctx, "ROLLBACK")
		assert.NoError(t, err)
		assert.NoError(t, conn.Close())
		assert.NoError(t, other.Close())
	})
}

func (p *pipeline) auditPath() string { return filepath.Join(filepath.Dir(p.db.Path()), "audit.jsonl") }

// When a decision's commit fails in one sink of the audit log, its
// fail-closed deny is still recorded, marked degraded, in the sink that
// works.
func TestFailedCommitDenyIsInTheSinkThatWorks(t *testing.T) {
	cases := []struct {
		name     string
		fault    func(t *testing.T, p *pipeline)
		read     func(p *pipeline, t *testing.T) degradedRecord
		auditErr string
	}{
		{"mirror refuses", func(t *testing.T, p *pipeline) {
			_, err := p.db.SQL().ExecContext(context.Background(), "DROP TABLE audit")
			require.NoError(t, err)
		}, (*pipeline).lastFileRecord, "mirror audit batch"},
		{"database file removed", func(t *testing.T, p *pipeline) {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				require.NoError(t, os.Remove(p.db.Path()+suffix))
			}
		}, (*pipeline).lastFileRecord, "database file removed or replaced"},
		{"audit file unwritable", func(t *testing.T, p *pipeline) {
			require.NoError(t, os.Remove(p.auditPath()))
			require.NoError(t, os.Mkdir(p.auditPath(), 0o700))
		}, (*pipeline).lastMirrorRecord, "open audit log"},
		{"database locked past the busy timeout", lockDB, (*pipeline).lastFileRecord, "database is locked"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPipeline(t, realOPA(t), nil)
			require.Equal(t, engine.Allow, p.decide(t, "s", "read", 1).Decision)
			c.fault(t, p)
			start := time.Now()
			d, status := p.decideStatus(t, "s", "read", 1, "staging", "reversible", "single")
			assert.Less(t, time.Since(start), 10*time.Second, "the busy timeout, then a bounded best effort")
			require.Equal(t, 500, status)
			require.Equal(t, engine.Deny, d.Decision)

			rec := c.read(p, t)
			assert.Equal(t, d.DecisionID, rec.DecisionID, "the deny is on record")
			assert.Equal(t, engine.Deny, rec.Verdict)
			assert.Equal(t, engine.RuleInternalError, rec.RuleID)
			assert.True(t, rec.Degraded)
			assert.Contains(t, rec.AuditError, c.auditErr)
		})
	}
}

// TestRecurringFaultIsLoggedOnce fails 30 decisions alike (their holds
// cannot be stored): the fault is logged once, not once per decision, so
// a fault that lasts (a full disk) cannot flood the log.
func TestRecurringFaultIsLoggedOnce(t *testing.T) {
	p := openPipeline(t, t.TempDir())
	pack, cleanup, err := rego.Materialize()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, cleanup()) })
	var log strings.Builder
	e, err := engine.New(engine.Config{Version: "test", Window: time.Hour, HoldTTL: time.Hour},
		engine.Deps{Evaluator: opa.NewEvalEvaluator(realOPA(t), pack, 10*time.Second),
			Budgets: p.budgets, Holds: p.holds, Recorder: p.audit, Logger: zerolog.New(&log)})
	require.NoError(t, err)
	p.engine = e
	_, err = p.db.SQL().ExecContext(context.Background(), "DROP TABLE holds")
	require.NoError(t, err)
	start := time.Now()
	for range 30 {
		d, status := p.decideStatus(t, "s", "delete", 1, "production", "irreversible", "broad")
		require.Equal(t, 500, status)
		require.Equal(t, engine.RuleHoldCreationFailed, d.Rule)
	}
	// One line per LogPeriod begun: 30 decisions take well under one on an
	// idle machine, but a loaded one (eval mode, -race) may take longer.
	lines := strings.Count(log.String(), `"message":"decision failed closed"`)
	assert.GreaterOrEqual(t, lines, 1, log.String())
	assert.LessOrEqual(t, lines, 1+int(time.Since(start)/engine.LogPeriod), log.String())
}
