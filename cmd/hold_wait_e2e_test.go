package cmd_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitHold long-polls hold id for up to wait seconds and returns the answer
// with how long it took.
func waitHold(t *testing.T, p *engineProc, token, id string, wait int) (response, time.Duration) {
	t.Helper()
	start := time.Now()
	r := p.callAs(t, token, "GET", fmt.Sprintf("/v1/holds/%s?wait=%d", id, wait), nil)
	return r, time.Since(start)
}

// An approval during the wait ends it at once with the approved hold, as
// GET /v1/holds/{id} answers it; the wait never runs to its end.
func TestHoldWaitEndsOnApproval(t *testing.T) {
	p, _ := holdsEngine(t, nil)
	id, _ := raiseHold(t, p, nil)
	done := make(chan response, 1)
	var took time.Duration
	go func() {
		r, d := waitHold(t, p, p.token, id, 120)
		took = d
		done <- r
	}()
	time.Sleep(300 * time.Millisecond) // let the wait start; it answers approved either way
	require.Equal(t, 200, resolve(t, p, "tok-bob", id, map[string]any{"decision": "approve"}).Status)
	r := <-done
	require.Equal(t, 200, r.Status, "%v", r.Body)
	assert.Equal(t, "approved", r.str("status"))
	assert.Less(t, took, 60*time.Second, "woken by the approval, not by the end of the wait")
	plain := p.call(t, "GET", "/v1/holds/"+id, nil)
	assert.Equal(t, plain.Body, r.Body, "the same answer as without wait")
}

// A hold still pending when the wait ends is answered pending; a hold not
// pending is answered at once; an unknown hold is a 404 at once.
func TestHoldWaitTimesOutPending(t *testing.T) {
	p, _ := holdsEngine(t, nil)
	id, _ := raiseHold(t, p, nil)
	r, took := waitHold(t, p, p.token, id, 1)
	require.Equal(t, 200, r.Status, "%v", r.Body)
	assert.Equal(t, "pending", r.str("status"))
	assert.GreaterOrEqual(t, took, time.Second)

	require.Equal(t, 200, resolve(t, p, "tok-bob", id, map[string]any{"decision": "reject"}).Status)
	r, took = waitHold(t, p, p.token, id, 120)
	assert.Equal(t, "rejected", r.str("status"))
	assert.Less(t, took, 60*time.Second)

	r, _ = waitHold(t, p, p.token, "no-such-hold", 120)
	assert.Equal(t, 404, r.Status)
	assert.Equal(t, "no-such-hold", r.str("hold_id"))

	r, _ = waitHold(t, p, p.token, id, 0)
	assert.Equal(t, "rejected", r.str("status"), "wait=0 is a plain read")
}

// A hold that expires during the wait is answered expired at its expiry.
func TestHoldWaitEndsAtExpiry(t *testing.T) {
	p, _ := holdsEngine(t, map[string]string{"SVC_HOLD_TTL_SECONDS": "2"})
	id, _ := raiseHold(t, p, nil)
	r, took := waitHold(t, p, p.token, id, 120)
	require.Equal(t, 200, r.Status, "%v", r.Body)
	assert.Equal(t, "expired", r.str("status"))
	assert.Less(t, took, 60*time.Second, "woken at the expiry, not at the end of the wait")
}

