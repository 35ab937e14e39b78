package ledger_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/ledger"
)

func newAudit(t testing.TB, db *ledger.DB, path string) *ledger.Audit {
	t.Helper()
	a, err := ledger.NewAudit(context.Background(), db, path, nil, zerolog.New(zerolog.NewTestWriter(t)))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, a.Close()) })
	return a
}

func decision(id string) engine.DecisionEvent {
	return engine.DecisionEvent{
		TS: "2025-06-01T12:00:00.000Z", Event: engine.EventDecision, Verdict: "allow",
		RuleID: "svc.policy/default_allow", Verb: "delete", Ability: "files.delete",
		SessionID: "session-1", AgentID: "agent-1", Environment: "prod", Mode: "enforce",
		Reason: "ok", SvcVersion: "test", EpochMS: 1748779200000, DecisionID: id,
		EnvelopeHash: "sha256:0123456789abcdef",
	}
}

// readLines returns the file's lines, each required to be a whole JSON value.
func readLines(t *testing.T, path string) []json.RawMessage {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	var lines []json.RawMessage
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		require.True(t, json.Valid(sc.Bytes()), "line %d is not JSON: %q", len(lines)+1, sc.Text())
		lines = append(lines, json.RawMessage(append([]byte(nil), sc.Bytes()...)))
	}
	require.NoError(t, sc.Err())
	return lines
}

func records(t *testing.T, a *ledger.Audit, kind string) []ledger.AuditRow {
	t.Helper()
	rows, err := a.Records(context.Background(), kind)
	require.NoError(t, err)
	return rows
}

func TestAuditConcurrentRecords(t *testing.T) {
	const n = 200
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := newAudit(t, openDB(t), path)

	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = a.Record(context.Background(), engine.EventDecision, decision(fmt.Sprintf("d%03d", i)))
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "record %d", i)
	}

	lines := readLines(t, path)
	rows := records(t, a, "")
	require.Len(t, lines, n)
	require.Len(t, rows, n)
	seen := map[string]bool{}
	for i, line := range lines {
		var ev engine.DecisionEvent
		require.NoError(t, json.Unmarshal(line, &ev))
		assert.Equal(t, decision(ev.DecisionID), ev, "line %d round-trips", i)
		assert.False(t, seen[ev.DecisionID], "duplicate %s", ev.DecisionID)
		seen[ev.DecisionID] = true
		// Batches commit in order and keep their order, so the mirror's
		// sequence is the file's line order.
		assert.JSONEq(t, string(line), string(rows[i].Body), "row %d mirrors line %d", rows[i].Seq, i)
		assert.Equal(t, ev.DecisionID, rows[i].DecisionID)
		assert.Equal(t, engine.EventDecision, rows[i].Kind)
	}
	assert.Len(t, seen, n)
}

func TestAuditFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := newAudit(t, openDB(t), path)
	require.NoError(t, a.Record(context.Background(), engine.EventDecision, decision("d1")))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

func TestAuditMirrorOnly(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	db.Now = func() time.Time { return t0 }
	a := newAudit(t, db, "")
	tru := true
	for _, tc := range []struct {
		name   string
		kind   string
		record any
		id     string
	}{
		{"decision", engine.EventDecision, decision("d1"), "d1"},
		{"hold resolution", engine.EventHoldResolution,
			engine.HoldEvent{Event: engine.EventHoldResolution, HoldID: "h1", DecisionID: "d2", DecidedByVerified: &tru}, "d2"},
		{"lifecycle has no decision id", engine.EventLifecycle,
			engine.LifecycleEvent{Event: engine.EventLifecycle, Action: "start"}, ""},
		{"non-string decision id is none", "custom", map[string]any{"decision_id": 7}, ""},
		{"non-object record", "custom", []string{"a"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(records(t, a, ""))
			require.NoError(t, a.Record(ctx, tc.kind, tc.record))
			rows := records(t, a, "")
			require.Len(t, rows, before+1)
			row := rows[before]
			want, err := json.Marshal(tc.record)
			require.NoError(t, err)
			assert.JSONEq(t, string(want), string(row.Body))
			assert.Equal(t, tc.kind, row.Kind)
			assert.Equal(t, tc.id, row.DecisionID)
			assert.True(t, t0.Equal(row.TS), "stamped with the DB clock, got %s", row.TS)
		})
	}
	assert.Len(t, records(t, a, "custom"), 2, "Records filters by kind")
}

func TestAuditRefusedRecords(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		kind   string
		record any
	}{
		{"cancelled context", cancelled, engine.EventDecision, decision("d1")},
		{"empty kind", context.Background(), "", decision("d1")},
		{"unmarshallable record", context.Background(), engine.EventDecision, map[string]any{"c": make(chan int)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			a := newAudit(t, openDB(t), path)
			require.Error(t, a.Record(tc.ctx, tc.kind, tc.record))
			assert.Empty(t, readLines(t, path))
			assert.Empty(t, records(t, a, ""))
		})
	}
}
