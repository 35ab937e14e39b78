package cmd_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
)

// resolverTokens is the resolver-token file of the hold tests.
var resolverTokens = map[string]any{
	"tok-bob":    map[string]string{"type": "human", "id": "bob"},
	"tok-alice":  map[string]string{"type": "human", "id": "Alice"},
	"tok-alice2": map[string]string{"type": "human", "id": "ａｌｉｃｅ\u200b"},
	"tok-agent7": map[string]string{"type": "agent", "id": "AGENT-7"},
	"tok-bot":    map[string]string{"type": "agent", "id": "agent-9"},
	"tok-ci":     map[string]string{"type": "automation", "id": "ci"},
}

func writeTokens(t testing.TB, path string, tokens map[string]any) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, mustJSON(t, tokens), 0o600))
}

// holdsEngine starts an engine with resolver tokens in a file and an auth
// token for adapters.
func holdsEngine(t testing.TB, extra map[string]string) (*engineProc, map[string]string) {
	t.Helper()
	env := baseEnv(t)
	env["SVC_AUTH_TOKEN"] = "adapter-token"
	tokens := filepath.Join(t.TempDir(), "resolvers.json")
	writeTokens(t, tokens, resolverTokens)
	env["SVC_RESOLVER_TOKENS"] = tokens
	for k, v := range extra {
		env[k] = v
	}
	return startEngine(t, env), env
}

// heldEnvelope is an irreversible broad delete in production: it is held.
func heldEnvelope(edits map[string]any) map[string]any {
	base := map[string]any{"action.verb": "delete", "action.ability": "db/delete_rows",
		"axes.reversibility": "irreversible", "axes.blast_radius": "broad", "target.environment": "production",
		"params.where": "created < 2020", "magnitude.count": 3}
	for k, v := range edits {
		base[k] = v
	}
	return envelope(base)
}

// raiseHold decides a held envelope and returns its hold id and decision id.
func raiseHold(t *testing.T, p *engineProc, edits map[string]any) (string, string) {
	t.Helper()
	r := p.decide(t, heldEnvelope(edits))
	require.Equal(t, "require_approval", r.str("decision"), "%v", r.Body)
	return r.str("hold_id"), r.str("decision_id")
}

func resubmission(holdID string, edits map[string]any) map[string]any {
	e := map[string]any{"approval.present": true, "approval.hold_id": holdID}
	for k, v := range edits {
		e[k] = v
	}
	return heldEnvelope(e)
}

func resolve(t *testing.T, p *engineProc, token, id string, body any) response {
	t.Helper()
	return p.callAs(t, token, "POST", "/v1/holds/"+id+"/resolve", body)
}

func TestHoldApproveRedeemOnce(t *testing.T) {
	p, env := holdsEngine(t, nil)
	id, parent := raiseHold(t, p, nil)
	h := p.call(t, "GET", "/v1/holds/"+id, nil)
	require.Equal(t, 200, h.Status)
	assert.Equal(t, "pending", h.str("status"))
	assert.Equal(t, "svc.policy/irreversible_broad_prod", h.str("rule"))
	assert.Equal(t, parent, h.str("decision_id"))
	for _, f := range []string{"id", "reason", "envelope", "envelope_hash", "created_ts", "expires_ts", "decided_by",
		"decided_ts", "decided_by_verified", "resolution_reason", "consumed_ts"} {
		assert.Contains(t, h.Body, f)
	}
	assert.Equal(t, "pending", resubmitVerdict(t, p, id, nil, "svc_hold_not_approved"))

	r := resolve(t, p, "tok-bob", id, map[string]any{"decision": "approve", "reason": "checked the rows"})
	require.Equal(t, 200, r.Status, "%v", r.Body)
	assert.Equal(t, "approved", r.str("status"))
	assert.Equal(t, map[string]any{"type": "human", "id": "bob"}, r.Body["decided_by"])
	assert.Equal(t, true, r.Body["decided_by_verified"])
	assert.NotEmpty(t, r.str("decided_ts"))

	d := p.decide(t, resubmission(id, nil))
	require.Equal(t, "allow", d.str("decision"), "%v", d.Body)
	assert.Equal(t, "svc.policy/approved_resubmission", d.str("rule"))
	assert.Equal(t, id, d.str("hold_id"))
	assert.Equal(t, parent, d.str("parent_decision_id"))
	h = p.call(t, "GET", "/v1/holds/"+id, nil)
	assert.Equal(t, "consumed", h.str("status"))
	assert.NotEmpty(t, h.str("consumed_ts"))

	again := p.decide(t, resubmission(id, nil))
	assert.Equal(t, "deny", again.str("decision"))
	assert.Equal(t, "svc_hold_consumed", again.str("reason"))
	r = resolve(t, p, "tok-bob", id, map[string]any{"decision": "reject"})
	assert.Equal(t, 409, r.Status)
	assert.Equal(t, "not_resolvable", r.str("error"))
	assert.Equal(t, "consumed", r.str("status"))

	p.stop(t)
	var transitions []string
	for _, rec := range auditLines(t, env["SVC_AUDIT_LOG"]) {
		if rec["event"] == "hold_resolution" && rec["hold_id"] == id {
			transitions = append(transitions, rec["status"].(string))
			if rec["status"] == "approved" {
				assert.Equal(t, map[string]any{"type": "human", "id": "bob"}, rec["decided_by"])
				assert.NotEmpty(t, rec["decided_ts"])
				assert.Equal(t, true, rec["decided_by_verified"])
			}
		}
	}
	assert.Equal(t, []string{"pending", "approved", "consumed"}, transitions)
}

