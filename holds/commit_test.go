package holds_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
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
	"github.com/svc-dev/svc/engine/envelope"
	"github.com/svc-dev/svc/holds"
	"github.com/svc-dev/svc/ledger"
)

// slowJournal delays every commit, as a slow disk does, which widens any
// window between a hold transition and its audit line.
type slowJournal struct {
	*ledger.Audit
	delay time.Duration
}

func (j slowJournal) Commit(ctx context.Context, e engine.Entry) error {
	time.Sleep(j.delay)
	return j.Audit.Commit(ctx, e)
}

// ledgerRig is a hold Service over a real ledger.Audit on a SQLite file.
type ledgerRig struct {
	svc       *holds.Service
	store     *holds.Store
	audit     *ledger.Audit
	auditPath string
}

func newLedgerRig(t *testing.T, delay time.Duration) ledgerRig {
	t.Helper()
	ctx, dir := context.Background(), t.TempDir()
	db, err := ledger.Open(ctx, filepath.Join(dir, "svc.db"), ledger.DurabilityFull)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, db.Close()) })
	store, err := holds.NewStore(ctx, db.SQL())
	require.NoError(t, err)
	r := ledgerRig{store: store, auditPath: filepath.Join(dir, "audit.jsonl")}
	r.audit, err = ledger.NewAudit(ctx, db, r.auditPath, store, zerolog.Nop())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, r.audit.Close()) })
	cfg := holds.DefaultConfig()
	cfg.ResolverTokens = `{"tok-alice": {"type": "human", "id": "alice"}}`
	r.svc, err = holds.NewService(store, cfg, slowJournal{r.audit, delay}, nopPublisher{}, zerolog.Nop())
	require.NoError(t, err)
	return r
}

type nopPublisher struct{}

func (nopPublisher) Publish(engine.Event) {}

// raise commits a require_approval decision creating hold id, as the
// engine does.
func (r ledgerRig) raise(t *testing.T, id string) {
	t.Helper()
	now := time.Now()
	h := engine.Hold{ID: id, DecisionID: "held-" + id, Rule: "svc.policy/irreversible_broad_prod",
		Envelope:  &envelope.Envelope{Agent: envelope.Agent{ID: "agent-7", SessionID: "s"}},
		CreatedTS: now, ExpiresTS: now.Add(time.Hour)}
	rec := map[string]string{"decision_id": h.DecisionID, "verdict": "require_approval", "hold_id": id}
	require.NoError(t, r.audit.Commit(context.Background(), engine.Entry{
		Records: []engine.AuditRecord{{Kind: engine.EventDecision, Body: rec}}, Create: &h}))
}

// redeem is a re-submission as the engine makes it: it reads the hold and,
// once it is approved, commits an allow with the consumption. It reports
// whether the re-submission is over (allowed, or the hold moved on).
func (r ledgerRig) redeem(ctx context.Context, id, decisionID string) (bool, error) {
	now := time.Now()
	h, err := r.store.Get(ctx, id, now)
	if err != nil || h.Status == engine.HoldPending {
		return false, err
	}
	if h.Status != engine.HoldApproved {
		return true, nil
	}
	rec := map[string]string{"decision_id": decisionID, "verdict": "allow", "hold_id": id}
	err = r.audit.Commit(ctx, engine.Entry{Records: []engine.AuditRecord{{Kind: engine.EventDecision, Body: rec}},
		Consume: &engine.Consumption{HoldID: id, DecisionID: decisionID, At: now}})
	if errors.Is(err, holds.ErrNotRedeemable) {
		return true, nil
	}
	return err == nil, err
}

// fileLines reads the audit JSONL file.
func fileLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m))
		out = append(out, m)
	}
	require.NoError(t, sc.Err())
	return out
}

// requireApprovedBeforeAllow checks, in the JSONL order, that no allow of
// a hold is on record before the line of its approval.
func requireApprovedBeforeAllow(t *testing.T, lines []map[string]any) {
	t.Helper()
	approved := map[any]bool{}
	allows := 0
	for i, l := range lines {
		switch {
		case l["event"] == engine.EventHoldResolution && l["status"] == engine.HoldApproved:
			approved[l["hold_id"]] = true
		case l["verdict"] == "allow":
			allows++
			require.True(t, approved[l["hold_id"]], "line %d: allow of hold %v before its approval", i, l["hold_id"])
		}
	}
	require.NotZero(t, allows)
}

// Re-submissions racing an approval never redeem it before its audit line
// exists: the resolution is the hold write of its audit commit, so its
// line precedes any allow it makes possible, however slow the audit.
func TestResolutionLinePrecedesItsRedemption(t *testing.T) {
	const rounds, redeemers = 30, 8
	r := newLedgerRig(t, 5*time.Millisecond)
	ctx := context.Background()
	for round := range rounds {
		id := fmt.Sprintf("h-%02d", round)
		r.raise(t, id)
		var wg sync.WaitGroup
		for i := range redeemers {
			wg.Go(func() {
				for done := false; !done; {
					var err error
					done, err = r.redeem(ctx, id, fmt.Sprintf("d-%s-%d", id, i))
					assert.NoError(t, err)
				}
			})
		}
		_, err := r.svc.Resolve(ctx, engine.ResolveRequest{HoldID: id, Credential: "tok-alice",
			Decision: holds.DecisionApprove})
		require.NoError(t, err)
		wg.Wait()
	}
	requireApprovedBeforeAllow(t, fileLines(t, r.auditPath))
}

// A resolution whose audit line cannot be written is not applied: the
// hold stays pending, a re-submission cannot redeem it, and it can be
// approved once the audit log works again.
func TestResolutionAuditFailureLeavesHoldPending(t *testing.T) {
	r := newLedgerRig(t, 0)
	ctx := context.Background()
	r.raise(t, "h")
	require.NoError(t, os.Remove(r.auditPath))
	require.NoError(t, os.Mkdir(r.auditPath, 0o700))

	approve := engine.ResolveRequest{HoldID: "h", Credential: "tok-alice", Decision: holds.DecisionApprove}
	_, err := r.svc.Resolve(ctx, approve)
	require.ErrorIs(t, err, holds.ErrAuditUnavailable)
	h, err := r.store.Get(ctx, "h", time.Now())
	require.NoError(t, err)
	assert.Equal(t, engine.HoldPending, h.Status)
	assert.Nil(t, h.DecidedBy)

	require.NoError(t, os.Remove(r.auditPath))
	done, err := r.redeem(ctx, "h", "d-1")
	require.NoError(t, err)
	assert.False(t, done, "a pending hold is not redeemed")
	h, err = r.svc.Resolve(ctx, approve)
	require.NoError(t, err)
	assert.Equal(t, engine.HoldApproved, h.Status)
	done, err = r.redeem(ctx, "h", "d-2")
	require.NoError(t, err)
	assert.True(t, done)
	requireApprovedBeforeAllow(t, fileLines(t, r.auditPath))
}
