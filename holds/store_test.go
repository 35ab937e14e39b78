package holds

import (
	"context"
	"database/sql"
	"encoding/json"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

func TestStoreCreateGet(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	h := newHold("h1", t0.Add(123*time.Millisecond))
	require.NoError(t, s.Create(ctx, h))

	got, err := s.Get(ctx, "h1", t0)
	require.NoError(t, err)
	assert.Equal(t, engine.HoldPending, got.Status)
	assert.Equal(t, h.Envelope, got.Envelope)
	assert.True(t, got.CreatedTS.Equal(h.CreatedTS))
	assert.True(t, got.ExpiresTS.Equal(h.ExpiresTS))
	assert.Equal(t, []string{h.Rule, h.Reason, h.EnvelopeHash, h.ParamsHash, h.DecisionID},
		[]string{got.Rule, got.Reason, got.EnvelopeHash, got.ParamsHash, got.DecisionID})
	assert.Nil(t, got.DecidedBy)
	assert.Nil(t, got.DecidedTS)
	assert.Nil(t, got.DecidedByVerified)
	assert.Nil(t, got.ConsumedTS)

	body, err := json.Marshal(got)
	require.NoError(t, err)
	assert.Contains(t, string(body), `"decided_by":null`)

	requireErr(t, s.Create(ctx, h), ErrExists, map[string]any{"hold_id": "h1"})
	_, err = s.Get(ctx, "nope", t0)
	requireErr(t, err, ErrNotFound, map[string]any{"hold_id": "nope"})
	assert.ErrorIs(t, err, engine.ErrNotFound)
}

func TestStoreCreateInvalid(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*engine.Hold)
		field string
	}{
		{"no id", func(h *engine.Hold) { h.ID = " " }, "id"},
		{"not pending", func(h *engine.Hold) { h.Status = engine.HoldApproved }, "status"},
		{"no rule", func(h *engine.Hold) { h.Rule = "" }, "rule"},
		{"no envelope", func(h *engine.Hold) { h.Envelope = nil }, "envelope"},
		{"expires at creation", func(h *engine.Hold) { h.ExpiresTS = h.CreatedTS }, "expires_ts"},
	}
	s := newTestStore(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHold("x", t0)
			tt.edit(&h)
			err := s.Create(context.Background(), h)
			require.Equal(t, engine.EINVALID, engine.ErrorCode(err))
			requireErr(t, err, &engine.Error{Code: engine.EINVALID}, map[string]any{"field": tt.field})
		})
	}
}

// step is one operation on hold "h" at t0+at, created at t0 with a TTL of
// one hour.
type step struct {
	op     string // approve, reject, consume, get
	at     time.Duration
	status string        // status afterwards (of the result, or of a Get)
	err    *engine.Error // sentinel the op must fail with, nil for success
}

func TestStoreStateTable(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"pending to approved to consumed", []step{
			{"approve", time.Minute, engine.HoldApproved, nil},
			{"consume", 2 * time.Minute, engine.HoldConsumed, nil},
			{"consume", 3 * time.Minute, engine.HoldConsumed, ErrNotRedeemable},
			{"approve", 3 * time.Minute, engine.HoldConsumed, ErrNotResolvable},
			{"get", 2 * time.Hour, engine.HoldConsumed, nil},
		}},
		{"pending to rejected", []step{
			{"reject", time.Minute, engine.HoldRejected, nil},
			{"approve", 2 * time.Minute, engine.HoldRejected, ErrNotResolvable},
			{"consume", 2 * time.Minute, engine.HoldRejected, ErrNotRedeemable},
			{"get", 2 * time.Hour, engine.HoldRejected, nil},
		}},
		{"pending to expired", []step{
			{"get", time.Hour - time.Millisecond, engine.HoldPending, nil},
			{"get", time.Hour, engine.HoldExpired, nil},
			{"approve", time.Hour, engine.HoldExpired, ErrNotResolvable},
			{"reject", 2 * time.Hour, engine.HoldExpired, ErrNotResolvable},
			{"consume", 2 * time.Hour, engine.HoldExpired, ErrNotRedeemable},
		}},
		{"approved to expired", []step{
			{"approve", time.Minute, engine.HoldApproved, nil},
			{"get", time.Hour - time.Millisecond, engine.HoldApproved, nil},
			{"get", time.Hour, engine.HoldExpired, nil},
			{"consume", time.Hour, engine.HoldExpired, ErrNotRedeemable},
		}},
		{"pending is not redeemable", []step{
			{"consume", time.Minute, engine.HoldPending, ErrNotRedeemable},
			{"approve", 2 * time.Minute, engine.HoldApproved, nil},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(t)
			mustCreate(t, s, newHold("h", t0))
			for i, st := range tt.steps {
				runStep(t, s, i, st)
			}
		})
	}
}