// resubmitVerdict re-submits the held envelope, with edits, and checks the
// deny code.
func resubmitVerdict(t *testing.T, p *engineProc, id string, edits map[string]any, code string) string {
	t.Helper()
	d := p.decide(t, resubmission(id, edits))
	assert.Equal(t, "deny", d.str("decision"))
	assert.Equal(t, code, d.str("reason"))
	return p.call(t, "GET", "/v1/holds/"+id, nil).str("status")
}

func TestHoldRejectAndExpire(t *testing.T) {
	p, _ := holdsEngine(t, map[string]string{"SVC_HOLD_TTL_SECONDS": "2"})
	rejected, _ := raiseHold(t, p, map[string]any{"agent.session_id": "rej"})
	r := resolve(t, p, "tok-bob", rejected, map[string]any{"decision": "reject", "reason": "no"})
	require.Equal(t, 200, r.Status, "%v", r.Body)
	assert.Equal(t, "rejected", r.str("status"))
	assert.Equal(t, "rejected", resubmitVerdict(t, p, rejected, nil, "svc_hold_not_approved"))

	lapsed, _ := raiseHold(t, p, map[string]any{"agent.session_id": "exp"})
	other := map[string]any{"params.where": "created < 2021"} // another action: no reuse of lapsed
	approvedThenLapsed, _ := raiseHold(t, p, other)
	require.Equal(t, 200, resolve(t, p, "tok-bob", approvedThenLapsed, map[string]any{"decision": "approve"}).Status)
	time.Sleep(2500 * time.Millisecond)
	assert.Equal(t, "expired", p.call(t, "GET", "/v1/holds/"+lapsed, nil).str("status"))
	r = resolve(t, p, "tok-bob", lapsed, map[string]any{"decision": "approve"})
	assert.Equal(t, 409, r.Status)
	assert.Equal(t, "expired", r.str("status"))
	assert.Equal(t, "expired", resubmitVerdict(t, p, lapsed, nil, "svc_hold_expired"))
	assert.Equal(t, "expired", resubmitVerdict(t, p, approvedThenLapsed, other, "svc_hold_expired"))
	list := p.call(t, "GET", "/v1/holds?status=expired", nil)
	assert.EqualValues(t, 2, list.Body["count"])
}

func TestHoldErrors(t *testing.T) {
	p, _ := holdsEngine(t, nil)
	id, _ := raiseHold(t, p, nil)
	r := p.call(t, "GET", "/v1/holds/nope", nil)
	assert.Equal(t, 404, r.Status)
	assert.Equal(t, "not_found", r.str("error"))
	assert.Equal(t, "nope", r.str("hold_id"))
	r = resolve(t, p, "tok-bob", "nope", map[string]any{"decision": "approve"})
	assert.Equal(t, 404, r.Status)
	assert.Equal(t, "not_found", r.str("error"))
	for _, body := range []any{map[string]any{"decision": "maybe"}, map[string]any{}, map[string]any{"decision": "APPROVE"}} {
		r = resolve(t, p, "tok-bob", id, body)
		assert.Equal(t, 400, r.Status, "%v", body)
		assert.Equal(t, "invalid_request", r.str("error"))
		assert.Equal(t, "decision", r.str("field"))
	}
	for query, field := range map[string]string{
		"status=bogus": "status", "status=": "status", "status=Pending": "status", "limit=0": "limit",
		"limit=1001": "limit", "limit=abc": "limit", "limit=-1": "limit", "limit=5.5": "limit",
		"cursor=garbage": "cursor", "limit=5&limit=6": "limit",
	} {
		r = p.call(t, "GET", "/v1/holds?"+query, nil)
		assert.Equal(t, 400, r.Status, query)
		assert.Equal(t, "invalid_request", r.str("error"), query)
		assert.Equal(t, field, r.str("field"), query)
		assert.NotEmpty(t, r.str("reason"), query)
	}
	r = p.call(t, "GET", "/v1/holds?status=pending&limit=1", nil)
	require.Equal(t, 200, r.Status)
	assert.EqualValues(t, 1, r.Body["count"])
	assert.Contains(t, r.Body, "next_cursor")
}

