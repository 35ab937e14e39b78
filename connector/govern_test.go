package connector

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/connector/tenancy"
	"github.com/svc-dev/svc/engine/envelope"
)

// fakeDecider answers every call with decision and counts the calls. It
// stands in for the engine only to inject faults the real one cannot
// produce on demand; the end-to-end tests in cmd use the real engine.
type fakeDecider struct {
	calls    atomic.Int64
	decision Decision
	err      error
	hold     Hold
}

func (f *fakeDecider) Decide(_ context.Context, env *envelope.Envelope) (Decision, error) {
	f.calls.Add(1)
	if _, err := env.MarshalWire(); err != nil {
		return Decision{}, err
	}
	return f.decision, f.err
}

func (f *fakeDecider) AwaitHold(context.Context, string, time.Duration) (Hold, error) {
	return f.hold, nil
}

// memLedger records rows in memory, or fails.
type memLedger struct {
	rows []Row
	err  error
}

func (m *memLedger) Record(_ context.Context, rows []Row) error {
	if m.err != nil {
		return m.err
	}
	m.rows = append(m.rows, rows...)
	return nil
}

func testTenancy(t testing.TB) *tenancy.Source {
	t.Helper()
	src, err := tenancy.Open("testdata/tenancy.json")
	require.NoError(t, err)
	return src
}

func testGovernor(t *testing.T, d Decider, led Recorder, mode string) *Governor {
	return NewGovernor(GovernorConfig{Mode: mode, Decider: d, Tenancy: testTenancy(t), Ledger: led,
		Counters: &Counters{}, Log: zerolog.Nop()})
}

func opsRequest(calls ...ToolCall) Request {
	return Request{Transport: TransportGuardrailAPI, Model: "gpt-4o", Caller: tenancy.Caller{KeyAlias: "agent-ops-prod"},
		Session: SessionHints{CallID: "c-1"}, ToolCalls: calls}
}

var readCall = ToolCall{ID: "call_1", Name: "crm_get_customer", Arguments: `{"customer_id": "cus_1"}`}

func TestGovernPanicInClassificationFailsClosed(t *testing.T) {
	d := &fakeDecider{decision: Decision{Decision: "allow", Rule: "svc.policy/default_allow", DecisionID: "d1"}}
	led := &memLedger{}
	g := testGovernor(t, d, led, ModeEnforce)
	g.classify = func(*ToolMap, string, string) Classification { panic("boom") }
	res := g.Govern(context.Background(), opsRequest(readCall, readCall))
	require.True(t, res.Blocked())
	for _, o := range res.Outcomes {
		assert.Equal(t, OutcomeFailClosed, o.Outcome)
		assert.Equal(t, RuleFailClosed, o.Refusal.Rule)
	}
	assert.Zero(t, d.calls.Load())
	assert.Len(t, led.rows, 2, "the refusals are on record")
	assert.Equal(t, int64(1), g.counters.InternalErrors.Load(), "the second call is refused without classifying it")
	assert.Contains(t, res.Outcomes[1].Reason, "not put to the engine")
}

func TestGovernPanicInDeciderFailsClosed(t *testing.T) {
	g := testGovernor(t, panicDecider{}, &memLedger{}, ModeEnforce)
	res := g.Govern(context.Background(), opsRequest(readCall))
	require.True(t, res.Blocked())
	assert.Equal(t, OutcomeFailClosed, res.Outcomes[0].Outcome)
}

type panicDecider struct{}

func (panicDecider) Decide(context.Context, *envelope.Envelope) (Decision, error) {
	panic("engine client bug")
}
func (panicDecider) AwaitHold(context.Context, string, time.Duration) (Hold, error) {
	panic("engine client bug")
}

