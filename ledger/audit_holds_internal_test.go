package ledger

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
	"github.com/svc-dev/svc/holds"
)

// auditWithHolds returns an audit log on a fresh database with a hold
// store, the store and the audit file's path.
func auditWithHolds(t *testing.T) (*Audit, *holds.Store, string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(ctx, filepath.Join(dir, "svc.db"), DurabilityFull)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, db.Close()) })
	store, err := holds.NewStore(ctx, db.SQL())
	require.NoError(t, err)
	path := filepath.Join(dir, "audit.jsonl")
	a, err := NewAudit(ctx, db, path, store, zerolog.New(zerolog.NewTestWriter(t)))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, a.Close()) })
	return a, store, path
}

// A hold write the store refuses fails the entry that asked for it, not the
// decisions that share its batch: they are stored, it is not.
func TestHoldWriteRefusalFailsItsEntryAlone(t *testing.T) {
	ctx := context.Background()
	a, store, path := auditWithHolds(t)

	entryOf := func(id string) *entry {
		l, err := a.line(engine.AuditRecord{Kind: engine.EventDecision, Body: map[string]string{"decision_id": id}})
		require.NoError(t, err)
		return &entry{lines: []line{l}, done: make(chan signal, 1)}
	}
	now := time.Now()
	plain := entryOf("d-plain")
	unknown := entryOf("d-unknown")
	unknown.consume = &engine.Consumption{HoldID: "no-such-hold", DecisionID: "d-unknown", At: now}
	invalid := entryOf("d-invalid")
	invalid.create = &engine.Hold{ID: "h-invalid", CreatedTS: now, ExpiresTS: now.Add(time.Hour)} // no rule
	created := entryOf("d-created")
	created.create = &engine.Hold{ID: "h-ok", DecisionID: "d-created", Rule: "svc.policy/irreversible_broad_prod",
		Envelope: &envelope.Envelope{}, CreatedTS: now, ExpiresTS: now.Add(time.Hour)}
	approval := engine.HoldResolution{HoldID: "h-ok", Status: engine.HoldApproved,
		By: engine.Principal{Type: "human", ID: "bob"}, Verified: true, At: now}
	resolved, again := entryOf("d-resolved"), entryOf("d-again")
	resolved.resolve, again.resolve = &approval, &approval

	require.NoError(t, a.commit(ctx, []*entry{plain, unknown, invalid, created, resolved, again}))

	assert.ErrorIs(t, unknown.err, engine.ErrNotFound)
	assert.Equal(t, engine.EINVALID, engine.ErrorCode(invalid.err), "%v", invalid.err)
	assert.ErrorIs(t, again.err, holds.ErrNotResolvable, "the second resolution loses its compare-and-set")
	assert.NoError(t, plain.err)
	assert.NoError(t, created.err)
	assert.NoError(t, resolved.err)
	rows, err := a.Records(ctx, "")
	require.NoError(t, err)
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.DecisionID)
	}
	assert.Equal(t, []string{"d-plain", "d-created", "d-resolved"}, ids, "only the entries whose hold write stood are mirrored")
	body, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, 3, strings.Count(string(body), "\n"))
	for _, refused := range []string{"d-unknown", "d-invalid", "d-again"} {
		assert.NotContains(t, string(body), refused)
	}
	h, err := store.Get(ctx, "h-ok", now)
	require.NoError(t, err, "the valid hold of the batch is stored")
	assert.Equal(t, engine.HoldApproved, h.Status, "and resolved once")
	_, err = store.Get(ctx, "h-invalid", now)
	assert.ErrorIs(t, err, engine.ErrNotFound)
}

// An entry carries one hold write at most: Commit refuses any two, and
// stores nothing of the entry.
func TestCommitRefusesTwoHoldWrites(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "svc.db"), DurabilityFull)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, db.Close()) })
	store, err := holds.NewStore(ctx, db.SQL())
	require.NoError(t, err)
	a, err := NewAudit(ctx, db, "", store, zerolog.Nop())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, a.Close()) })
	now := time.Now()
	create := &engine.Hold{ID: "h1", CreatedTS: now, ExpiresTS: now.Add(time.Hour)}
	consume := &engine.Consumption{HoldID: "h0", DecisionID: "d1", At: now}
	resolve := &engine.HoldResolution{HoldID: "h0", Status: engine.HoldApproved, At: now}
	tests := map[string]engine.Entry{
		"create and consume":  {Create: create, Consume: consume},
		"create and resolve":  {Create: create, Resolve: resolve},
		"consume and resolve": {Consume: consume, Resolve: resolve},
		"all three":           {Create: create, Consume: consume, Resolve: resolve},
	}
	for name, e := range tests {
		t.Run(name, func(t *testing.T) {
			e.Records = []engine.AuditRecord{{Kind: engine.EventDecision, Body: map[string]string{"decision_id": "d1"}}}
			require.ErrorContains(t, a.Commit(ctx, e), "one hold write at most")
			rows, err := a.Records(ctx, "")
			require.NoError(t, err)
			assert.Empty(t, rows)
		})
	}
}