// A resolve or freeze body that JSON readers disagree on (a duplicate key,
// a case variant, trailing data) is refused and changes nothing: a proxy
// reading the first "decision" would otherwise record what svc did not do.
func TestAmbiguousResolveAndFreezeBodiesRefused(t *testing.T) {
	p, _ := holdsEngine(t, nil)
	id, _ := raiseHold(t, p, nil)
	for body, field := range map[string]string{
		`{"decision":"reject","decision":"approve"}`:  "decision",
		`{"decision":"reject","DECISION":"approve"}`:  "DECISION",
		`{"decision":"reject"}{"decision":"approve"}`: "",
		`{"decision":"reject"} garbage`:               "",
	} {
		r := resolve(t, p, "tok-bob", id, body)
		assert.Equal(t, 400, r.Status, body)
		assert.Equal(t, "invalid_json", r.str("error"), body)
		assert.Equal(t, field, r.str("field"), body)
	}
	assert.Equal(t, "pending", p.call(t, "GET", "/v1/holds/"+id, nil).str("status"))
	for body, field := range map[string]string{
		`{"frozen":false,"FROZEN":true}`: "FROZEN",
		`{"frozen":true,"frozen":false}`: "frozen",
		`{"frozen":true} garbage`:        "",
	} {
		r := p.callAs(t, "tok-bob", "POST", "/v1/freeze", body)
		assert.Equal(t, 400, r.Status, body)
		assert.Equal(t, "invalid_json", r.str("error"), body)
		assert.Equal(t, field, r.str("field"), body)
	}
	assert.Equal(t, false, p.call(t, "GET", "/v1/freeze", nil).Body["frozen"])
	r := resolve(t, p, "tok-bob", id, `{"decision": "reject", "reason": "ambiguity refused"}`)
	require.Equal(t, 200, r.Status, "%v", r.Body)
	assert.Equal(t, "rejected", r.str("status"))
}

func TestResolverVerification(t *testing.T) {
	t.Run("verification not configured", func(t *testing.T) {
		env := baseEnv(t)
		p := startEngine(t, env)
		id, _ := raiseHold(t, p, nil)
		r := resolve(t, p, "someone", id, map[string]any{"decision": "approve"})
		assert.Equal(t, 403, r.Status)
		assert.Equal(t, "principal_not_verified", r.str("error"))
		assert.Equal(t, id, r.str("hold_id"))
		assert.NotEmpty(t, r.str("reason"))
		remedy, _ := r.Body["remedy"].(map[string]any)
		require.NotNil(t, remedy, "%v", r.Body)
		assert.Equal(t, "verification_not_configured", remedy["why"])
		assert.Contains(t, remedy, "principal")
		assert.NotEmpty(t, remedy["actions"])
		assert.NotEmpty(t, remedy["docs"])
	})
	t.Run("unbound credential", func(t *testing.T) {
		p, _ := holdsEngine(t, nil)
		id, _ := raiseHold(t, p, nil)
		r := resolve(t, p, "adapter-token", id, map[string]any{"decision": "approve"})
		assert.Equal(t, 403, r.Status)
		assert.Equal(t, "principal_not_verified", r.str("error"))
		remedy, _ := r.Body["remedy"].(map[string]any)
		assert.Equal(t, "unbound_credential", remedy["why"])
		assert.Equal(t, "pending", p.call(t, "GET", "/v1/holds/"+id, nil).str("status"))
	})
	t.Run("opted out: asserted principal recorded unverified", func(t *testing.T) {
		env := baseEnv(t)
		env["SVC_REQUIRE_VERIFIED_APPROVER"] = "off"
		p := startEngine(t, env)
		id, _ := raiseHold(t, p, nil)
		r := resolve(t, p, "", id, map[string]any{"decision": "approve", "principal": map[string]any{"type": "human", "id": "carol"}})
		require.Equal(t, 200, r.Status, "%v", r.Body)
		assert.Equal(t, false, r.Body["decided_by_verified"])
		assert.Equal(t, map[string]any{"type": "human", "id": "carol"}, r.Body["decided_by"])
	})
	t.Run("unrecognised value reads as true", func(t *testing.T) {
		env := baseEnv(t)
		env["SVC_REQUIRE_VERIFIED_APPROVER"] = "perhaps"
		p := startEngine(t, env)
		id, _ := raiseHold(t, p, nil)
		r := resolve(t, p, "", id, map[string]any{"decision": "approve", "principal": map[string]any{"type": "human", "id": "carol"}})
		assert.Equal(t, 403, r.Status)
	})
}