func TestGovernUnmappedNeverAsksTheEngine(t *testing.T) {
	d := &fakeDecider{decision: Decision{Decision: "allow"}}
	g := testGovernor(t, d, &memLedger{}, ModeEnforce)
	for _, c := range []tenancy.Caller{{}, {KeyHash: "sk-1234567890abcdef"}, {KeyAlias: "AGENT-OPS-PROD"},
		{KeyHash: strings.Repeat("0", 64)}} {
		req := opsRequest(readCall)
		req.Caller = c
		res := g.Govern(context.Background(), req)
		require.True(t, res.Blocked())
		assert.Equal(t, ErrTenantUnmapped, res.Outcomes[0].Refusal.Error)
	}
	assert.Zero(t, d.calls.Load())
	assert.Equal(t, int64(4), g.counters.UnmappedTenant.Load())
}

func TestLedgerRowKeepsNoCredential(t *testing.T) {
	led := &memLedger{}
	g := testGovernor(t, &fakeDecider{}, led, ModeEnforce)
	req := opsRequest(readCall)
	req.Caller = tenancy.Caller{KeyHash: "sk-live-0123456789abcdef0123", KeyAlias: "sk-live-0123456789abcdef0123"}
	g.Govern(context.Background(), req)
	require.Len(t, led.rows, 1)
	assert.Nil(t, led.rows[0].KeyAlias)
	assert.NotContains(t, string(mustJSON(t, led.rows[0])), "sk-live")
}

func TestGovernFaults(t *testing.T) {
	cases := []struct {
		name    string
		d       *fakeDecider
		call    ToolCall
		ledger  error
		outcome string
		rule    string
	}{
		{"engine error", &fakeDecider{err: errors.New("engine unreachable")}, readCall, nil, OutcomeFailClosed, RuleFailClosed},
		{"ledger down", &fakeDecider{decision: Decision{Decision: "allow"}}, readCall, errors.New("disk full"), OutcomeFailClosed, RuleFailClosed},
		{"inexact number", &fakeDecider{decision: Decision{Decision: "allow"}},
			ToolCall{ID: "c", Name: "transfer_funds", Arguments: `{"to_account": 9007199254740993}`}, nil, OutcomeDeny, ruleInvalidRequest},
		{"hold rejected", &fakeDecider{decision: Decision{Decision: "require_approval", HoldID: "h1", Rule: "svc.policy/x"},
			hold: Hold{ID: "h1", Status: HoldRejected, DecidedBy: &Principal{"human", "alice"}}}, readCall, nil, OutcomeDeny, "svc.policy/x"},
		{"hold pending", &fakeDecider{decision: Decision{Decision: "require_approval", HoldID: "h1", Rule: "svc.policy/x"},
			hold: Hold{ID: "h1", Status: HoldPending}}, readCall, nil, OutcomeHoldTimeout, "svc.policy/x"},
		{"deny", &fakeDecider{decision: Decision{Decision: "deny", Rule: "svc.policy/y", Reason: "no"}}, readCall, nil, OutcomeDeny, "svc.policy/y"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			led := &memLedger{err: tc.ledger}
			g := testGovernor(t, tc.d, led, ModeEnforce)
			res := g.Govern(context.Background(), opsRequest(tc.call))
			require.True(t, res.Blocked())
			o := res.Outcomes[0]
			assert.Equal(t, tc.outcome, o.Outcome)
			assert.Equal(t, tc.rule, o.Rule)
			assert.Equal(t, StageRefused, o.Refusal.Stage)
			if tc.ledger == nil {
				require.Len(t, led.rows, 1)
				assert.Equal(t, StageRefused, led.rows[0].EnforcementStage)
			}
		})
	}
}

func TestGovernObserveNeverBlocks(t *testing.T) {
	d := &fakeDecider{decision: Decision{Decision: "deny", Rule: "svc.policy/y"}}
	led := &memLedger{}
	g := testGovernor(t, d, led, ModeObserve)
	res := g.Govern(context.Background(), opsRequest(readCall))
	assert.False(t, res.Blocked())
	assert.False(t, res.Outcomes[0].Enforced)
	assert.Equal(t, OutcomeDeny, res.Outcomes[0].Outcome)
	assert.Equal(t, StageAllowed, led.rows[0].EnforcementStage)
	assert.Equal(t, int64(1), g.counters.Blocked.Load())
}