func runStep(t *testing.T, s *Store, i int, st step) {
	t.Helper()
	ctx, now := context.Background(), t0.Add(st.at)
	by := engine.Principal{Type: TypeHuman, ID: "alice"}
	var (
		h   engine.Hold
		err error
	)
	switch st.op {
	case "approve", "reject":
		status := map[string]string{"approve": engine.HoldApproved, "reject": engine.HoldRejected}[st.op]
		h, err = s.Resolve(ctx, "h", engine.HoldResolution{Status: status, By: by, Verified: true, Reason: "ok", At: now})
	case "consume":
		h, err = s.Consume(ctx, "h", "dec-redeem", now)
	case "get":
		h, err = s.Get(ctx, "h", now)
	}
	if st.err != nil {
		requireErr(t, err, st.err, map[string]any{"hold_id": "h", "status": st.status})
		assert.ErrorIs(t, err, engine.ErrConflict, "step %d", i)
		return
	}
	require.NoError(t, err, "step %d", i)
	require.Equal(t, st.status, h.Status, "step %d", i)
	switch st.op {
	case "approve", "reject":
		require.Equal(t, &by, h.DecidedBy)
		require.True(t, h.DecidedTS.Equal(now))
		require.True(t, *h.DecidedByVerified)
		require.Equal(t, "ok", h.ResolutionReason)
	case "consume":
		require.True(t, h.ConsumedTS.Equal(now))
		require.Equal(t, "dec-redeem", h.ConsumedBy)
	}
}

func TestStoreUnknownID(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	_, err := s.Resolve(ctx, "ghost", engine.HoldResolution{Status: engine.HoldApproved, At: t0})
	requireErr(t, err, ErrNotFound, map[string]any{"hold_id": "ghost"})
	_, err = s.Consume(ctx, "ghost", "d", t0)
	requireErr(t, err, ErrNotFound, map[string]any{"hold_id": "ghost"})
	_, err = s.Resolve(ctx, "ghost", engine.HoldResolution{Status: engine.HoldExpired, At: t0})
	requireErr(t, err, &engine.Error{Code: engine.EINVALID}, map[string]any{"field": "decision"})
	_, err = s.Consume(ctx, "ghost", "", t0)
	requireErr(t, err, &engine.Error{Code: engine.EINVALID}, map[string]any{"field": "decision_id"})
}

// race runs n callers of fn at once and returns how many succeeded and the
// errors of the others.
func race(n int, fn func(i int) error) (int, []error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		wins  int
		errs  []error
		start = make(chan struct{})
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			err := fn(i)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				wins++
				return
			}
			errs = append(errs, err)
		}()
	}
	close(start)
	wg.Wait()
	return wins, errs
}