func TestResolutionPolicyAndFourEyes(t *testing.T) {
	p, _ := holdsEngine(t, map[string]string{
		"SVC_RESOLUTION_POLICY": `{"default": ["human"], "svc.policy/irreversible_broad_prod": ["human", "agent"]}`,
	})
	id, _ := raiseHold(t, p, nil) // agent-7 on behalf of human:alice
	for _, tok := range []string{"tok-alice", "tok-alice2", "tok-agent7"} {
		r := resolve(t, p, tok, id, map[string]any{"decision": "approve"})
		assert.Equal(t, 403, r.Status, tok)
		assert.Equal(t, "actor_is_approver", r.str("error"), tok)
	}
	r := resolve(t, p, "tok-ci", id, map[string]any{"decision": "approve"})
	assert.Equal(t, 403, r.Status)
	assert.Equal(t, "principal_type_not_allowed", r.str("error"))
	r = resolve(t, p, "tok-bot", id, map[string]any{"decision": "approve"})
	assert.Equal(t, 200, r.Status, "an agent other than the requester may resolve where the policy allows: %v", r.Body)

	budget, _ := raiseBudgetHold(t, p)
	r = resolve(t, p, "tok-bot", budget, map[string]any{"decision": "approve"})
	assert.Equal(t, 403, r.Status)
	assert.Equal(t, "principal_type_not_allowed", r.str("error"), "default stays human-only")
}

// raiseBudgetHold exhausts a session's delete budget and returns the hold.
func raiseBudgetHold(t *testing.T, p *engineProc) (string, string) {
	t.Helper()
	del := map[string]any{"agent.session_id": "budget", "action.verb": "delete", "magnitude.count": 20}
	require.Equal(t, "allow", p.decide(t, envelope(del)).str("decision"))
	del["magnitude.count"] = 1
	r := p.decide(t, envelope(del))
	require.Equal(t, "svc.policy/session_delete_budget", r.str("rule"))
	return r.str("hold_id"), r.str("decision_id")
}

func TestResolverTokenFileReloads(t *testing.T) {
	p, env := holdsEngine(t, nil)
	id, _ := raiseHold(t, p, nil)
	r := resolve(t, p, "tok-dave", id, map[string]any{"decision": "approve"})
	assert.Equal(t, 401, r.Status, "an unknown token is not a credential of the hold routes")
	tokens := map[string]any{"tok-dave": map[string]string{"type": "human", "id": "dave"}}
	for k, v := range resolverTokens {
		tokens[k] = v
	}
	writeTokens(t, env["SVC_RESOLVER_TOKENS"], tokens)
	r = resolve(t, p, "tok-dave", id, map[string]any{"decision": "approve"})
	require.Equal(t, 200, r.Status, "%v", r.Body)
	assert.Equal(t, map[string]any{"type": "human", "id": "dave"}, r.Body["decided_by"])

	id2, _ := raiseHold(t, p, map[string]any{"params.where": "another action"})
	require.NoError(t, os.WriteFile(env["SVC_RESOLVER_TOKENS"], []byte("{not json"), 0o600))
	r = resolve(t, p, "adapter-token", id2, map[string]any{"decision": "approve"})
	assert.Equal(t, 500, r.Status, "an invalid token file refuses resolution")
	assert.Equal(t, "resolver_tokens_unavailable", r.str("error"))
	r = resolve(t, p, "tok-bob", id2, map[string]any{"decision": "approve"})
	assert.Equal(t, 500, r.Status)
	assert.Equal(t, "resolver_tokens_unavailable", r.str("error"), "a clear error, not a bare 401")
	assert.Equal(t, "pending", p.call(t, "GET", "/v1/holds/"+id2, nil).str("status"))
}