// Many clients waiting on one hold, and others on another, are all answered
// by the approval of theirs; those on the other hold keep waiting until it
// is rejected.
func TestHoldWaitManyWaiters(t *testing.T) {
	p, _ := holdsEngine(t, nil)
	first, _ := raiseHold(t, p, map[string]any{"agent.session_id": "w1", "params.where": "a"})
	second, _ := raiseHold(t, p, map[string]any{"agent.session_id": "w2", "params.where": "b"})
	const n = 40
	answers := make([]response, 2*n)
	var wg sync.WaitGroup
	for i := range 2 * n {
		id := first
		if i%2 == 1 {
			id = second
		}
		wg.Go(func() { answers[i], _ = waitHold(t, p, p.token, id, 120) })
	}
	time.Sleep(500 * time.Millisecond)
	require.Equal(t, 200, resolve(t, p, "tok-bob", first, map[string]any{"decision": "approve"}).Status)
	require.Equal(t, 200, resolve(t, p, "tok-bob", second, map[string]any{"decision": "reject"}).Status)
	wg.Wait()
	for i, r := range answers {
		want := "approved"
		if i%2 == 1 {
			want = "rejected"
		}
		require.Equal(t, 200, r.Status, "%v", r.Body)
		assert.Equal(t, want, r.str("status"))
	}
}

// The long-poll is authenticated as GET /v1/holds/{id}, and a wait that is
// not whole seconds from 0 to 300, given once, is refused naming wait.
func TestHoldWaitAuthAndBadWait(t *testing.T) {
	p, _ := holdsEngine(t, nil)
	id, _ := raiseHold(t, p, nil)
	r, _ := waitHold(t, p, "", id, 5)
	assert.Equal(t, 401, r.Status)
	r, _ = waitHold(t, p, "wrong-token", id, 5)
	assert.Equal(t, 401, r.Status)
	r, _ = waitHold(t, p, "tok-bob", id, 0)
	assert.Equal(t, "pending", r.str("status"), "a resolver token reads holds")

	for _, q := range []string{"wait=301", "wait=-1", "wait=abc", "wait=", "wait=1.5", "wait=1&wait=2",
		"wait=99999999999999999999", "wait=%201"} {
		r := p.call(t, "GET", "/v1/holds/"+id+"?"+q, nil)
		assert.Equal(t, 400, r.Status, q)
		assert.Equal(t, "wait", r.str("field"), q)
		assert.Contains(t, r.str("reason"), "from 0 to 300", q)
	}
}

// A retried action reuses its live hold: the retry names the same hold with
// hold_reused, through the approval, until the approval is spent; then the
// next retry raises a new hold. Waiting and re-submitting work as for the
// first answer, and the audit log has one creation line per hold.
func TestRetryReusesItsHold(t *testing.T) {
	p, env := holdsEngine(t, nil)
	retry := func() response {
		r := p.decide(t, heldEnvelope(map[string]any{"agent.session_id": "retry"}))
		require.Equal(t, "require_approval", r.str("decision"), "%v", r.Body)
		return r
	}
	id, _ := raiseHold(t, p, nil)
	again := retry()
	assert.Equal(t, id, again.str("hold_id"))
	assert.Equal(t, true, again.Body["hold_reused"])
	require.Equal(t, 200, resolve(t, p, "tok-bob", id, map[string]any{"decision": "approve"}).Status)
	r, _ := waitHold(t, p, p.token, again.str("hold_id"), 120)
	assert.Equal(t, "approved", r.str("status"))
	assert.Equal(t, id, retry().str("hold_id"), "an approved hold not yet redeemed is found")
	assert.Equal(t, "allow", p.decide(t, resubmission(id, nil)).str("decision"))
	assert.Equal(t, "svc_hold_consumed", p.decide(t, resubmission(id, nil)).str("reason"))
	fresh := retry()
	assert.NotEqual(t, id, fresh.str("hold_id"))
	assert.Nil(t, fresh.Body["hold_reused"])

	p.stop(t)
	created := map[any]int{}
	for _, rec := range auditLines(t, env["SVC_AUDIT_LOG"]) {
		if rec["event"] == "hold_resolution" && rec["status"] == "pending" {
			created[rec["hold_id"]]++
		}
		if rec["event"] == "decision" && rec["decision_id"] == again.str("decision_id") {
			assert.Equal(t, id, rec["hold_id"])
			assert.Equal(t, true, rec["hold_reused"])
		}
	}
	assert.Equal(t, map[any]int{id: 1, fresh.str("hold_id"): 1}, created)
}