func TestConsumeConcurrent(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	mustCreate(t, s, newHold("h", t0))
	_, err := s.Resolve(ctx, "h", engine.HoldResolution{Status: engine.HoldApproved,
		By: engine.Principal{Type: TypeHuman, ID: "alice"}, Verified: true, At: t0.Add(time.Second)})
	require.NoError(t, err)

	wins, errs := race(100, func(i int) error {
		_, err := s.Consume(ctx, "h", seqID(i), t0.Add(time.Minute))
		return err
	})
	require.Equal(t, 1, wins)
	require.Len(t, errs, 99)
	for _, err := range errs {
		requireErr(t, err, ErrNotRedeemable, map[string]any{"status": engine.HoldConsumed})
	}
	h, err := s.Get(ctx, "h", t0.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, engine.HoldConsumed, h.Status)
	require.NotEmpty(t, h.ConsumedBy)
}

func TestResolveConcurrent(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	mustCreate(t, s, newHold("h", t0))
	wins, errs := race(30, func(i int) error {
		status := []string{engine.HoldApproved, engine.HoldRejected}[i%2]
		_, err := s.Resolve(ctx, "h", engine.HoldResolution{Status: status,
			By: engine.Principal{Type: TypeHuman, ID: seqID(i)}, At: t0.Add(time.Second)})
		return err
	})
	require.Equal(t, 1, wins)
	for _, err := range errs {
		require.ErrorIs(t, err, ErrNotResolvable)
	}
}

func TestStoreSweep(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	by := engine.Principal{Type: TypeHuman, ID: "alice"}
	mustCreate(t, s, newHold("a-pending", t0), newHold("b-approved", t0.Add(time.Millisecond)),
		newHold("c-rejected", t0.Add(2*time.Millisecond)), newHold("d-fresh", t0.Add(30*time.Minute)))
	for id, st := range map[string]string{"b-approved": engine.HoldApproved, "c-rejected": engine.HoldRejected} {
		_, err := s.Resolve(ctx, id, engine.HoldResolution{Status: st, By: by, Verified: true, At: t0.Add(time.Minute)})
		require.NoError(t, err)
	}

	sweepAt := t0.Add(time.Hour + 2*time.Millisecond)
	swept, err := s.Sweep(ctx, sweepAt)
	require.NoError(t, err)
	require.Equal(t, []string{"a-pending", "b-approved"}, holdIDs(swept))
	for _, h := range swept {
		assert.Equal(t, engine.HoldExpired, h.Status)
	}
	assert.Equal(t, &by, swept[1].DecidedBy, "an approval is kept in the record of its expiry")

	again, err := s.Sweep(ctx, sweepAt.Add(time.Second))
	require.NoError(t, err)
	require.Empty(t, again)

	// The transition is recorded: read at a time before expiry, the holds
	// still say expired, and the others are untouched.
	page, err := s.List(ctx, engine.HoldQuery{Status: engine.HoldExpired, Now: t0})
	require.NoError(t, err)
	require.Equal(t, []string{"a-pending", "b-approved"}, holdIDs(page.Items))
	h, err := s.Get(ctx, "c-rejected", sweepAt)
	require.NoError(t, err)
	require.Equal(t, engine.HoldRejected, h.Status)
	h, err = s.Get(ctx, "d-fresh", sweepAt)
	require.NoError(t, err)
	require.Equal(t, engine.HoldPending, h.Status)
}

// TestStoreSingleConnection checks that no store method holds a connection
// while asking for another, so a one-connection in-memory database works.
func TestStoreSingleConnection(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite3", "file:holds-single?mode=memory&cache=shared&"+dsnPragmas)
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	s, err := NewStore(ctx, db)
	require.NoError(t, err)
	mustCreate(t, s, newHold("a", t0), newHold("b", t0))
	_, err = s.Consume(ctx, "a", "d", t0)
	require.ErrorIs(t, err, ErrNotRedeemable)
	_, err = s.Resolve(ctx, "a", engine.HoldResolution{Status: engine.HoldApproved, By: engine.Principal{Type: TypeHuman, ID: "x"}, At: t0})
	require.NoError(t, err)
	_, err = s.Consume(ctx, "a", "d", t0)
	require.NoError(t, err)
	_, err = s.Resolve(ctx, "a", engine.HoldResolution{Status: engine.HoldApproved, At: t0})
	require.ErrorIs(t, err, ErrNotResolvable)
	page, err := s.List(ctx, engine.HoldQuery{Limit: 1, Now: t0})
	require.NoError(t, err)
	require.NotNil(t, page.NextCursor)
	swept, err := s.Sweep(ctx, t0.Add(2*time.Hour))
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, holdIDs(swept))
}