func TestRedemptionBindsActionParamsAndActor(t *testing.T) {
	p, _ := holdsEngine(t, nil)
	id, _ := raiseHold(t, p, nil)
	require.Equal(t, 200, resolve(t, p, "tok-bob", id, map[string]any{"decision": "approve"}).Status)
	tampered := []struct {
		edits map[string]any
		code  string
	}{
		{map[string]any{"params.where": "1 = 1"}, "svc_hold_envelope_mismatch"},
		{map[string]any{"target.ref": "core.payments"}, "svc_hold_envelope_mismatch"},
		{map[string]any{"magnitude.count": 30}, "svc_hold_envelope_mismatch"},
		{map[string]any{"axes.blast_radius": "scoped"}, "svc_hold_envelope_mismatch"},
		{map[string]any{"agent.id": "agent-8"}, "svc_hold_actor_mismatch"},
		{map[string]any{"agent.on_behalf_of": "human:mallory"}, "svc_hold_actor_mismatch"},
		{map[string]any{"agent.on_behalf_of": nil}, "svc_hold_actor_mismatch"},
	}
	for _, c := range tampered {
		d := p.decide(t, resubmission(id, c.edits))
		assert.Equal(t, "deny", d.str("decision"), "%v", c.edits)
		assert.Equal(t, c.code, d.str("reason"), "%v", c.edits)
	}
	assert.Equal(t, "approved", p.call(t, "GET", "/v1/holds/"+id, nil).str("status"), "refusals never consume")
	d := p.decide(t, resubmission(id, map[string]any{"agent.id": "Agent-7", "action.verb": "Remove"}))
	assert.Equal(t, "allow", d.str("decision"), "the rightful agent, spelled differently, still redeems: %v", d.Body)
}

func TestConcurrentRedemptionsAllowExactlyOnce(t *testing.T) {
	// 100 re-submissions of one session are serialised, each an opa eval
	// process compiling the pack (default eval mode; see
	// TestConcurrentDeletesOfOneSessionNeverExceedTheBudget): on a loaded
	// machine the last waits longer than the default deadline of 10 s, which
	// counts its wait, and is denied. The deadline is not what this test is
	// about.
	p, _ := holdsEngine(t, map[string]string{"SVC_OPA_TIMEOUT": "120"})
	id, _ := raiseHold(t, p, nil)
	require.Equal(t, 200, resolve(t, p, "tok-bob", id, map[string]any{"decision": "approve"}).Status)
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[string]int{}
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := p.decide(t, resubmission(id, nil))
			mu.Lock()
			counts[d.str("decision")+"/"+d.str("reason")]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	allows := allowsIn(counts)
	assert.Equal(t, 1, allows, "%v", counts)
	assert.Equal(t, 99, counts["deny/svc_hold_consumed"], "%v", counts)
}

// allowsIn sums the counts of the keys "allow/<reason>" of counts.
func allowsIn(counts map[string]int) int {
	allows := 0
	for k, n := range counts {
		if strings.HasPrefix(k, "allow/") {
			allows += n
		}
	}
	return allows
}

func TestFreezeWinsOverAnApproval(t *testing.T) {
	p, env := holdsEngine(t, nil)
	id, _ := raiseHold(t, p, nil)
	require.Equal(t, 200, resolve(t, p, "tok-bob", id, map[string]any{"decision": "approve"}).Status)
	p.stop(t)
	env["SVC_FREEZE"] = "true"
	frozen := startEngine(t, env)
	d := frozen.decide(t, resubmission(id, nil))
	assert.Equal(t, "deny", d.str("decision"))
	assert.Equal(t, "svc.policy/frozen", d.str("rule"))
	assert.Equal(t, "approved", frozen.call(t, "GET", "/v1/holds/"+id, nil).str("status"), "holds survive a restart")
}

