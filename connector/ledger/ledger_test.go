package ledger_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/connector"
	"github.com/svc-dev/svc/connector/ledger"
	"github.com/svc-dev/svc/database/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// openers open the ledger on each store: a SQLite file, SQLite in memory,
// and a database of a throwaway PostgreSQL cluster.
func openers(t *testing.T) map[string]func() (*ledger.Ledger, error) {
	ctx := context.Background()
	return map[string]func() (*ledger.Ledger, error){
		"sqlite file":   func() (*ledger.Ledger, error) { return ledger.Open(ctx, filepath.Join(t.TempDir(), "gw.db"), true) },
		"sqlite memory": func() (*ledger.Ledger, error) { return ledger.Open(ctx, "", true) },
		"postgres":      func() (*ledger.Ledger, error) { return ledger.OpenPostgres(ctx, pgtest.URL(t)) },
	}
}

func TestRecordAndRecent(t *testing.T) {
	ctx := context.Background()
	for name, open := range openers(t) {
		t.Log(name)
		l, err := open()
		require.NoError(t, err)
		org, hold := "acme", "h1"
		rows := []connector.Row{
			{Time: time.Unix(1, 0), Outcome: "allow", Rule: "r", Tool: "a", ToolCallID: "c1", EnforcementStage: connector.StageAllowed,
				Transport: connector.TransportGuardrailAPI, Mode: "enforce", Enforced: true, Org: &org, ReleasedAfterApproval: true, HoldID: &hold,
				Obligations: []string{"log_params", "notify"}, Params: []byte(`{"amount":"10.5"}`),
				HoldDecision: &connector.HoldDecision{DecidedBy: &connector.Principal{Type: "human", ID: "alice"}, Resolution: "approved", Verified: true}},
			{Time: time.Unix(2, 0), Outcome: "unmapped", Rule: "r2", Tool: "b", ToolCallID: "c2", EnforcementStage: connector.StageRefused,
				Transport: connector.TransportInProcess, Mode: "enforce"},
		}
		require.NoError(t, l.Record(ctx, rows))
		got, err := l.Recent(ctx, 10)
		require.NoError(t, err)
		require.Len(t, got, 2)
		require.Equal(t, "c2", got[0].ToolCallID, "newest first")
		require.Positive(t, got[1].Seq)
		require.Greater(t, got[0].Seq, got[1].Seq, "seq numbers the rows in order")
		require.Nil(t, got[0].Org)
		require.Equal(t, rows[0].HoldDecision, got[1].HoldDecision)
		require.Equal(t, "acme", *got[1].Org)
		require.True(t, got[1].ReleasedAfterApproval)
		require.Equal(t, []string{"log_params", "notify"}, got[1].Obligations)
		require.JSONEq(t, `{"amount":"10.5"}`, string(got[1].Params))
		require.Equal(t, []string{}, got[0].Obligations)
		require.Nil(t, got[0].Params, "params are recorded only under log_params")
		require.NoError(t, l.Close())
	}
}

// TestLedgerFileIsOwnerOnly: the ledger file, and so its write-ahead log,
// is created readable by its owner only, as the engine's database is: its
// rows may keep a call's params (log_params). An existing file keeps its
// mode.
func TestLedgerFileIsOwnerOnly(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gw.db")
	l, err := ledger.Open(ctx, path, true)
	require.NoError(t, err)
	require.NoError(t, l.Record(ctx, []connector.Row{{Time: time.Unix(1, 0), Outcome: "allow", Rule: "r", Tool: "a",
		ToolCallID: "c1", EnforcementStage: connector.StageAllowed, Transport: connector.TransportGuardrailAPI, Mode: "enforce"}}))
	for _, f := range []string{path, path + "-wal"} {
		info, err := os.Stat(f)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), f)
	}
	require.NoError(t, l.Close())

	shared := filepath.Join(t.TempDir(), "shared.db")
	require.NoError(t, os.WriteFile(shared, nil, 0o640))
	l, err = ledger.Open(ctx, shared, true)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	info, err := os.Stat(shared)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), info.Mode().Perm(), "an existing file keeps its mode")
}