func TestSession(t *testing.T) {
	cases := []struct {
		h       SessionHints
		endUser string
		want    string
	}{
		{SessionHints{SvcSession: "s-1", Header: "h", TraceID: "t", CallID: "c"}, "u", "gateway:acme:s-1"},
		{SessionHints{Header: "h", TraceID: "t"}, "u", "gateway:acme:h"},
		{SessionHints{Header: "[present]", TraceID: "t"}, "u", "gateway:acme:u"},
		{SessionHints{Header: " \u200b ", TraceID: "t"}, "", "gateway:acme:t"},
		{SessionHints{CallID: "c"}, "", "gateway:acme:c"},
		{SessionHints{}, "", "gateway:acme:unknown"},
		{SessionHints{SvcSession: strings.Repeat("x", 300)}, "", "gateway:acme:sha256:" + digest(strings.Repeat("x", 300))},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, Session("acme", tc.h, tc.endUser))
	}
	assert.NotEqual(t, Session("acme", SessionHints{SvcSession: "s"}, ""), Session("other", SessionHints{SvcSession: "s"}, ""))
}

// FuzzGuardrailRequest: whatever the body, the guardrail route answers 200
// with NONE or BLOCKED, and NONE only when no tool call needs a decision
// or every one was allowed.
func FuzzGuardrailRequest(f *testing.F) {
	entries, err := os.ReadDir("../../shared/fixtures/litellm/requests")
	require.NoError(f, err, "the LiteLLM fixtures are read from ../shared beside the clone")
	for _, e := range entries {
		raw, err := os.ReadFile("../../shared/fixtures/litellm/requests/" + e.Name())
		require.NoError(f, err)
		f.Add(raw)
	}
	f.Add([]byte(`{"input_type": "response", "tool_calls": [{"function": {"name": "x", "arguments": "{"}}]}`))
	f.Add([]byte(`{"input_type": "response", "input_type": "request"}`))
	d := &fakeDecider{decision: Decision{Decision: "deny", Rule: "svc.policy/y"}}
	counters := &Counters{}
	src, err := tenancy.Open("testdata/tenancy.json")
	require.NoError(f, err)
	g := NewGovernor(GovernorConfig{Mode: ModeEnforce, Decider: d, Tenancy: src, Ledger: &memLedger{},
		Counters: counters, Log: zerolog.Nop()})
	h := NewServer(ServerConfig{Token: "k", Tenancy: src, Counters: counters, Log: zerolog.Nop(), Governor: g}).Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, GuardrailPath, strings.NewReader(string(body)))
		req.Header.Set("x-api-key", "k")
		w := httptest.NewRecorder()
		before := d.calls.Load()
		h.ServeHTTP(w, req)
		require.Equal(t, 200, w.Code)
		action := w.Body.String()
		require.True(t, strings.HasPrefix(action, `{"action":"NONE"}`) || strings.HasPrefix(action, `{"action":"BLOCKED"`), action)
		if d.calls.Load() > before { // the engine denied every call it saw
			require.Contains(t, action, "BLOCKED")
		}
	})
}

// scriptedDecider denies the tool "deny_me", holds every other tool until
// it is re-submitted with an approval, and answers every hold approved,
// recording the wait each AwaitHold was given.
type scriptedDecider struct {
	waits []time.Duration
}

func (s *scriptedDecider) Decide(_ context.Context, env *envelope.Envelope) (Decision, error) {
	switch {
	case env.Action.Ability == "gateway/deny_me":
		return Decision{Decision: "deny", Rule: "svc.policy/y", Reason: "no", DecisionID: "d-deny"}, nil
	case env.Approval.Present:
		return Decision{Decision: "allow", Rule: "svc.policy/approved_resubmission", DecisionID: "d-redeem"}, nil
	}
	return Decision{Decision: "require_approval", Rule: "svc.policy/x", HoldID: "h1", DecisionID: "d-hold"}, nil
}

