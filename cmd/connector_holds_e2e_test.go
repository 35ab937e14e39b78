package cmd_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pendingHolds lists the engine's pending holds.
func (g *gateway) pendingHolds(t testing.TB) []map[string]any {
	t.Helper()
	r := g.engine.call(t, "GET", "/v1/holds?status=pending&limit=1000", nil)
	require.Equal(t, 200, r.Status, "%v", r.Body)
	var out []map[string]any
	for _, it := range r.Body["items"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out
}

// guardrailAsync posts a guardrail request in the background.
func (g *gateway) guardrailAsync(t *testing.T, body any) <-chan response {
	ch := make(chan response, 1)
	go func() { ch <- g.guardrail(t, body) }()
	return ch
}

// onePending waits for exactly one pending hold and returns its id.
func (g *gateway) onePending(t *testing.T) string {
	t.Helper()
	var id string
	require.Eventually(t, func() bool {
		holds := g.pendingHolds(t)
		if len(holds) == 1 {
			id = holds[0]["id"].(string)
		}
		return id != ""
	}, 20*time.Second, 50*time.Millisecond)
	return id
}

// TestConnectorHoldApprovedDuringWait: the gateway request waits while a
// human approves; the call is then re-submitted with the approval and let
// through, and the ledger says who approved.
func TestConnectorHoldApprovedDuringWait(t *testing.T) {
	g := startGateway(t, map[string]string{"SVC_GATEWAY_HOLD_WAIT": "30"})
	answer := g.guardrailAsync(t, fixture(t, "08_post_call_header_svc_session_forwarded.json"))
	id := g.onePending(t)
	require.Equal(t, 200, resolve(t, g.engine, "tok-alice", id, map[string]any{"decision": "approve"}).Status)
	r := <-answer
	require.Equal(t, "NONE", r.str("action"), "%v", r.Body)
	row := g.ledgerRows(t)[0]
	assert.Equal(t, "allow", row["outcome"])
	assert.Equal(t, true, row["released_after_approval"])
	assert.Equal(t, id, row["hold_id"])
	assert.Equal(t, map[string]any{"decided_by": map[string]any{"type": "human", "id": "Alice"}, "resolution": "approved",
		"verified": true}, row["hold_decision"])

	answer = g.guardrailAsync(t, fixture(t, "09_post_call_header_svc_session_redacted.json"))
	id = g.onePending(t)
	require.Equal(t, 200, resolve(t, g.engine, "tok-alice", id, map[string]any{"decision": "reject"}).Status)
	refused := refusals(t, <-answer)
	require.Equal(t, "svc_denied", refused[0]["error"])
	require.Contains(t, refused[0]["reason"], "rejected")
	require.Equal(t, "rejected", g.ledgerRows(t)[0]["hold_decision"].(map[string]any)["resolution"])
}

// TestConnectorHoldRetryReleasedOnce: with hold wait 0 the call is refused
// at once naming its hold; a retry after the approval finds the hold (the
// engine reuses it) and is released once, never twice.
func TestConnectorHoldRetryReleasedOnce(t *testing.T) {
	g := startGateway(t, nil)
	body := fixture(t, "08_post_call_header_svc_session_forwarded.json")
	start := time.Now()
	refused := refusals(t, g.guardrail(t, body))
	require.Less(t, time.Since(start), 5*time.Second, "wait 0 refuses at once")
	require.Equal(t, "svc_hold_timeout", refused[0]["error"])
	id := refused[0]["hold_id"].(string)
	require.Contains(t, refused[0]["reason"], id)
	require.Equal(t, "svc_hold_timeout", refusals(t, g.guardrail(t, body))[0]["error"], "still pending")
	require.Len(t, g.pendingHolds(t), 1, "a retry of a pending call reuses its hold")
	require.Equal(t, 200, resolve(t, g.engine, "tok-alice", id, map[string]any{"decision": "approve"}).Status)
	require.Equal(t, "NONE", g.guardrail(t, body).str("action"))
	again := refusals(t, g.guardrail(t, body))
	require.Equal(t, "svc_hold_timeout", again[0]["error"], "the approval is spent: a new hold")
	require.NotEqual(t, id, again[0]["hold_id"])
	released := 0
	for _, row := range g.ledgerRows(t) {
		if row["released_after_approval"] == true {
			released++
			require.Equal(t, id, row["hold_id"])
		}
	}
	require.Equal(t, 1, released)
}

// toolCallRequest is a post-call guardrail request of one tool call by the
// key alias, in svc session session.
func toolCallRequest(t testing.TB, alias, session, id, tool string, args map[string]any) map[string]any {
	body := fixture(t, "01_post_call_single_read_tool_call.json")
	body["request_data"] = map[string]any{"user_api_key_alias": alias}
	body["additional_provider_specific_params"] = map[string]any{"svc_session": session}
	body["tool_calls"] = []any{map[string]any{"id": id, "type": "function",
		"function": map[string]any{"name": tool, "arguments": string(mustJSON(t, args))}}}
	return body
}

// TestConnectorConcurrentHoldsAndBudgets: 50 concurrent guardrail calls —
// 30 production mass deletes (6 actions, each sent 5 times) that a human
// approves while they wait, and 20 staging deletes of 5 rows in one
// session against a delete budget of 20. No call is released without an
// allow, each approval is released once, and the budget admits 4.
func TestConnectorConcurrentHoldsAndBudgets(t *testing.T) {
	g := startGateway(t, map[string]string{"SVC_GATEWAY_HOLD_WAIT": "8"})
	stop := make(chan struct{})
	var approver sync.WaitGroup
	approver.Add(1)
	go func() { // approves the production holds, never the budget holds
		defer approver.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			for _, h := range g.pendingHolds(t) {
				if h["rule"] == "svc.policy/irreversible_broad_prod" {
					resolve(t, g.engine, "tok-alice", h["id"].(string), map[string]any{"decision": "approve"})
				}
			}
		}
	}()
	answers := make([]response, 50)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var body map[string]any
			if i < 30 {
				ids := make([]int, 12)
				for j := range ids {
					ids[j] = (i%6)*100 + j
				}
				body = toolCallRequest(t, "agent-ops-prod", "mass", fmt.Sprintf("call_p%d", i), "purge_rows", map[string]any{"table": "sessions", "ids": ids})
			} else {
				body = toolCallRequest(t, "agent-lab", "budget-run", fmt.Sprintf("call_s%d", i), "purge_rows",
					map[string]any{"table": "scratch", "ids": []int{i * 10, i*10 + 1, i*10 + 2, i*10 + 3, i*10 + 4}})
			}
			answers[i] = g.guardrail(t, body)
		}()
	}
	wg.Wait()
	close(stop)
	approver.Wait()

	rows := map[string]map[string]any{}
	for _, row := range g.ledgerRows(t) {
		rows[row["tool_call_id"].(string)] = row
	}
	allowed := map[string]bool{} // decision ids the engine answered allow, from its audit log
	for _, line := range auditLines(t, g.engineEnv["SVC_AUDIT_LOG"]) {
		if line["event"] == "decision" && line["verdict"] == "allow" {
			allowed[line["decision_id"].(string)] = true
		}
	}
	releasedHolds := map[string]bool{}
	var stagingAllowed int
	for i, a := range answers {
		require.Equal(t, 200, a.Status)
		row := rows[fmt.Sprintf("call_%s%d", map[bool]string{true: "p", false: "s"}[i < 30], i)]
		require.NotNil(t, row, "every call has its ledger row")
		if a.str("action") != "NONE" {
			require.Equal(t, "BLOCKED", a.str("action"))
			require.NotEqual(t, "allow", row["outcome"])
			continue
		}
		require.Equal(t, "allow", row["outcome"], "released only on allow")
		require.True(t, allowed[row["decision_id"].(string)], "the engine's audit log holds the allow")
		if i < 30 {
			require.Equal(t, true, row["released_after_approval"])
			hold := row["hold_id"].(string)
			require.False(t, releasedHolds[hold], "hold %s released twice", hold)
			releasedHolds[hold] = true
		} else {
			stagingAllowed++
		}
	}
	require.Equal(t, 4, stagingAllowed, "delete budget 20 admits four deletes of 5 rows")
	require.NotEmpty(t, releasedHolds)
	consumed := g.engine.call(t, "GET", "/v1/holds?status=consumed&limit=1000", nil)
	require.Equal(t, float64(len(releasedHolds)), consumed.Body["count"], "each consumed approval released exactly one call")
}