// A ledger file of a connector from before the obligations and params
// columns gets them at Open, its rows kept.
func TestOpenAddsNewColumns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite3", path)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE gateway_ledger (seq INTEGER PRIMARY KEY AUTOINCREMENT, ts TEXT NOT NULL,
		decision_id TEXT, outcome TEXT NOT NULL, verdict TEXT, rule TEXT NOT NULL, reason TEXT NOT NULL, envelope_hash TEXT,
		org TEXT, session TEXT, tool TEXT NOT NULL, tool_call_id TEXT NOT NULL, enforcement_stage TEXT NOT NULL,
		released_after_approval INTEGER NOT NULL, hold_id TEXT, hold_decision TEXT, transport TEXT NOT NULL,
		api_base_host TEXT, deployment_id TEXT, provider TEXT, mode TEXT NOT NULL, enforced INTEGER NOT NULL,
		model TEXT NOT NULL, classified_by TEXT NOT NULL, gateway_call_id TEXT NOT NULL, key_alias TEXT);
		INSERT INTO gateway_ledger (ts, outcome, rule, reason, tool, tool_call_id, enforcement_stage,
		released_after_approval, transport, mode, enforced, model, classified_by, gateway_call_id)
		VALUES ('2026-01-01T00:00:00Z', 'allow', 'r', '', 'a', 'c-old', 'allowed_at_gateway', 0, 'in_process', 'enforce', 1, 'm', 'map', 'g')`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	ctx := context.Background()
	l, err := ledger.Open(ctx, path, true)
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()
	require.NoError(t, l.Record(ctx, []connector.Row{{Time: time.Unix(3, 0), Outcome: "allow", Rule: "r", Tool: "b",
		ToolCallID: "c-new", EnforcementStage: connector.StageAllowed, Transport: connector.TransportInProcess, Mode: "enforce",
		Obligations: []string{"notify"}}}))
	got, err := l.Recent(ctx, 10)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, []string{"notify"}, got[0].Obligations)
	require.Equal(t, "c-old", got[1].ToolCallID)
	require.Equal(t, []string{}, got[1].Obligations)
}

func TestRefusedStageIsChecked(t *testing.T) {
	for name, open := range openers(t) {
		l, err := open()
		require.NoError(t, err, name)
		err = l.Record(context.Background(), []connector.Row{{Outcome: "allow", EnforcementStage: "delivered"}})
		require.Error(t, err, "%s: a row of an unknown stage is not recorded", name)
		require.NoError(t, l.Close())
	}
}

// TestPruneDeletesExactlyTheOldRows: rows written before the cut-off go,
// in batches, and the rows at or after it stay.
func TestPruneDeletesExactlyTheOldRows(t *testing.T) {
	ctx := context.Background()
	l, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "gw.db"), false)
	require.NoError(t, err)
	defer l.Close()
	cut := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	row := func(at time.Time, id string) connector.Row {
		return connector.Row{Time: at, Outcome: "allow", Rule: "r", Tool: "t", ToolCallID: id, EnforcementStage: connector.StageAllowed,
			Transport: connector.TransportGuardrailAPI, Mode: "enforce"}
	}
	var rows []connector.Row
	for i := range 1203 {
		rows = append(rows, row(cut.Add(-time.Duration(i+1)*time.Minute), "old"))
	}
	rows = append(rows, row(cut, "at-cut"), row(cut.Add(1500*time.Millisecond), "after-cut"), row(cut.Add(48*time.Hour), "recent"))
	require.NoError(t, l.Record(ctx, rows))
	n, err := l.Prune(ctx, cut)
	require.NoError(t, err)
	require.EqualValues(t, 1203, n)
	got, err := l.Recent(ctx, 10)
	require.NoError(t, err)
	var ids []string
	for _, r := range got {
		ids = append(ids, r.ToolCallID)
	}
	require.Equal(t, []string{"recent", "after-cut", "at-cut"}, ids)
}

// TestConcurrentRecordsAreAllCommitted: requests recording at once are
// committed in groups, each led by one of them; every Record returns only
// once its rows are in, and none is lost or written twice.
func TestConcurrentRecordsAreAllCommitted(t *testing.T) {
	ctx := context.Background()
	for name, open := range openers(t) {
		l, err := open()
		require.NoError(t, err, name)
		const callers, each = 16, 8
		var wg sync.WaitGroup
		for c := range callers {
			wg.Go(func() {
				for i := range each {
					id := fmt.Sprintf("c%d-%d", c, i)
					if !assert.NoError(t, l.Record(ctx, []connector.Row{benchRow(id)}), name) {
						return
					}
					got, err := l.Recent(ctx, callers*each)
					if assert.NoError(t, err, name) {
						assert.True(t, slices.ContainsFunc(got, func(r connector.Row) bool { return r.ToolCallID == id }),
							"%s: %s answered before it was committed", name, id)
					}
				}
			})
		}
		wg.Wait()
		got, err := l.Recent(ctx, 10000)
		require.NoError(t, err, name)
		ids := map[string]int{}
		for _, r := range got {
			ids[r.ToolCallID]++
		}
		require.Len(t, ids, callers*each, name)
		require.Len(t, got, callers*each, name)
		require.NoError(t, l.Close())
	}
}

// TestCloseWhileRecording: Close waits for the commit in progress; a
// Record then either committed its rows or failed (its request refused),
// and every Record after Close fails.
func TestCloseWhileRecording(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gw.db")
	l, err := ledger.Open(ctx, path, true)
	require.NoError(t, err)
	var wg sync.WaitGroup
	var committed sync.Map
	for c := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("c%d-%d", c, i)
				if err := l.Record(ctx, []connector.Row{benchRow(id)}); err != nil {
					return
				}
				committed.Store(id, true)
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, l.Close())
	wg.Wait()
	require.NoError(t, l.Close(), "idempotent")
	require.Error(t, l.Record(ctx, []connector.Row{benchRow("late")}))
	l, err = ledger.Open(ctx, path, true)
	require.NoError(t, err)
	defer l.Close()
	got, err := l.Recent(ctx, 10000)
	require.NoError(t, err)
	n := 0
	committed.Range(func(id, _ any) bool {
		n++
		assert.True(t, slices.ContainsFunc(got, func(r connector.Row) bool { return r.ToolCallID == id }), "%s answered but not in the ledger", id)
		return true
	})
	require.Positive(t, n)
}

// A Record whose context has ended records nothing.
func TestRecordAfterItsContextEnded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l, err := ledger.Open(context.Background(), "", true)
	require.NoError(t, err)
	defer l.Close()
	require.ErrorIs(t, l.Record(ctx, []connector.Row{benchRow("x")}), context.Canceled)
	got, err := l.Recent(context.Background(), 10)
	require.NoError(t, err)
	require.Empty(t, got)
}

// benchRow is an allowed read's row named id.
func benchRow(id string) connector.Row {
	org := "acme"
	return connector.Row{Time: time.Now(), Outcome: "allow", Rule: "svc.policy/allow", Reason: "read", Tool: "crm_get_customer",
		ToolCallID: id, EnforcementStage: connector.StageAllowed, Transport: connector.TransportGuardrailAPI,
		Mode: "enforce", Enforced: true, Org: &org, Model: "gpt-4o", ClassifiedBy: "map", GatewayCallID: "g"}
}

// TestRefusedRowLeavesTheLedgerUsable: a commit that fails is rolled back
// whole, and the next request's rows commit on the same connection.
func TestRefusedRowLeavesTheLedgerUsable(t *testing.T) {
	ctx := context.Background()
	for name, open := range openers(t) {
		l, err := open()
		require.NoError(t, err, name)
		bad := benchRow("bad")
		bad.EnforcementStage = "delivered"
		require.Error(t, l.Record(ctx, []connector.Row{benchRow("with-bad"), bad}), name)
		require.NoError(t, l.Record(ctx, []connector.Row{benchRow("good")}), name)
		got, err := l.Recent(ctx, 10)
		require.NoError(t, err, name)
		require.Len(t, got, 1, "%s: the failed commit left nothing", name)
		require.Equal(t, "good", got[0].ToolCallID, name)
		require.NoError(t, l.Close())
	}
}

// TestPanicInACommitRefusesItsGroupOnly: a commit that panics fails the
// requests of its group (each refused, fail closed), and the next
// request's rows commit: no request is left waiting on the ledger.
func TestPanicInACommitRefusesItsGroupOnly(t *testing.T) {
	ctx := context.Background()
	l, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "gw.db"), true)
	require.NoError(t, err)
	defer l.Close()
	ledger.SetCommitFault(func() { panic("injected") })
	err = l.Record(ctx, []connector.Row{benchRow("lost")})
	ledger.SetCommitFault(nil)
	require.ErrorContains(t, err, "injected")
	done := make(chan error, 1)
	go func() { done <- l.Record(ctx, []connector.Row{benchRow("next")}) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the request after a panicking commit waits on the ledger")
	}
	got, err := l.Recent(ctx, 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "next", got[0].ToolCallID)
}