func (s *scriptedDecider) AwaitHold(_ context.Context, id string, wait time.Duration) (Hold, error) {
	s.waits = append(s.waits, wait)
	if wait == 0 {
		return Hold{ID: id, Status: HoldPending}, nil
	}
	return Hold{ID: id, Status: HoldApproved}, nil
}

// A denied call beside a held one: path 1 refuses the whole response, so it
// does not wait on the hold; path 2 removes only the denied call, so the held
// call gets the whole hold wait and is released once approved.
func TestGovernHoldWaitBesideADeniedCall(t *testing.T) {
	held := ToolCall{ID: "call_1", Name: "crm_get_customer", Arguments: `{"customer_id": "cus_1"}`}
	denied := ToolCall{ID: "call_2", Name: "deny_me", Arguments: `{}`}
	for _, tc := range []struct {
		transport string
		want      string
		wait      time.Duration
	}{
		{TransportGuardrailAPI, OutcomeHoldTimeout, 0},
		{TransportInProcess, OutcomeAllow, 30 * time.Second},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			d := &scriptedDecider{}
			g := NewGovernor(GovernorConfig{Mode: ModeEnforce, HoldWait: 30 * time.Second, Decider: d,
				Tenancy: testTenancy(t), Ledger: &memLedger{}, Counters: &Counters{}, Log: zerolog.Nop()})
			req := opsRequest(held, denied)
			req.Transport = tc.transport
			res := g.Govern(context.Background(), req)
			require.Len(t, res.Outcomes, 2)
			assert.Equal(t, tc.want, res.Outcomes[0].Outcome)
			assert.Equal(t, tc.want == OutcomeAllow, res.Outcomes[0].ReleasedAfterApproval)
			assert.Equal(t, OutcomeDeny, res.Outcomes[1].Outcome)
			require.Len(t, d.waits, 1)
			assert.InDelta(t, tc.wait, d.waits[0], float64(time.Second))
		})
	}
}

// The obligations of the closed set are honoured and any other refuses the
// call (fail closed), whatever the decision that carries it and on both
// routes: log_params records the envelope's params in the ledger row before
// the answer, notify logs a notice naming the principal for a released call
// only, and an unknown obligation refuses an allow, a hold (not waited on)
// and the allow of an approved re-submission.
func TestGovernObligations(t *testing.T) {
	call := ToolCall{ID: "call_1", Name: "crm_get_customer", Arguments: `{"customer_id": "cus_1"}`}
	allow := func(o ...string) Decision {
		return Decision{Decision: "allow", Rule: "svc.policy/x", DecisionID: "d1", Obligations: o}
	}
	held := func(o ...string) Decision {
		return Decision{Decision: "require_approval", Rule: "svc.policy/x", HoldID: "h1", DecisionID: "d1", Obligations: o}
	}
	for _, transport := range []string{TransportGuardrailAPI, TransportInProcess} {
		for _, tc := range []struct {
			name     string
			decision Decision
			hold     Hold
			outcome  string
			params   bool
			notified bool
		}{
			{"none", allow(), Hold{}, OutcomeAllow, false, false},
			{"log_params", allow("log_params"), Hold{}, OutcomeAllow, true, false},
			{"notify", allow("notify"), Hold{}, OutcomeAllow, false, true},
			{"both", allow("log_params", "notify"), Hold{}, OutcomeAllow, true, true},
			{"unknown", allow("notify", "max_rate"), Hold{}, OutcomeFailClosed, false, false},
			{"unknown case", allow("Notify"), Hold{}, OutcomeFailClosed, false, false},
			{"held notify", held("notify"), Hold{ID: "h1", Status: HoldPending}, OutcomeHoldTimeout, false, false},
			{"held unknown", held("redact"), Hold{ID: "h1", Status: HoldApproved}, OutcomeFailClosed, false, false},
			{"deny", Decision{Decision: "deny", Rule: "svc.policy/y", Obligations: []string{"redact"}}, Hold{}, OutcomeDeny, false, false},
		} {
			t.Run(transport+"/"+tc.name, func(t *testing.T) {
				d := &fakeDecider{decision: tc.decision, hold: tc.hold}
				led := &memLedger{}
				var logs strings.Builder
				g := NewGovernor(GovernorConfig{Mode: ModeEnforce, HoldWait: time.Second, Decider: d, Tenancy: testTenancy(t),
					Ledger: led, Counters: &Counters{}, Log: zerolog.New(&logs)})
				req := opsRequest(call)
				req.Transport = transport
				res := g.Govern(context.Background(), req)
				o := res.Outcomes[0]
				assert.Equal(t, tc.outcome, o.Outcome, o.Reason)
				require.Len(t, led.rows, 1)
				assert.Equal(t, append([]string{}, tc.decision.Obligations...), led.rows[0].Obligations)
				if tc.params {
					assert.JSONEq(t, `{"customer_id": "cus_1"}`, string(led.rows[0].Params))
				} else {
					assert.Nil(t, led.rows[0].Params)
				}
				assert.Equal(t, tc.notified, strings.Contains(logs.String(), `"obligation":"notify"`), logs.String())
				if tc.notified {
					assert.Contains(t, logs.String(), `"principal":"`)
				}
				if tc.outcome == OutcomeFailClosed {
					assert.Equal(t, ErrFailClosed, o.Refusal.Error)
					assert.Contains(t, o.Reason, "obligations the connector does not understand")
					assert.Equal(t, "d1", *o.DecisionID, "the engine's decision stays on record")
					assert.Equal(t, int64(1), d.calls.Load(), "a hold with an unknown obligation is not waited on")
				}
			})
		}
	}
}

