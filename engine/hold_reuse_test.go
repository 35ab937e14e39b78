package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
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

// newServerPipeline is a pipeline whose policy is evaluated by one opa
// server, as `svc serve` does by default: fifty concurrent decisions spawn
// no fifty opa processes.
func newServerPipeline(t *testing.T) *pipeline {
	t.Helper()
	pack, cleanup, err := rego.Materialize()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, cleanup()) })
	s, err := opa.StartOPAServer(opa.OPAServerConfig{Bin: realOPA(t), PolicyDir: pack,
		Timeout: 10 * time.Second, Logger: zerolog.Nop()})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	require.NoError(t, s.Check(t.Context()))
	return newPipelineWith(t, s, nil)
}

// holdDecisions are the decision records of p's audit log that name a
// hold, by decision id.
func (p *pipeline) holdDecisions(t *testing.T) map[string]engine.DecisionEvent {
	t.Helper()
	rows, err := p.audit.Records(context.Background(), engine.EventDecision)
	require.NoError(t, err)
	out := map[string]engine.DecisionEvent{}
	for _, r := range rows {
		var ev engine.DecisionEvent
		require.NoError(t, json.Unmarshal(r.Body, &ev))
		if ev.HoldID != "" {
			out[ev.DecisionID] = ev
		}
	}
	return out
}

// Fifty identical require_approval decisions at once, from one session and
// from many (the binding leaves the session out), raise one hold: every
// answer names it with its expiry, one created it and the others say they
// reuse it, as their audit lines do; one hold_resolution line (pending) is
// on record. The approval is then spent once.
func TestConcurrentIdenticalHoldsRaiseOne(t *testing.T) {
	p := newServerPipeline(t)
	const n = 50
	decisions := make([]engine.Decision, n)
	var wg sync.WaitGroup
	for i := range n {
		session := "s"
		if i%2 == 1 {
			session = fmt.Sprintf("s%d", i)
		}
		wg.Go(func() { decisions[i] = p.decideIn(t, session, "delete", 1, "production", "irreversible", "broad") })
	}
	wg.Wait()
	id, expires, created := decisions[0].HoldID, decisions[0].ExpiresTS, 0
	for _, d := range decisions {
		require.Equal(t, engine.RequireApproval, d.Decision, "%+v", d)
		assert.Equal(t, id, d.HoldID)
		assert.Equal(t, expires, d.ExpiresTS)
		if !d.HoldReused {
			created++
		}
	}
	assert.Equal(t, 1, created, "one decision created the hold")
	page, err := p.holds.List(context.Background(), engine.HoldQuery{Status: "all", Limit: 100, Now: time.Now()})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)

	lines := p.holdDecisions(t)
	require.Len(t, lines, n)
	for _, d := range decisions {
		assert.Equal(t, id, lines[d.DecisionID].HoldID)
		assert.Equal(t, d.HoldReused, lines[d.DecisionID].HoldReused)
	}
	rows, err := p.audit.Records(context.Background(), engine.EventHoldResolution)
	require.NoError(t, err)
	assert.Len(t, rows, 1, "a reuse is no new hold: no hold_resolution line of its own")

	p.approve(t, id)
	assert.Equal(t, engine.Allow, p.resubmit(t, "s7", id).Decision)
	again := p.resubmit(t, "s", id)
	assert.Equal(t, engine.Deny, again.Decision)
	assert.Equal(t, engine.ReasonHoldConsumed, again.Reason)
}

// An identical action whose hold was approved but not yet redeemed finds
// that hold (a retry after the adapter gave up waiting); once the approval
// is spent the next identical action raises a new hold; another action
// never shares one. (holds/reuse_test.go covers rejected and expired holds
// and other actors and gates.)
func TestHoldReuseFollowsTheHoldsState(t *testing.T) {
	p := newPipeline(t, realOPA(t), nil)
	held := func(session string) engine.Decision {
		d := p.decideIn(t, session, "delete", 1, "production", "irreversible", "broad")
		require.Equal(t, engine.RequireApproval, d.Decision)
		return d
	}
	first := held("s1")
	assert.False(t, first.HoldReused)
	p.approve(t, first.HoldID)
	retry := held("s2")
	assert.Equal(t, first.HoldID, retry.HoldID, "the approved hold is found")
	assert.True(t, retry.HoldReused)
	assert.Equal(t, engine.Allow, p.resubmit(t, "s2", first.HoldID).Decision)

	after := held("s3")
	assert.NotEqual(t, first.HoldID, after.HoldID, "a spent approval is not reused")
	assert.False(t, after.HoldReused)

	other := p.decideIn(t, "s3", "delete", 2, "production", "irreversible", "broad")
	assert.NotEqual(t, after.HoldID, other.HoldID, "another magnitude is another action")
}

// A hold store that cannot look for a live hold fails the require_approval
// closed: a 500 deny under svc.core/hold_creation_failed, on record, and
// no hold.
func TestHoldReuseLookupFaultDenies(t *testing.T) {
	ctx := context.Background()
	p := newPipeline(t, realOPA(t), nil)
	_, err := p.db.SQL().ExecContext(ctx, "DROP INDEX holds_binding")
	require.NoError(t, err)
	_, err = p.db.SQL().ExecContext(ctx, "ALTER TABLE holds DROP COLUMN binding")
	require.NoError(t, err)
	d, status := p.decideStatus(t, "s", "delete", 1, "production", "irreversible", "broad")
	assert.Equal(t, 500, status)
	assert.Equal(t, engine.Deny, d.Decision)
	assert.Equal(t, engine.RuleHoldCreationFailed, d.Rule)
	assert.Empty(t, d.HoldID)
	rows, err := p.audit.Records(ctx, engine.EventDecision)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Contains(t, string(rows[0].Body), `"verdict":"deny"`)
	page, err := p.holds.List(ctx, engine.HoldQuery{Status: "all", Limit: 10, Now: time.Now()})
	require.NoError(t, err)
	assert.Empty(t, page.Items)
}
