package engine_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

// A hold is written in the transaction of its decision's record: when the
// record cannot be committed, the hold does not exist either.
func TestHoldRowCommitsWithTheDecisionRecord(t *testing.T) {
	p := newPipeline(t, realOPA(t), nil)
	_, err := p.db.SQL().ExecContext(context.Background(), "DROP TABLE audit")
	require.NoError(t, err)
	d, status := p.decideStatus(t, "s", "delete", 1, "production", "irreversible", "broad")
	assert.Equal(t, 500, status)
	assert.Equal(t, engine.Deny, d.Decision)
	assert.Empty(t, d.HoldID)
	page, err := p.holds.List(context.Background(), engine.HoldQuery{Status: "all", Limit: 10, Now: time.Now()})
	require.NoError(t, err)
	assert.Empty(t, page.Items, "no hold without its decision on record")
}

// resubmit re-submits the held envelope of decideIn(…, "production",
// "irreversible", "broad") from session with the approval of holdID.
func (p *pipeline) resubmit(t *testing.T, session, holdID string) engine.Decision {
	t.Helper()
	env, err := envelope.ParseEnvelope(fmt.Appendf(nil, `{"svc_version":"0.2",
		"agent":{"id":"agent-1","on_behalf_of":"human:alice","session_id":%q},
		"action":{"namespace":"db","verb":"delete","ability":"db/x"},
		"target":{"kind":"table","ref":"t","environment":"production"},"params":{},"magnitude":{"count":1},
		"axes":{"reversibility":"irreversible","blast_radius":"broad","externality":"internal"},
		"approval":{"present":true,"hold_id":%q},"context":{},
		"meta":{"timestamp":"2026-01-01T00:00:00Z","nonce":"n","signature":"s"}}`, session, holdID))
	require.NoError(t, err)
	d, _ := p.engine.Decide(context.Background(), engine.Request{Envelope: env, Received: time.Now()})
	return d
}

// approve approves hold id as a resolver does: the resolution is the hold
// write of its audit commit.
func (p *pipeline) approve(t *testing.T, id string) {
	t.Helper()
	p.approveAs(t, id, engine.Principal{Type: "human", ID: "bob"})
}

// Re-submissions of one approved hold from many sessions at once (so no
// session lock orders them) race for its consumption inside their commits:
// exactly one is allowed, every other is refused as consumed, and only the
// winner's consumption is on record.
func TestConcurrentRedemptionsConsumeTheHoldOnce(t *testing.T) {
	p := newPipeline(t, realOPA(t), nil)
	held := p.decideIn(t, "s0", "delete", 1, "production", "irreversible", "broad")
	require.Equal(t, engine.RequireApproval, held.Decision)
	p.approve(t, held.HoldID)

	const n = 24
	decisions := make([]engine.Decision, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { decisions[i] = p.resubmit(t, fmt.Sprintf("s%d", i+1), held.HoldID) })
	}
	wg.Wait()
	var winner string
	for _, d := range decisions {
		if d.Decision == engine.Allow {
			require.Empty(t, winner, "a second allow")
			winner = d.DecisionID
			assert.Equal(t, engine.RuleApprovedResubmission, d.Rule)
			continue
		}
		assert.Equal(t, engine.Deny, d.Decision)
		assert.Equal(t, engine.RuleHoldNotRedeemable, d.Rule)
		assert.Equal(t, engine.ReasonHoldConsumed, d.Reason)
	}
	require.NotEmpty(t, winner)
	h, err := p.holds.Get(context.Background(), held.HoldID, time.Now())
	require.NoError(t, err)
	assert.Equal(t, engine.HoldConsumed, h.Status)
	assert.Equal(t, winner, h.ConsumedBy)

	rows, err := p.audit.Records(context.Background(), engine.EventHoldResolution)
	require.NoError(t, err)
	require.Len(t, rows, 3, "the creation, the approval and the one consumption")
	assert.Contains(t, string(rows[0].Body), `"status":"pending"`)
	assert.Contains(t, string(rows[1].Body), `"status":"approved"`)
	assert.Contains(t, string(rows[2].Body), `"status":"consumed"`)
}

// A re-submission whose commit fails is denied: the hold stays approved,
// the file shows no allow for it, and the deny is recorded, marked
// degraded, in the sink that still works.
func TestFailedRedemptionDenyIsOnRecord(t *testing.T) {
	p := newPipeline(t, realOPA(t), nil)
	held := p.decideIn(t, "s", "delete", 1, "production", "irreversible", "broad")
	require.Equal(t, engine.RequireApproval, held.Decision)
	p.approve(t, held.HoldID)
	_, err := p.db.SQL().ExecContext(context.Background(), "DROP TABLE audit")
	require.NoError(t, err)

	d := p.resubmit(t, "s", held.HoldID)
	assert.Equal(t, engine.Deny, d.Decision)
	assert.Equal(t, engine.RuleInternalError, d.Rule)
	h, err := p.holds.Get(context.Background(), held.HoldID, time.Now())
	require.NoError(t, err)
	assert.Equal(t, engine.HoldApproved, h.Status, "the consumption is not stored")

	body, err := os.ReadFile(p.auditPath())
	require.NoError(t, err)
	assert.NotContains(t, string(body), `"verdict":"allow"`)
	rec := p.lastFileRecord(t)
	assert.Equal(t, d.DecisionID, rec.DecisionID)
	assert.Equal(t, engine.Deny, rec.Verdict)
	assert.True(t, rec.Degraded)
}

// A hold is redeemed only through the gate it was raised through; a hold
// raised before svc recorded gates (gate NULL) is bound to none, as then.
func TestHoldGateBinding(t *testing.T) {
	ctx := context.Background()
	p := newPipeline(t, realOPA(t), nil)
	held := p.decideIn(t, "s0", "delete", 1, "production", "irreversible", "broad")
	require.Equal(t, engine.RequireApproval, held.Decision)
	p.approve(t, held.HoldID)
	h, err := p.holds.Get(ctx, held.HoldID, time.Now())
	require.NoError(t, err)
	require.NotNil(t, h.Gate)
	assert.Empty(t, *h.Gate, "raised without a gate credential")

	_, err = p.db.SQL().ExecContext(ctx, "UPDATE holds SET gate = 'gate-a' WHERE id = ?", held.HoldID)
	require.NoError(t, err)
	d := p.resubmit(t, "s0", held.HoldID)
	assert.Equal(t, engine.Deny, d.Decision)
	assert.Equal(t, engine.ReasonHoldActorMismatch, d.Reason, "a hold of gate-a is not redeemed without it")

	_, err = p.db.SQL().ExecContext(ctx, "UPDATE holds SET gate = NULL WHERE id = ?", held.HoldID)
	require.NoError(t, err)
	h, err = p.holds.Get(ctx, held.HoldID, time.Now())
	require.NoError(t, err)
	assert.Nil(t, h.Gate, "gate unknown")
	assert.Equal(t, engine.Allow, p.resubmit(t, "s0", held.HoldID).Decision)
}