// An approved hold's re-submission whose allow carries an unknown
// obligation is refused, not released.
func TestGovernObligationsOfTheReleasingAllow(t *testing.T) {
	d := &resubmitDecider{first: Decision{Decision: "require_approval", Rule: "svc.policy/x", HoldID: "h1"},
		then: Decision{Decision: "allow", Rule: "svc.policy/approved_resubmission", Obligations: []string{"max_rate"}}}
	g := NewGovernor(GovernorConfig{Mode: ModeEnforce, HoldWait: time.Second, Decider: d, Tenancy: testTenancy(t),
		Ledger: &memLedger{}, Counters: &Counters{}, Log: zerolog.Nop()})
	res := g.Govern(context.Background(), opsRequest(readCall))
	o := res.Outcomes[0]
	assert.Equal(t, OutcomeFailClosed, o.Outcome)
	assert.False(t, o.ReleasedAfterApproval)
	assert.Contains(t, o.Reason, "max_rate")
}

// resubmitDecider answers first, then (for a re-submission with an
// approval) then; every hold is approved.
type resubmitDecider struct{ first, then Decision }

func (r *resubmitDecider) Decide(_ context.Context, env *envelope.Envelope) (Decision, error) {
	if env.Approval.Present {
		return r.then, nil
	}
	return r.first, nil
}

func (r *resubmitDecider) AwaitHold(_ context.Context, id string, _ time.Duration) (Hold, error) {
	return Hold{ID: id, Status: HoldApproved}, nil
}

// On path 1 a call allowed beside a refused one does not reach the client
// (the whole answer is refused): it is not notified.
func TestGovernNotifyOnlyWhatIsReleased(t *testing.T) {
	d := &scriptedObligations{}
	var logs strings.Builder
	g := NewGovernor(GovernorConfig{Mode: ModeEnforce, Decider: d, Tenancy: testTenancy(t), Ledger: &memLedger{},
		Counters: &Counters{}, Log: zerolog.New(&logs)})
	req := opsRequest(readCall, ToolCall{ID: "call_2", Name: "deny_me", Arguments: `{}`})
	res := g.Govern(context.Background(), req)
	require.True(t, res.Blocked())
	assert.NotContains(t, logs.String(), `"obligation":"notify"`)
	req.Transport = TransportInProcess
	g.Govern(context.Background(), req)
	assert.Equal(t, 1, strings.Count(logs.String(), `"obligation":"notify"`), logs.String())
}