func TestPaging250HoldsWithLimit7(t *testing.T) {
	p, _ := holdsEngine(t, nil)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := 0; i < 250; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			raiseHold(t, p, map[string]any{"params.where": fmt.Sprintf("page-%d", i)})
		}()
	}
	wg.Wait()
	seen := map[string]int{}
	var order []time.Time
	cursor := ""
	for pages := 0; pages < 100; pages++ {
		q := url.Values{"limit": {"7"}, "status": {"pending"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		r := p.call(t, "GET", "/v1/holds?"+q.Encode(), nil)
		require.Equal(t, 200, r.Status, "%v", r.Body)
		items, _ := r.Body["items"].([]any)
		assert.EqualValues(t, len(items), r.Body["count"])
		for _, it := range items {
			h := it.(map[string]any)
			seen[h["id"].(string)]++
			created, err := time.Parse(time.RFC3339Nano, h["created_ts"].(string))
			require.NoError(t, err)
			order = append(order, created)
		}
		next, _ := r.Body["next_cursor"].(string)
		if next == "" {
			assert.Nil(t, r.Body["next_cursor"])
			break
		}
		cursor = next
	}
	assert.Len(t, seen, 250)
	for id, n := range seen {
		assert.Equal(t, 1, n, id)
	}
	for i := 1; i < len(order); i++ {
		assert.False(t, order[i].Before(order[i-1]), "holds are listed by created time")
	}
	r := p.call(t, "GET", "/v1/holds?"+url.Values{"cursor": {cursor}, "status": {"approved"}}.Encode(), nil)
	assert.Equal(t, 400, r.Status, "a cursor is valid only for its status filter")
}

func TestHoldsCLI(t *testing.T) {
	p, _ := holdsEngine(t, nil)
	id, _ := raiseHold(t, p, nil)
	cli := func(token string, args ...string) (int, string, string) {
		r := runSvc(t, map[string]string{"SVC_CORE_URL": p.URL, "SVC_CORE_TOKEN": token}, nil, args...)
		return r.code, r.stdout, r.stderr
	}
	code, out, _ := cli("adapter-token", "holds", "list")
	require.Equal(t, 0, code)
	assert.Regexp(t, `ID\s+STATUS\s+RULE\s+AGENT\s+ABILITY\s+ENVIRONMENT\s+COUNT\s+EXPIRES IN`, out)
	assert.Regexp(t, id+`\s+pending\s+svc.policy/irreversible_broad_prod\s+agent-7\s+db/delete_rows\s+production\s+3\s+(3h59m\d+s|4h0m0s)`, out)

	code, out, _ = cli("adapter-token", "holds", "list", "--status", "pending", "-o", "json")
	require.Equal(t, 0, code)
	var page struct {
		Items      []map[string]any `json:"items"`
		Count      int              `json:"count"`
		NextCursor *string          `json:"next_cursor"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &page))
	require.Len(t, page.Items, 1)
	assert.Equal(t, id, page.Items[0]["id"])
	assert.Contains(t, out, `"next_cursor": null`)

	code, out, _ = cli("adapter-token", "holds", "show", id)
	require.Equal(t, 0, code)
	assert.Regexp(t, `params\s+\{"where":"created < 2020"\}`, out, "an approver sees the where clause")
	assert.Regexp(t, `axes\s+reversibility=irreversible blast_radius=broad externality=internal`, out)

	code, _, errOut := cli("tok-alice", "holds", "approve", id)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "actor_is_approver")
	assert.Equal(t, 1, countLines(errOut), "one clear line: %q", errOut)

	code, out, _ = cli("tok-bob", "holds", "approve", id, "--reason", "fine", "-o", "json")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, `"status": "approved"`)
	code, out, _ = cli("adapter-token", "holds", "show", id)
	require.Equal(t, 0, code)
	assert.Regexp(t, `status\s+approved`, out)
	assert.Regexp(t, `decided by\s+human:bob \(verified: true\)`, out)

	code, _, errOut = cli("adapter-token", "holds", "show", "missing")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "404")
	code, _, errOut = cli("tok-bob", "holds", "resolve", id, "--decision", "reject")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "not_resolvable")
	code, _, _ = cli("tok-bob", "holds", "resolve", id, "--decision", "maybe")
	assert.NotEqual(t, 0, code)

	for i := 0; i < 4; i++ {
		raiseHold(t, p, map[string]any{"params.where": fmt.Sprintf("cli-%d", i)})
	}
	code, out, _ = cli("adapter-token", "holds", "list", "--limit", "2", "--all-pages", "-o", "json", "--status", "all")
	require.Equal(t, 0, code)
	require.NoError(t, json.Unmarshal([]byte(out), &page))
	assert.Len(t, page.Items, 5)
	assert.Nil(t, page.NextCursor)

	code, out, _ = cli("adapter-token", "holds", "list")
	require.Equal(t, 0, code)
	assert.Equal(t, 4, strings.Count(out, " pending "), "pending by default: the approved hold is not listed:\n%s", out)
}

// TestHoldsCLIPages: a list cut at --limit says that more exist and how
// to see them, -o json keeps next_cursor, and --cursor lists the next page.
func TestHoldsCLIPages(t *testing.T) {
	p, _ := holdsEngine(t, nil)
	ids := map[string]bool{}
	for i := range 3 { // three actions: a repeated one would reuse its pending hold
		id, _ := raiseHold(t, p, map[string]any{"params.where": fmt.Sprintf("page < %d", i)})
		ids[id] = true
	}
	env := map[string]string{"SVC_CORE_URL": p.URL, "SVC_CORE_TOKEN": "adapter-token"}
	r := runSvc(t, env, nil, "holds", "list", "--limit", "2")
	require.Equal(t, 0, r.code, r.output())
	m := regexp.MustCompile(`more holds exist: the next page is --cursor (\S+);`).FindStringSubmatch(r.stdout)
	require.NotNil(t, m, "the table says more exist:\n%s", r.stdout)

	r = runSvc(t, env, nil, "holds", "list", "--limit", "2", "-o", "json")
	require.Equal(t, 0, r.code, r.output())
	var page, last engine.HoldPage
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &page))
	require.Len(t, page.Items, 2)
	require.NotNil(t, page.NextCursor)
	assert.Equal(t, m[1], *page.NextCursor)

	r = runSvc(t, env, nil, "holds", "list", "--limit", "2", "--cursor", m[1], "-o", "json")
	require.Equal(t, 0, r.code, r.output())
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &last))
	require.Len(t, last.Items, 1)
	assert.Nil(t, last.NextCursor)
	for _, h := range append(page.Items, last.Items...) {
		assert.True(t, ids[h.ID], h.ID)
		delete(ids, h.ID)
	}
	assert.Empty(t, ids, "every hold listed once")
	r = runSvc(t, env, nil, "holds", "list", "--limit", "2", "--cursor", m[1])
	assert.NotContains(t, r.stdout, "more holds exist")
}

// TestHoldsCLIAssertedPrincipal: with SVC_REQUIRE_VERIFIED_APPROVER=false
// the CLI approves as the principal of --principal, recorded unverified;
// a malformed --principal is a usage error.
func TestHoldsCLIAssertedPrincipal(t *testing.T) {
	p, _ := holdsEngine(t, map[string]string{"SVC_REQUIRE_VERIFIED_APPROVER": "false"})
	id, _ := raiseHold(t, p, nil)
	env := map[string]string{"SVC_CORE_URL": p.URL, "SVC_CORE_TOKEN": "adapter-token"}
	r := runSvc(t, env, nil, "holds", "approve", id, "--principal", "carol")
	assert.Equal(t, 64, r.code, r.output())
	assert.Contains(t, r.stderr, "--principal must be type:id")

	r = runSvc(t, env, nil, "holds", "approve", id, "--principal", "human:carol", "-o", "json")
	require.Equal(t, 0, r.code, r.output())
	var h engine.Hold
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &h))
	assert.Equal(t, engine.HoldApproved, h.Status)
	require.NotNil(t, h.DecidedBy)
	assert.Equal(t, engine.Principal{Type: "human", ID: "carol"}, *h.DecidedBy)
	require.NotNil(t, h.DecidedByVerified)
	assert.False(t, *h.DecidedByVerified)
}

// TestHoldsCLIPrintsTheWholeError: the CLI prints every member of the
// engine's error body, the remedy's actions included, and a bare 401 names
// SVC_CORE_TOKEN.
func TestHoldsCLIPrintsTheWholeError(t *testing.T) {
	p, _ := holdsEngine(t, nil)
	id, _ := raiseHold(t, p, nil)
	env := map[string]string{"SVC_CORE_URL": p.URL, "SVC_CORE_TOKEN": "adapter-token"}
	r := runSvc(t, env, nil, "holds", "approve", id)
	assert.Equal(t, 1, r.code, r.output())
	assert.Contains(t, r.stderr, "error=principal_not_verified")
	assert.Contains(t, r.stderr, "remedy:")
	assert.Contains(t, r.stderr, "  - resolve with Authorization: Bearer <a token listed in SVC_RESOLVER_TOKENS>")
	assert.Contains(t, r.stderr, "see docs/holds.md")

	for _, args := range [][]string{{"holds", "list"}, {"freeze", "on"}} {
		r = runSvc(t, map[string]string{"SVC_CORE_URL": p.URL}, nil, args...)
		assert.Equal(t, 1, r.code, r.output())
		assert.Contains(t, r.stderr, "engine answered 401")
		assert.Contains(t, r.stderr, "SVC_CORE_TOKEN is not set: set it to the engine's SVC_AUTH_TOKEN")
		r = runSvc(t, map[string]string{"SVC_CORE_URL": p.URL, "SVC_CORE_TOKEN": "wrong"}, nil, args...)
		assert.Equal(t, 1, r.code, r.output())
		assert.Contains(t, r.stderr, "the engine does not accept SVC_CORE_TOKEN")
	}
}

// TestResolutionPrecedesItsRedemptionInTheAuditLog races many re-submissions
// against each approval: no allow of a hold is ever on record before the
// line of its approval, since the approval is committed with its line.
func TestResolutionPrecedesItsRedemptionInTheAuditLog(t *testing.T) {
	const rounds, resubmitters = 30, 8
	p, env := holdsEngine(t, nil)
	for round := range rounds {
		id, _ := raiseHold(t, p, map[string]any{"agent.session_id": fmt.Sprintf("held-%d", round)})
		var wg sync.WaitGroup
		for i := range resubmitters {
			wg.Go(func() {
				edits := map[string]any{"agent.session_id": fmt.Sprintf("re-%d-%d", round, i)}
				for range 2000 {
					if d := p.decide(t, resubmission(id, edits)); d.str("reason") != "svc_hold_not_approved" {
						return
					}
				}
			})
		}
		require.Equal(t, 200, resolve(t, p, "tok-bob", id, map[string]any{"decision": "approve"}).Status)
		wg.Wait()
	}
	p.stop(t)
	approved, allows := map[any]bool{}, 0
	for i, rec := range auditLines(t, env["SVC_AUDIT_LOG"]) {
		switch {
		case rec["event"] == "hold_resolution" && rec["status"] == "approved":
			approved[rec["hold_id"]] = true
		case rec["event"] == "decision" && rec["verdict"] == "allow":
			allows++
			require.True(t, approved[rec["hold_id"]], "line %d: allow of hold %v before its approval", i, rec["hold_id"])
		}
	}
	assert.Equal(t, rounds, allows)
}

// TestResolutionAuditFailureIsNotApplied: a resolution whose audit line
// cannot be written answers 500 audit_unavailable and leaves the hold
// pending, so a re-submission is still refused as not approved.
func TestResolutionAuditFailureIsNotApplied(t *testing.T) {
	p, env := holdsEngine(t, nil)
	id, _ := raiseHold(t, p, nil)
	path := env["SVC_AUDIT_LOG"]
	require.NoError(t, os.Remove(path))
	require.NoError(t, os.Mkdir(path, 0o700))
	r := resolve(t, p, "tok-bob", id, map[string]any{"decision": "approve"})
	assert.Equal(t, 500, r.Status, "%v", r.Body)
	assert.Equal(t, "audit_unavailable", r.str("error"))
	assert.Equal(t, id, r.str("hold_id"))
	assert.Equal(t, "pending", p.call(t, "GET", "/v1/holds/"+id, nil).str("status"))

	require.NoError(t, os.Remove(path))
	assert.Equal(t, "pending", resubmitVerdict(t, p, id, nil, "svc_hold_not_approved"))
	require.Equal(t, 200, resolve(t, p, "tok-bob", id, map[string]any{"decision": "approve"}).Status)
	assert.Equal(t, "allow", p.decide(t, resubmission(id, nil)).str("decision"))
}

// TestConcurrentResolutionsOneWins: of concurrent approvals of one hold,
// one is applied; the others answer 409 not_resolvable with its status.
func TestConcurrentResolutionsOneWins(t *testing.T) {
	p, _ := holdsEngine(t, nil)
	id, _ := raiseHold(t, p, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[string]int{}
	for range 10 {
		wg.Go(func() {
			r := resolve(t, p, "tok-bob", id, map[string]any{"decision": "approve"})
			mu.Lock()
			defer mu.Unlock()
			counts[fmt.Sprintf("%d/%s/%s", r.Status, r.str("error"), r.str("status"))]++
		})
	}
	wg.Wait()
	assert.Equal(t, map[string]int{"200//approved": 1, "409/not_resolvable/approved": 9}, counts)
}
