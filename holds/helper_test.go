package holds

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

// dsnPragmas are the pragmas the ledger opens svc's database with.
const dsnPragmas = "_journal_mode=WAL&_busy_timeout=5000&_txlock=immediate&_foreign_keys=1"

var t0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

func openDB(t *testing.T) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "svc.db")
	db, err := sql.Open("sqlite3", "file:"+path+"?"+dsnPragmas)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func newTestStore(t *testing.T) *Store {
	t.Helper()
	s, err := NewStore(context.Background(), openDB(t))
	require.NoError(t, err)
	return s
}

// newHold is a pending hold created at created, expiring an hour later,
// requested by agent-7 on behalf of human:carol.
func newHold(id string, created time.Time) engine.Hold {
	return engine.Hold{
		ID: id, Rule: "svc.policy/irreversible_broad_prod", Reason: "irreversible broad action in production",
		Envelope: &envelope.Envelope{
			SvcVersion: "0.2", Mode: envelope.ModeEnforce,
			Agent:     envelope.Agent{ID: "agent-7", OnBehalfOf: "human:carol", SessionID: "sess-1"},
			Action:    envelope.Action{Namespace: "fs", Verb: "delete", RawVerb: "rm", Ability: "fs/delete"},
			Target:    envelope.Target{Kind: "dir", Ref: "/srv/data", Environment: "production", RawEnvironment: "prod"},
			Params:    map[string]any{"recursive": true},
			Magnitude: envelope.Magnitude{Count: 40},
			Axes:      envelope.Axes{Reversibility: "irreversible", BlastRadius: "broad", Externality: "internal"},
			Context:   map[string]any{"traceparent": "00-abc-def-01"},
		},
		EnvelopeHash: "ehash-" + id, ParamsHash: "phash-" + id,
		CreatedTS: created, ExpiresTS: created.Add(time.Hour), DecisionID: "dec-" + id,
	}
}

func mustCreate(t *testing.T, s *Store, hs ...engine.Hold) {
	t.Helper()
	for _, h := range hs {
		require.NoError(t, s.Create(context.Background(), h))
	}
}

// requireErr asserts err is an *engine.Error matching sentinel and carrying
// the given fields.
func requireErr(t *testing.T, err error, sentinel *engine.Error, fields map[string]any) *engine.Error {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, sentinel)
	var e *engine.Error
	require.True(t, errors.As(err, &e))
	for k, v := range fields {
		require.Equal(t, v, e.Fields[k], "field %s of %v", k, err)
	}
	return e
}

// clock is an injectable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// recorder is a Journal that can be made to fail: it makes an entry's
// hold resolution in a transaction of its own on store and keeps its
// records; a failing commit stores nothing.
type recorder struct {
	store   *Store
	mu      sync.Mutex
	kinds   []string
	records []engine.HoldEvent
	err     error
}

func (r *recorder) Commit(ctx context.Context, e engine.Entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	if e.Resolve != nil {
		if err := r.store.resolveAlone(ctx, *e.Resolve); err != nil {
			return fmt.Errorf("commit audit: %w", err)
		}
	}
	for _, rec := range e.Records {
		r.kinds = append(r.kinds, rec.Kind)
		r.records = append(r.records, rec.Body.(engine.HoldEvent))
	}
	return nil
}

func (r *recorder) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

func (r *recorder) snapshot() ([]string, []engine.HoldEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.kinds...), append([]engine.HoldEvent(nil), r.records...)
}

// publisher collects published events and, when ch is set, forwards them.
type publisher struct {
	mu     sync.Mutex
	events []engine.Event
	ch     chan engine.Event
}

func (p *publisher) Publish(ev engine.Event) {
	p.mu.Lock()
	p.events = append(p.events, ev)
	ch := p.ch
	p.mu.Unlock()
	if ch != nil {
		ch <- ev
	}
}

func (p *publisher) snapshot() []engine.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]engine.Event(nil), p.events...)
}

type fixture struct {
	svc   *Service
	store *Store
	rec   *recorder
	pub   *publisher
	clock *clock
}

func newFixture(t *testing.T, cfg Config) fixture {
	t.Helper()
	store := newTestStore(t)
	f := fixture{store: store, rec: &recorder{store: store}, pub: &publisher{}, clock: &clock{t: t0.Add(time.Minute)}}
	svc, err := NewService(f.store, cfg, f.rec, f.pub, zerolog.Nop())
	require.NoError(t, err)
	svc.Now = f.clock.Now
	f.svc = svc
	return f
}

// writeTokens writes a resolver tokens file and returns its path.
func writeTokens(t *testing.T, dir, body string) string {
	t.Helper()
	path := filepath.Join(dir, "tokens.json")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

const testTokens = `{
	"tok-alice": {"type": "human", "id": "alice"},
	"tok-carol": {"type": "human", "id": "Carol"},
	"tok-bot":   {"type": "agent", "id": "bot-1"},
	"tok-ci":    {"type": "automation", "id": "ci"}
}`

func holdIDs(hs []engine.Hold) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.ID
	}
	return out
}

func seqID(i int) string { return fmt.Sprintf("h-%04d", i) }
