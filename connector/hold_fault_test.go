package connector

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

// faultyHolds holds every call under a hold named after its tool, approves
// every hold, and fails where told: the hold read (await), or the
// re-submission (redeem); a read told to block waits for its context.
// A tool named in consumed has its hold spent by another request when it
// is re-submitted.
type faultyHolds struct {
	await, redeem error
	block         bool
	consumed      string
}

func (f *faultyHolds) Decide(_ context.Context, env *envelope.Envelope) (Decision, error) {
	hold := "h-" + env.Action.Ability
	switch {
	case !env.Approval.Present:
		return Decision{Decision: "require_approval", Rule: "svc.policy/x", HoldID: hold, DecisionID: "d-" + hold,
			EnvelopeHash: "eh-" + hold}, nil
	case f.redeem != nil:
		return Decision{}, f.redeem
	case env.Action.Ability == "gateway/"+f.consumed:
		return Decision{Decision: "deny", Rule: engine.RuleHoldNotRedeemable, Reason: "hold consumed", DecisionID: "d-late"}, nil
	}
	return Decision{Decision: "allow", Rule: "svc.policy/approved_resubmission", DecisionID: "d-redeem-" + hold}, nil
}

func (f *faultyHolds) AwaitHold(ctx context.Context, id string, _ time.Duration) (Hold, error) {
	if f.block {
		<-ctx.Done()
		return Hold{}, fmt.Errorf("engine unreachable: %w", ctx.Err())
	}
	if f.await != nil {
		return Hold{}, f.await
	}
	return Hold{ID: id, Status: HoldApproved, DecidedBy: &Principal{Type: "human", ID: "alice"}}, nil
}

// A held call whose hold read or re-submission fails is refused under
// svc.core/fail_closed, and its ledger row and refusal keep the hold and
// the decision that raised it; a request whose client left is refused
// without counting an engine fault.
func TestGovernHoldFaultKeepsTheHold(t *testing.T) {
	unreachable := errors.New("engine unreachable: connection refused")
	for _, tc := range []struct {
		name         string
		d            *faultyHolds
		leave        bool
		reason       string
		internal     int64
		holdDecision bool
	}{
		{"hold read fails", &faultyHolds{await: unreachable}, false, "the engine could not decide", 1, false},
		{"re-submission fails", &faultyHolds{redeem: unreachable}, false, "the engine could not decide", 1, true},
		{"client leaves during the wait", &faultyHolds{block: true}, true, "the gateway's request ended during the wait on hold h-gateway/crm_get_customer", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			led := &memLedger{}
			g := NewGovernor(GovernorConfig{Mode: ModeEnforce, HoldWait: time.Minute, Decider: tc.d, Tenancy: testTenancy(t),
				Ledger: led, Counters: &Counters{}, Log: zerolog.Nop()})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.leave {
				time.AfterFunc(50*time.Millisecond, cancel)
			}
			res := g.Govern(ctx, opsRequest(readCall))
			require.True(t, res.Blocked())
			hold := "h-gateway/crm_get_customer"
			o := res.Outcomes[0]
			assert.Equal(t, OutcomeFailClosed, o.Outcome)
			assert.Contains(t, o.Reason, tc.reason)
			assert.Equal(t, hold, o.Refusal.HoldID, "the refusal names the hold")
			require.Len(t, led.rows, 1)
			r := led.rows[0]
			require.NotNil(t, r.DecisionID)
			assert.Equal(t, "d-"+hold, *r.DecisionID)
			require.NotNil(t, r.Verdict)
			assert.Equal(t, "require_approval", *r.Verdict)
			require.NotNil(t, r.EnvelopeHash)
			assert.Equal(t, "eh-"+hold, *r.EnvelopeHash)
			require.NotNil(t, r.HoldID)
			assert.Equal(t, hold, *r.HoldID)
			assert.Equal(t, tc.holdDecision, r.HoldDecision != nil)
			assert.False(t, r.ReleasedAfterApproval)
			assert.Equal(t, tc.internal, g.counters.InternalErrors.Load())
		})
	}
}

// On path 1 an approved call whose re-submission was allowed is not
// released when a later call's re-submission is refused (its hold spent by
// another request meanwhile): the answer is refused as a whole, and
// neither the outcome nor the ledger row says the call was released.
func TestGovernWithheldAnswerReleasesNothing(t *testing.T) {
	led := &memLedger{}
	g := NewGovernor(GovernorConfig{Mode: ModeEnforce, HoldWait: time.Minute, Decider: &faultyHolds{consumed: "billing_void"},
		Tenancy: testTenancy(t), Ledger: led, Counters: &Counters{}, Log: zerolog.Nop()})
	res := g.Govern(context.Background(), opsRequest(readCall, ToolCall{ID: "call_2", Name: "billing_void", Arguments: `{}`}))
	require.True(t, res.Blocked())
	assert.Equal(t, OutcomeAllow, res.Outcomes[0].Outcome, "the first re-submission was allowed")
	assert.Equal(t, OutcomeDeny, res.Outcomes[1].Outcome)
	assert.Equal(t, "h-gateway/billing_void", res.Outcomes[1].Refusal.HoldID, "the refusal names the hold it could not redeem")
	require.Len(t, led.rows, 2)
	for i, r := range led.rows {
		assert.Equal(t, StageRefused, r.EnforcementStage)
		assert.False(t, r.ReleasedAfterApproval, "row %d", i)
		assert.False(t, res.Outcomes[i].ReleasedAfterApproval, "outcome %d", i)
	}
}

// A tool name, call id and model name longer than MaxRecorded are kept in
// the ledger row and the envelope's context as their first bytes and the
// digest of the whole: a model's answer cannot grow the ledger or the log
// by a megabyte a call.
func TestGovernBoundsWhatItRecords(t *testing.T) {
	long := strings.Repeat("é", 1<<19) // 1 MiB, two bytes a character
	d := &captureDecider{}
	led := &memLedger{}
	g := testGovernor(t, d, led, ModeEnforce)
	req := opsRequest(ToolCall{ID: "call_" + long, Name: "get_" + long, Arguments: `{}`})
	req.Model, req.Session.CallID = "m-"+long, "c-"+long
	g.Govern(context.Background(), req)
	require.Len(t, led.rows, 1)
	r := led.rows[0]
	for _, v := range []string{r.Tool, r.ToolCallID, r.Model, r.GatewayCallID, d.env.Context["tool"].(string),
		d.env.Context["tool_call_id"].(string), d.env.Context["model"].(string), d.env.Context["gateway_call_id"].(string)} {
		assert.LessOrEqual(t, len(v), MaxRecorded, v[:20])
		assert.True(t, utf8.ValidString(v))
		assert.Contains(t, v, "…sha256:")
	}
	assert.True(t, strings.HasPrefix(r.Tool, "get_éé"))
	assert.NotEqual(t, Bounded("get_"+long), Bounded("get_"+long+"x"), "two long values stay apart")
	assert.Equal(t, "crm_get_customer", Bounded("crm_get_customer"))
}

// captureDecider allows every call and keeps the last envelope it was sent.
type captureDecider struct{ env *envelope.Envelope }

func (c *captureDecider) Decide(_ context.Context, env *envelope.Envelope) (Decision, error) {
	c.env = env
	return Decision{Decision: "allow", Rule: "svc.policy/default_allow", DecisionID: "d1"}, nil
}

func (c *captureDecider) AwaitHold(context.Context, string, time.Duration) (Hold, error) {
	return Hold{}, errors.New("no hold")
}