// scriptedObligations denies "deny_me" and allows anything else with notify.
type scriptedObligations struct{}

func (scriptedObligations) Decide(_ context.Context, env *envelope.Envelope) (Decision, error) {
	if env.Action.Ability == "gateway/deny_me" {
		return Decision{Decision: "deny", Rule: "svc.policy/y"}, nil
	}
	return Decision{Decision: "allow", Rule: "svc.policy/x", Obligations: []string{"notify"}}, nil
}

func (scriptedObligations) AwaitHold(context.Context, string, time.Duration) (Hold, error) {
	return Hold{}, errors.New("no hold")
}

// allowButDecider allows every call but deny_me, which it denies.
type allowButDecider struct{ scriptedDecider }

func (allowButDecider) Decide(_ context.Context, env *envelope.Envelope) (Decision, error) {
	if env.Action.Ability == "gateway/deny_me" {
		return Decision{Decision: "deny", Rule: "svc.policy/y", Reason: "no", DecisionID: "d-deny"}, nil
	}
	return Decision{Decision: "allow", Rule: "svc.policy/default_allow", DecisionID: "d-allow"}, nil
}

// An allowed call beside a denied one: path 1 answers BLOCKED for the
// whole response, so the allowed call's row says it was refused at the
// gateway (what the gateway was told); path 2 releases it, and its row
// says so. The outcome stays the engine's allow on both.
func TestLedgerStageOfAnAllowedCallInARefusedResponse(t *testing.T) {
	allowed := ToolCall{ID: "call_1", Name: "crm_get_customer", Arguments: `{"customer_id": "cus_1"}`}
	denied := ToolCall{ID: "call_2", Name: "deny_me", Arguments: `{}`}
	for transport, want := range map[string]string{TransportGuardrailAPI: StageRefused, TransportInProcess: StageAllowed} {
		t.Run(transport, func(t *testing.T) {
			led := &memLedger{}
			g := NewGovernor(GovernorConfig{Mode: ModeEnforce, Decider: &allowButDecider{}, Tenancy: testTenancy(t),
				Ledger: led, Counters: &Counters{}, Log: zerolog.Nop()})
			req := opsRequest(allowed, denied)
			req.Transport = transport
			res := g.Govern(context.Background(), req)
			require.Len(t, led.rows, 2)
			assert.Equal(t, OutcomeAllow, res.Outcomes[0].Outcome)
			assert.Equal(t, OutcomeAllow, led.rows[0].Outcome)
			assert.Equal(t, want, led.rows[0].EnforcementStage)
			assert.Equal(t, StageRefused, led.rows[1].EnforcementStage)
		})
	}
	t.Run("observe", func(t *testing.T) {
		led := &memLedger{}
		g := NewGovernor(GovernorConfig{Mode: ModeObserve, Decider: &allowButDecider{}, Tenancy: testTenancy(t),
			Ledger: led, Counters: &Counters{}, Log: zerolog.Nop()})
		g.Govern(context.Background(), opsRequest(allowed, denied))
		require.Len(t, led.rows, 2)
		assert.Equal(t, StageAllowed, led.rows[0].EnforcementStage, "observe mode releases every call")
		assert.Equal(t, StageAllowed, led.rows[1].EnforcementStage)
	})
}

// statusDecider holds every call under a hold named after its tool, reads
// each hold's status from statuses, and records the re-submissions.
type statusDecider struct {
	statuses map[string]string
	redeemed []string
}

func (s *statusDecider) Decide(_ context.Context, env *envelope.Envelope) (Decision, error) {
	if env.Approval.Present {
		s.redeemed = append(s.redeemed, env.Approval.HoldID)
		return Decision{Decision: "allow", Rule: "svc.policy/approved_resubmission", DecisionID: "d-redeem"}, nil
	}
	id := "h-" + strings.TrimPrefix(env.Action.Ability, "gateway/")
	return Decision{Decision: "require_approval", Rule: "svc.policy/x", HoldID: id, DecisionID: "d-" + id}, nil
}

