package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/ledger"
)

// eventLog keeps every event published.
type eventLog struct {
	mu     sync.Mutex
	events []engine.Event
}

func (l *eventLog) Publish(ev engine.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
}

// changes returns the kill_switch actions published, and checks that each
// came with its freeze.flipped webhook.
func (l *eventLog) changes(t *testing.T) []string {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var actions []string
	var hooks int
	for _, ev := range l.events {
		switch body := ev.Body.(type) {
		case engine.KillSwitchEvent:
			if body.Action != "queried" {
				actions = append(actions, body.Action)
			}
		case engine.FreezeEvent:
			hooks++
		}
	}
	assert.Equal(t, len(actions), hooks, "one freeze.flipped webhook per change")
	return actions
}

// freezeRun is one run of the engine over the database and audit log of
// dir, as `svc serve` wires them.
type freezeRun struct {
	kill   *engine.KillSwitch
	engine *engine.Engine
	audit  *ledger.Audit
	events *eventLog
}

// startFreezeRun starts an engine over dir with SVC_FREEZE=pinned and
// recorder wrapping its real audit log (nil: the audit log itself). The
// start's error is returned; its parts are closed with the test.
func startFreezeRun(t *testing.T, dir string, pinned bool, recorder func(engine.Journal) engine.Journal) (freezeRun, error) {
	t.Helper()
	ctx := context.Background()
	p := openPipeline(t, dir)
	var journal engine.Journal = p.audit
	if recorder != nil {
		journal = recorder(p.audit)
	}
	run := freezeRun{audit: p.audit, events: &eventLog{}}
	var err error
	run.engine, err = engine.New(engine.Config{Version: "test"}, engine.Deps{Evaluator: struct{ engine.Evaluator }{},
		Budgets: p.budgets, Holds: p.holds, Recorder: journal, Publisher: run.events, Logger: zerolog.Nop()})
	require.NoError(t, err)
	freeze, err := ledger.NewFreeze(ctx, p.db)
	require.NoError(t, err)
	run.kill, err = engine.NewKillSwitch(ctx, run.engine, freeze, pinned)
	return run, err
}

// freezeLines returns the audit records of freeze changes.
func (r freezeRun) freezeLines(t *testing.T) []engine.FreezeEvent {
	t.Helper()
	rows, err := r.audit.Records(context.Background(), "freeze")
	require.NoError(t, err)
	out := make([]engine.FreezeEvent, len(rows))
	for i, row := range rows {
		require.NoError(t, json.Unmarshal(row.Body, &out[i]))
	}
	return out
}