func TestMigrateIdempotentBesideLedger(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	_, err := db.ExecContext(ctx, `CREATE TABLE migrations (name TEXT PRIMARY KEY)`)
	require.NoError(t, err)
	for range 2 {
		_, err := NewStore(ctx, db)
		require.NoError(t, err)
	}
	var n int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM holds_migrations`).Scan(&n))
	names, err := fs.Glob(migrations, "migrations/*.sql")
	require.NoError(t, err)
	require.Len(t, names, 4)
	require.Equal(t, len(names), n, "each migration once")
	require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM holds_cursor_key`).Scan(&n))
	require.Equal(t, 1, n, "one cursor key, drawn once")
	require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM migrations`).Scan(&n))
	require.Zero(t, n)

	_, err = NewStore(ctx, nil)
	require.EqualError(t, err, "new holds store: nil database")
}

// TestStoreKeepsParamsNumbersExact checks that a hold shows the approver
// each number of params and context exactly as the agent sent it: a
// float64 decode would show 9007199254740993 (which a hold stored before
// svc refused such numbers may hold) as 9007199254740992, 1.50 as 1.5.
func TestStoreKeepsParamsNumbersExact(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	h := newHold("h-exact", t0)
	h.Envelope.Params = map[string]any{"to_account": json.Number("9007199254740993"), "amount": json.Number("1.50"),
		"ids": []any{json.Number("100000000000000000000"), json.Number("1E+0020"), json.Number("-0")}}
	h.Envelope.Context = map[string]any{"budget": json.Number("0.10000000000000000000")}
	mustCreate(t, s, h)

	got, err := s.Get(ctx, h.ID, t0)
	require.NoError(t, err)
	assert.Equal(t, h.Envelope, got.Envelope)
	body, err := json.Marshal(got)
	require.NoError(t, err)
	assert.Contains(t, string(body), `"to_account":9007199254740993`)
	assert.Contains(t, string(body), `"amount":1.50`)
	assert.Contains(t, string(body), `"budget":0.10000000000000000000`)

	// An envelope ParseEnvelope accepted keeps its spelling through the store.
	env, err := envelope.ParseEnvelope([]byte(`{"agent": {"id": "agent-7", "session_id": "s"},
		"action": {"verb": "transfer", "ability": "bank/transfer"}, "target": {"environment": "production"},
		"magnitude": {"count": 1}, "axes": {"reversibility": "irreversible", "blast_radius": "single",
		"externality": "outbound"}, "approval": {"present": false},
		"params": {"to_account": 9007199254740992, "amount": 1.50, "fee": 2.5e-3}}`))
	require.NoError(t, err)
	parsed := newHold("h-parsed", t0)
	parsed.Envelope = env
	mustCreate(t, s, parsed)
	got, err = s.Get(ctx, parsed.ID, t0)
	require.NoError(t, err)
	assert.Equal(t, env.Params, got.Envelope.Params)
	want, err := env.ParamsHash()
	require.NoError(t, err)
	stored, err := got.Envelope.ParamsHash()
	require.NoError(t, err)
	assert.Equal(t, want, stored, "the shown params hash to the hold's params_hash")

	page, err := s.List(ctx, engine.HoldQuery{Now: t0})
	require.NoError(t, err)
	require.Len(t, page.Items, 2)
	for _, item := range page.Items {
		if item.ID == h.ID {
			assert.Equal(t, h.Envelope.Params, item.Envelope.Params, "listed holds decode alike")
		}
	}
}