func (s *statusDecider) AwaitHold(_ context.Context, id string, _ time.Duration) (Hold, error) {
	return Hold{ID: id, Status: s.statuses[id]}, nil
}

// On path 1 an approved call beside a call still held (or denied) is not
// re-submitted: the response is refused whole, and re-submitting would
// spend the approval for a call never released. Once every hold is
// approved, every call is re-submitted and released. Path 2 re-submits
// each approved call on its own.
func TestGovernKeepsApprovalsOfARefusedResponse(t *testing.T) {
	a := ToolCall{ID: "call_a", Name: "purge_a", Arguments: `{}`}
	b := ToolCall{ID: "call_b", Name: "purge_b", Arguments: `{}`}
	cases := []struct {
		name, transport string
		statuses        map[string]string
		redeemed        []string
		outcomes        []string
	}{
		{"path 1, one still pending", TransportGuardrailAPI, map[string]string{"h-purge_a": HoldApproved, "h-purge_b": HoldPending},
			nil, []string{OutcomeHoldTimeout, OutcomeHoldTimeout}},
		{"path 1, one rejected", TransportGuardrailAPI, map[string]string{"h-purge_a": HoldApproved, "h-purge_b": HoldRejected},
			nil, []string{OutcomeHoldTimeout, OutcomeDeny}},
		{"path 1, both approved", TransportGuardrailAPI, map[string]string{"h-purge_a": HoldApproved, "h-purge_b": HoldApproved},
			[]string{"h-purge_a", "h-purge_b"}, []string{OutcomeAllow, OutcomeAllow}},
		{"path 2, one still pending", TransportInProcess, map[string]string{"h-purge_a": HoldApproved, "h-purge_b": HoldPending},
			[]string{"h-purge_a"}, []string{OutcomeAllow, OutcomeHoldTimeout}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &statusDecider{statuses: tc.statuses}
			led := &memLedger{}
			g := NewGovernor(GovernorConfig{Mode: ModeEnforce, HoldWait: time.Second, Decider: d, Tenancy: testTenancy(t),
				Ledger: led, Counters: &Counters{}, Log: zerolog.Nop()})
			req := opsRequest(a, b)
			req.Transport = tc.transport
			res := g.Govern(context.Background(), req)
			assert.Equal(t, tc.redeemed, d.redeemed)
			require.Len(t, res.Outcomes, 2)
			for i, want := range tc.outcomes {
				assert.Equal(t, want, res.Outcomes[i].Outcome, i)
			}
			if tc.redeemed == nil {
				assert.Contains(t, res.Outcomes[0].Reason, "the approval is kept for a retry")
				assert.Equal(t, "approved", led.rows[0].HoldDecision.Resolution)
				assert.False(t, led.rows[0].ReleasedAfterApproval)
			}
		})
	}
}

// ctxLedger refuses a record whose context has ended, as the gateway
// ledger does.
type ctxLedger struct{ memLedger }

func (l *ctxLedger) Record(ctx context.Context, rows []Row) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return l.memLedger.Record(ctx, rows)
}

// TestGovernRecordsAfterTheGatewayLeft: a request whose context ends (the
// gateway's timeout, a client gone during a hold wait) still has its rows
// recorded.
func TestGovernRecordsAfterTheGatewayLeft(t *testing.T) {
	led := &ctxLedger{}
	g := NewGovernor(GovernorConfig{Mode: ModeEnforce, Decider: &fakeDecider{decision: Decision{Decision: "deny", Rule: "r", DecisionID: "d"}},
		Tenancy: testTenancy(t), Ledger: led, Counters: &Counters{}, Log: zerolog.Nop()})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := g.Govern(ctx, opsRequest(readCall))
	require.Len(t, led.rows, 1)
	assert.Equal(t, OutcomeDeny, res.Outcomes[0].Outcome)
	assert.Equal(t, OutcomeDeny, led.rows[0].Outcome)
}