// TestFreezeStartRecordsPinChanges: a start whose SVC_FREEZE changes the
// state the engine last ran with records the change as the API does (audit
// line, freeze.flipped webhook, kill_switch flipped/cleared), by
// config:SVC_FREEZE; a start that changes nothing records nothing.
func TestFreezeStartRecordsPinChanges(t *testing.T) {
	type start struct {
		pinned bool
		set    *bool    // an API change after the start
		want   []string // kill_switch changes of this run
		frozen bool     // the state at the end of the run
	}
	on, off := true, false
	for _, tc := range []struct {
		name   string
		starts []start
	}{
		{"pin on a fresh database, then unpin", []start{
			{pinned: true, want: []string{"flipped"}, frozen: true},
			{pinned: false, want: []string{"cleared"}, frozen: false},
		}},
		{"pinned restarts record once", []start{
			{pinned: true, want: []string{"flipped"}, frozen: true},
			{pinned: true, frozen: true},
			{pinned: false, want: []string{"cleared"}, frozen: false},
			{pinned: false, frozen: false},
		}},
		{"unpinned restarts record nothing", []start{{pinned: false}, {pinned: false}}},
		{"an API freeze is not the pin's to clear", []start{
			{pinned: false, set: &on, want: []string{"flipped"}, frozen: true},
			{pinned: true, frozen: true},
			{pinned: false, frozen: true},
		}},
		{"an API freeze under the pin outlasts it", []start{
			{pinned: true, set: &on, want: []string{"flipped"}, frozen: true},
			{pinned: false, frozen: true},
			{pinned: false, frozen: true},
		}},
		{"pin over a cleared freeze", []start{
			{pinned: false, set: &on, want: []string{"flipped"}, frozen: true},
			{pinned: false, set: &off, want: []string{"cleared"}, frozen: false},
			{pinned: true, want: []string{"flipped"}, frozen: true},
			{pinned: false, want: []string{"cleared"}, frozen: false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var lines int
			for i, s := range tc.starts {
				run, err := startFreezeRun(t, dir, s.pinned, nil)
				require.NoError(t, err, "start %d", i)
				if s.set != nil {
					_, err := run.kill.Set(context.Background(), *s.set, "incident", "human:bob")
					require.NoError(t, err)
				}
				assert.Equal(t, s.want, run.events.changes(t), "start %d", i)
				assert.Equal(t, s.frozen, run.engine.Frozen(), "start %d", i)
				recs := run.freezeLines(t)
				adopted := 0
				if s.pinned && s.set != nil && *s.set {
					adopted = 1 // the operator's freeze under the pin, on record
				}
				require.Len(t, recs, lines+len(s.want)+adopted, "start %d: one audit line per change", i)
				for _, rec := range recs[lines:] {
					if s.set == nil {
						assert.Equal(t, "config:SVC_FREEZE", rec.By, "start %d", i)
						assert.Contains(t, rec.Reason, "SVC_FREEZE", "start %d", i)
						assert.Contains(t, rec.Reason, "start-up", "start %d", i)
					}
				}
				lines = len(recs)
			}
		})
	}
}

// failingJournal refuses every record outside a decision.
type failingJournal struct{ engine.Journal }

func (failingJournal) Record(context.Context, string, any) error { return errors.New("disk full") }

// TestFreezeStartFailsWhenItsChangeCannotBeAudited: a start that would
// change the state without putting it on record does not start, and
// changes nothing stored.
func TestFreezeStartFailsWhenItsChangeCannotBeAudited(t *testing.T) {
	dir := t.TempDir()
	refuse := func(j engine.Journal) engine.Journal { return failingJournal{j} }
	_, err := startFreezeRun(t, dir, true, refuse)
	require.Error(t, err)
	assert.ErrorContains(t, err, "SVC_FREEZE=true")
	assert.ErrorIs(t, err, engine.ErrAuditUnavailable)

	run, err := startFreezeRun(t, dir, true, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"flipped"}, run.events.changes(t), "the refused start stored nothing")
}

// TestFreezeViewJSON: updated_ts is RFC 3339 UTC with millisecond
// precision, null when the state never changed, and reads back.
func TestFreezeViewJSON(t *testing.T) {
	at := time.Date(2026, 11, 21, 12, 31, 33, 192613542, time.FixedZone("CET", 3600))
	for _, tc := range []struct {
		name string
		view engine.FreezeView
		want string
	}{
		{"never changed", engine.FreezeView{},
			`{"frozen":false,"reason":"","by":"","updated_ts":null,"pinned":false,"changed":false}`},
		{"changed", engine.FreezeView{FreezeState: engine.FreezeState{Frozen: true, Reason: "incident 42",
			By: "human:bob", UpdatedTS: at, FromPin: true}, Pinned: true, Changed: true},
			`{"frozen":true,"reason":"incident 42","by":"human:bob","updated_ts":"2026-11-21T11:31:33.192Z","pinned":true,"changed":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(tc.view)
			require.NoError(t, err)
			assert.JSONEq(t, tc.want, string(raw))
			var back engine.FreezeView
			require.NoError(t, json.Unmarshal(raw, &back))
			want := tc.view
			want.FromPin = false // not on the wire
			want.UpdatedTS = want.UpdatedTS.UTC().Truncate(time.Millisecond)
			if tc.view.UpdatedTS.IsZero() {
				want.UpdatedTS = time.Time{}
			}
			assert.Equal(t, want, back)
		})
	}
}