// Two identical calls of one answer share a hold (the engine reuses it),
// and its approval releases one call: on path 1 neither is re-submitted,
// so the approval is not spent on an answer that is refused anyway; on
// path 2 the first is released and the second refused without asking.
func TestGovernTwinCallsUnderOneHold(t *testing.T) {
	a := ToolCall{ID: "call_a", Name: "purge_a", Arguments: `{}`}
	twin := ToolCall{ID: "call_a2", Name: "purge_a", Arguments: `{}`}
	cases := []struct {
		transport string
		redeemed  []string
		first     string
	}{
		{TransportGuardrailAPI, nil, OutcomeHoldTimeout},
		{TransportInProcess, []string{"h-purge_a"}, OutcomeAllow},
	}
	for _, tc := range cases {
		t.Run(tc.transport, func(t *testing.T) {
			d := &statusDecider{statuses: map[string]string{"h-purge_a": HoldApproved}}
			g := NewGovernor(GovernorConfig{Mode: ModeEnforce, HoldWait: time.Second, Decider: d, Tenancy: testTenancy(t),
				Ledger: &memLedger{}, Counters: &Counters{}, Log: zerolog.Nop()})
			req := opsRequest(a, twin)
			req.Transport = tc.transport
			res := g.Govern(context.Background(), req)
			assert.Equal(t, tc.redeemed, d.redeemed)
			assert.Equal(t, tc.first, res.Outcomes[0].Outcome)
			second := res.Outcomes[1]
			assert.Equal(t, OutcomeDeny, second.Outcome)
			assert.Equal(t, "svc.core/hold_not_redeemable", second.Rule)
			assert.Contains(t, second.Reason, "one approval releases one call")
		})
	}
}

// hungEngine is a loopback engine that accepts requests and never answers;
// it counts them.
func hungEngine(t *testing.T, timeout time.Duration) (*HTTPDecider, *atomic.Int64) {
	t.Helper()
	var asked atomic.Int64
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	return NewHTTPDecider(u, "", true, timeout), &asked
}

// An engine that hangs delays an answer by one decide timeout, whatever
// the number of calls: on path 1 the calls after the first are refused
// without asking; on path 2 they share what is left of the timeout.
func TestGovernBoundsAHungEngine(t *testing.T) {
	const timeout = 400 * time.Millisecond
	calls := make([]ToolCall, 6)
	for i := range calls {
		calls[i] = ToolCall{ID: fmt.Sprintf("call_%d", i), Name: "crm_get_customer", Arguments: `{"customer_id": "c"}`}
	}
	for _, transport := range []string{TransportGuardrailAPI, TransportInProcess} {
		t.Run(transport, func(t *testing.T) {
			d, asked := hungEngine(t, timeout)
			led := &memLedger{}
			g := NewGovernor(GovernorConfig{Mode: ModeEnforce, DecideTimeout: timeout, Decider: d, Tenancy: testTenancy(t),
				Ledger: led, Counters: &Counters{}, Log: zerolog.Nop()})
			req := opsRequest(calls...)
			req.Transport = transport
			start := time.Now()
			res := g.Govern(context.Background(), req)
			elapsed := time.Since(start)
			// Not a latency bound: the engine asked once, not six times
			// (the calls after the timeout never reach it), and the answer
			// well short of six timeouts.
			assert.Less(t, elapsed, 6*timeout, "six calls, one timeout")
			assert.Equal(t, int64(1), asked.Load())
			for _, o := range res.Outcomes {
				assert.Equal(t, OutcomeFailClosed, o.Outcome)
			}
			assert.Len(t, led.rows, len(calls))
			if transport == TransportGuardrailAPI {
				assert.Contains(t, res.Outcomes[5].Reason, "not put to the engine")
			}
		})
	}
}
