package connector

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/svc-dev/svc/connector/tenancy"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

// Modes of the connector (SVC_MODE).
const (
	ModeEnforce = "enforce"
	ModeObserve = "observe"
)

// Tenancy is the tenancy map in force; *tenancy.Source implements it.
type Tenancy interface {
	Map() *tenancy.Map
	Status() tenancy.Status
}

// Recorder writes ledger rows durably; the answer waits for it.
type Recorder interface {
	Record(ctx context.Context, rows []Row) error
}

// Observer is told of each tool call's outcome and latency, and of each
// answered request (the Prometheus metrics).
type Observer interface {
	ToolCall(outcome string, latency time.Duration)
	Answered(route string, latency time.Duration)
}

// Governor decides on the tool calls of gateway requests. It is safe for
// concurrent use.
type Governor struct {
	mode     string
	holdWait time.Duration
	timeout  time.Duration
	decider  Decider
	tenancy  Tenancy
	tools    *ToolMap
	ledger   Recorder
	counters *Counters
	observer Observer
	log      zerolog.Logger
	now      func() time.Time
	classify func(tm *ToolMap, name, arguments string) Classification
}

// GovernorConfig is what a Governor needs.
type GovernorConfig struct {
	Mode     string
	HoldWait time.Duration
	// DecideTimeout bounds the engine's answers to one request together
	// (SVC_CLIENT_TIMEOUT): the first decisions of all its calls, then the
	// re-submissions of the approved ones. 0 is DefaultDecideTimeout.
	DecideTimeout time.Duration
	Decider       Decider
	Tenancy       Tenancy
	Tools         *ToolMap
	Ledger        Recorder
	Counters      *Counters
	Observer      Observer // nil: none
	Log           zerolog.Logger
}

// DefaultDecideTimeout is SVC_CLIENT_TIMEOUT's default.
const DefaultDecideTimeout = 30 * time.Second

// NewGovernor returns a Governor.
func NewGovernor(c GovernorConfig) *Governor {
	timeout := c.DecideTimeout
	if timeout <= 0 {
		timeout = DefaultDecideTimeout
	}
	return &Governor{mode: c.Mode, holdWait: c.HoldWait, timeout: timeout, decider: c.Decider, tenancy: c.Tenancy, tools: c.Tools,
		ledger: c.Ledger, counters: c.Counters, observer: c.Observer, log: c.Log, now: time.Now, classify: Classify}
}

// call is one tool call on its way through Govern.
type call struct {
	tc      ToolCall
	env     *envelope.Envelope
	out     Outcome
	hold    string
	hd      *HoldDecision // the hold's resolution, once read
	started time.Time
}

// Govern decides on every tool call of req, in order, and records one
// ledger row per call before it returns. Each call is decided first, then
// the holds are waited on, all within one hold wait (see awaitHolds).
// Whatever fails — a panic included — refuses under svc.core/fail_closed;
// nothing is let through unjudged. An answer takes at most the hold wait
// and twice the decide timeout, whatever the number of calls (MaxAnswer).
func (g *Governor) Govern(ctx context.Context, req Request) (res Result) {
	g.counters.add(&g.counters.ResponsesSeen, 1)
	if len(req.ToolCalls) == 0 {
		return Result{Outcomes: []Outcome{}} // nothing to govern: the engine is not asked
	}
	calls := make([]*call, len(req.ToolCalls))
	for i, tc := range req.ToolCalls {
		calls[i] = &call{tc: tc, started: g.now()}
	}
	defer func() {
		if r := recover(); r != nil {
			g.log.Error().Str("panic", fmt.Sprint(r)).Str("stack", string(debug.Stack())).Msg("connector fault; refused (fail closed)")
			g.counters.add(&g.counters.InternalErrors, 1)
			for _, c := range calls {
				c.out = g.failClosed(c.tc, "connector fault")
			}
			res = g.finish(ctx, req, calls, nil, "")
		}
	}()
	b, ok := g.tenancy.Map().Bind(req.Caller)
	if !ok {
		g.counters.add(&g.counters.UnmappedTenant, 1)
		for _, c := range calls {
			c.out = g.refuse(c.tc, OutcomeUnmapped, ErrTenantUnmapped, RuleTenantUnmapped,
				"the gateway caller is bound to no org by the tenancy map (key_hash, key_alias, team_id)", "")
		}
		return g.finish(ctx, req, calls, nil, "")
	}
	session := Session(b.Tenant.Org, req.Session, req.EndUser)
	bounded, cancel := context.WithTimeout(ctx, MaxAnswer(g.waitFor(req), g.timeout))
	defer cancel()
	g.decideAll(bounded, req, b.Tenant, session, calls)
	g.awaitHolds(bounded, req, calls)
	return g.finish(ctx, req, calls, b.Tenant, session)
}

// MaxAnswer is the longest the engine's side of an answer may take with a
// hold wait of wait and a decide timeout of timeout (SVC_CLIENT_TIMEOUT):
// the first decisions within one timeout, the hold wait, then the hold
// reads and re-submissions within another.
func MaxAnswer(wait, timeout time.Duration) time.Duration {
	return wait + 2*timeout
}

// decideAll asks the engine about each call in order, all within one
// decide timeout, so that a slow or hung engine delays the answer by that
// much whatever the number of calls. On path 1, where a refusal refuses
// the whole answer, the calls after one the engine could not decide are
// refused without asking it.
func (g *Governor) decideAll(ctx context.Context, req Request, t *tenancy.Tenant, session string, calls []*call) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	faulted := false
	for _, c := range calls {
		if faulted && req.Transport != TransportInProcess {
			c.out = g.failClosed(c.tc, "not put to the engine: it could not decide an earlier call of this response")
			continue
		}
		g.decideOne(ctx, req, t, session, c)
		faulted = faulted || c.out.Outcome == OutcomeFailClosed
	}
}

// decideOne classifies a call and asks the engine once.
func (g *Governor) decideOne(ctx context.Context, req Request, t *tenancy.Tenant, session string, c *call) {
	defer func() {
		if r := recover(); r != nil {
			g.log.Error().Str("panic", fmt.Sprint(r)).Str("tool", Bounded(c.tc.Name)).Str("stack", string(debug.Stack())).
				Msg("connector fault on a tool call; refused (fail closed)")
			g.counters.add(&g.counters.InternalErrors, 1)
			c.out = g.failClosed(c.tc, "connector fault")
		}
	}()
	cl := g.classify(g.tools, c.tc.Name, c.tc.Arguments)
	c.env = g.envelope(req, t, session, c.tc, cl)
	c.out.classifiedBy = cl.By
	d, err := g.decider.Decide(ctx, c.env)
	if err != nil {
		g.decideFault(ctx, c, err)
		return
	}
	c.out = g.fromDecision(c.tc, d)
	if c.out.Outcome == OutcomeHoldTimeout { // a hold carrying an obligation the connector cannot honour is not waited on
		c.hold = d.HoldID
	}
	c.out.classifiedBy = cl.By
}

// envelope builds the Action Envelope of a classified call.
func (g *Governor) envelope(req Request, t *tenancy.Tenant, session string, tc ToolCall, cl Classification) *envelope.Envelope {
	model := req.Model
	if model == "" {
		model = "unknown"
	}
	ctx := map[string]any{"model": Bounded(req.Model), "tool": Bounded(tc.Name), "tool_call_id": Bounded(tc.ID),
		"classified_by": cl.By, "transport": req.Transport}
	if req.Session.CallID != "" {
		ctx["gateway_call_id"] = Bounded(req.Session.CallID)
	}
	return &envelope.Envelope{
		Agent:     envelope.Agent{ID: "gateway:" + t.Org + "/" + model, OnBehalfOf: t.Principal, SessionID: session},
		Action:    envelope.Action{Namespace: "gateway", Verb: cl.Verb, Ability: "gateway/" + cl.Tool},
		Target:    envelope.Target{Kind: cl.Kind, Ref: cl.Ref, Environment: riskierEnv(envelope.CanonicalEnvironment(t.Environment), cl.Env)},
		Params:    cl.Params,
		Magnitude: envelope.Magnitude{Count: max(cl.Count, 1)},
		Axes:      cl.Axes,
		Context:   ctx,
		Mode:      g.mode,
	}
}

// awaitHolds waits on the holds of the calls, all within one hold wait,
// then re-submits each approved call; a hold still pending is refused
// naming it. On path 1 a refusal refuses the whole response, so once any
// call is refused nothing more is waited for, and no approved call is
// re-submitted: the re-submission would spend its approval (and charge
// its budget) for a call the gateway is not given, and a retry of the
// response could then never pass with every call approved. On path 2 each
// call is kept or removed on its own, so every hold gets the whole wait
// and every approved call is re-submitted.
func (g *Governor) awaitHolds(ctx context.Context, req Request, calls []*call) {
	wait := g.waitFor(req)
	whole := req.Transport != TransportInProcess
	for _, c := range calls {
		if whole && c.hold == "" && c.out.Outcome != OutcomeAllow {
			wait = 0 // the response is refused anyway: waiting would only delay the refusal
		}
	}
	deadline := g.now().Add(wait)
	var approved []*call
	for _, c := range calls {
		if c.hold == "" {
			continue
		}
		if g.readHold(ctx, c, max(deadline.Sub(g.now()), 0)) {
			approved = append(approved, c)
		} else if whole {
			deadline = g.now()
		}
	}
	refused := slices.ContainsFunc(calls, func(c *call) bool {
		return !slices.Contains(approved, c) && c.out.Outcome != OutcomeAllow
	})
	twins := twinsOf(approved)
	refused = refused || len(twins) > 0
	for _, c := range approved {
		switch {
		case twins[c]:
			g.refuseTwin(c)
		case whole && refused:
			g.keepApproval(c)
		default:
			g.redeem(ctx, c)
			refused = refused || c.out.Outcome != OutcomeAllow // path 1: the approvals after it are kept
		}
	}
}

// twinsOf are the approved calls under the same hold as an earlier one:
// identical actions of one answer share a hold, whose approval releases
// one call only.
func twinsOf(approved []*call) map[*call]bool {
	twins := map[*call]bool{}
	for i, c := range approved {
		if slices.ContainsFunc(approved[:i], func(p *call) bool { return p.hold == c.hold }) {
			twins[c] = true
		}
	}
	return twins
}

// refuseTwin refuses a call approved under the same hold as an earlier call
// of its answer, without re-submitting it: the engine would refuse a
// second redemption, and on path 1 re-submitting the first call would
// spend the approval on an answer that is refused.
func (g *Governor) refuseTwin(c *call) {
	prev := c.out
	c.out = g.refuse(c.tc, OutcomeDeny, ErrDenied, engine.RuleHoldNotRedeemable, fmt.Sprintf(
		"hold %s approves one call, and an earlier call of this response is the same action under it: "+
			"one approval releases one call", c.hold), c.hold)
	g.settleHold(c, prev)
}

// waitFor is the hold wait of req: the connector's, or the shorter one the
// request asks for; none in observe mode.
func (g *Governor) waitFor(req Request) time.Duration {
	if g.mode == ModeObserve {
		return 0
	}
	if req.HoldWait != nil {
		return min(g.holdWait, max(*req.HoldWait, 0))
	}
	return g.holdWait
}

// readHold reads a call's hold, waiting up to wait, and reports whether it
// is approved; a hold that is not refuses the call: still pending, naming
// it; rejected or expired, denied.
func (g *Governor) readHold(ctx context.Context, c *call, wait time.Duration) bool {
	prev := c.out
	h, err := g.decider.AwaitHold(ctx, c.hold, wait)
	if err != nil {
		g.holdFault(ctx, c, prev, err)
		return false
	}
	c.hd = holdDecision(h)
	switch h.Status {
	case HoldApproved:
		return true
	case HoldPending:
		c.out = g.refuse(c.tc, OutcomeHoldTimeout, ErrHoldTimeout, c.out.Rule,
			fmt.Sprintf("awaiting approval: hold %s is still pending; retry the request once a human approved it", c.hold), c.hold)
	default:
		c.out = g.refuse(c.tc, OutcomeDeny, ErrDenied, or(h.Rule, c.out.Rule),
			fmt.Sprintf("hold %s is %s; the call is refused", c.hold, h.Status), c.hold)
	}
	g.settleHold(c, prev)
	return false
}

// redeem re-submits an approved call with its approval.
func (g *Governor) redeem(ctx context.Context, c *call) {
	prev := c.out
	c.env.Approval = envelope.Approval{Present: true, HoldID: c.hold}
	d, err := g.decider.Decide(ctx, c.env)
	if err != nil {
		g.holdFault(ctx, c, prev, err)
		return
	}
	c.out = g.fromDecision(c.tc, d)
	c.out.ReleasedAfterApproval = c.out.Outcome == OutcomeAllow
	g.settleHold(c, prev)
}

// keepApproval refuses an approved call of a path-1 response that another
// call refuses, without re-submitting it: its approval stays unspent for a
// retry of the response.
func (g *Governor) keepApproval(c *call) {
	prev := c.out
	c.out = g.refuse(c.tc, OutcomeHoldTimeout, ErrHoldTimeout, c.out.Rule, fmt.Sprintf(
		"hold %s is approved, but another call of this response is refused and none is released; "+
			"the approval is kept for a retry of the response", c.hold), c.hold)
	g.settleHold(c, prev)
}

// settleHold completes the outcome of a held call: its hold (which its
// refusal, if any, names), the hold's resolution and, when no
// re-submission was decided, the record of the decision that raised the
// hold (prev).
func (g *Governor) settleHold(c *call, prev Outcome) {
	c.out.HoldID, c.out.holdDecision, c.out.classifiedBy = &c.hold, c.hd, prev.classifiedBy
	if c.out.Refusal != nil {
		c.out.Refusal.HoldID = c.hold
	}
	if c.out.DecisionID == nil {
		c.out.DecisionID, c.out.verdict, c.out.envelopeHash, c.out.obligations = prev.DecisionID, prev.verdict, prev.envelopeHash, prev.obligations
	}
}

func holdDecision(h Hold) *HoldDecision {
	if h.DecidedBy == nil && h.Status == HoldPending {
		return nil
	}
	return &HoldDecision{DecidedBy: h.DecidedBy, Resolution: h.Status, Verified: h.Verified != nil && *h.Verified}
}

// fromDecision is the outcome of an engine decision. An allow or a hold
// carrying an obligation outside the closed set is refused: the connector
// cannot honour it (fail closed, docs/connector.md, "Obligations").
func (g *Governor) fromDecision(tc ToolCall, d Decision) Outcome {
	var o Outcome
	unknown := engine.UnknownObligations(d.Obligations)
	switch {
	case d.Decision != "deny" && len(unknown) > 0:
		g.log.Error().Strs("obligations", unknown).Str("rule", d.Rule).Str("tool", Bounded(tc.Name)).
			Msg("engine decision carries obligations the connector does not understand; tool call refused (fail closed)")
		o = g.failClosed(tc, fmt.Sprintf("the engine's %s under %s carries obligations the connector does not understand: %s",
			d.Decision, d.Rule, strings.Join(unknown, ", ")))
	case d.Decision == "allow":
		o = Outcome{ToolCallID: tc.ID, Tool: tc.Name, Outcome: OutcomeAllow, Rule: d.Rule, Reason: d.Reason, Enforced: g.mode != ModeObserve}
	case d.Decision == "require_approval":
		o = g.refuse(tc, OutcomeHoldTimeout, ErrHoldTimeout, d.Rule,
			fmt.Sprintf("%s; approval required: hold %s awaits a human decision, retry the request once it is approved", d.Reason, d.HoldID), d.HoldID)
	default:
		reason := d.Reason
		if d.Detail != "" {
			reason += ": " + d.Detail
		}
		if d.Field != "" {
			reason = fmt.Sprintf("the engine refused the envelope: %s %s", d.Field, d.Reason)
		}
		o = g.refuse(tc, OutcomeDeny, ErrDenied, d.Rule, reason, "")
	}
	o.verdict, o.envelopeHash, o.obligations = d.Decision, d.EnvelopeHash, d.Obligations
	if d.DecisionID != "" {
		id := d.DecisionID
		o.DecisionID = &id
	}
	if d.HoldID != "" {
		id := d.HoldID
		o.HoldID = &id
	}
	return o
}

// decideFault refuses a call that could not be decided: an envelope the
// engine would refuse (an argument holding a number a double cannot hold,
// a string too long) is denied naming the field; any other fault fails
// closed.
func (g *Governor) decideFault(ctx context.Context, c *call, err error) {
	var inv *envelope.InvalidEnvelope
	if !errors.As(err, &inv) {
		g.engineFault(ctx, c, err)
		return
	}
	by := c.out.classifiedBy
	c.out = g.refuse(c.tc, OutcomeDeny, ErrDenied, ruleInvalidRequest,
		fmt.Sprintf("the tool call cannot be put to the engine: %s %s", inv.Field, inv.Reason), "")
	c.out.classifiedBy = by
}

// holdFault refuses a held call whose hold could not be read or whose
// re-submission got no answer, keeping the record of the decision that
// raised the hold (prev): its decision id, verdict and envelope hash, and
// the hold.
func (g *Governor) holdFault(ctx context.Context, c *call, prev Outcome, err error) {
	g.engineFault(ctx, c, err)
	g.settleHold(c, prev)
}

// engineFault refuses a call the engine could not decide. When the
// gateway's request ended first (its client gone, its own timeout), that
// is the cause the call is refused under, and no fault of the engine's:
// before the engine answered, or, for a held call, during the wait on its
// hold or its re-submission.
func (g *Governor) engineFault(ctx context.Context, c *call, err error) {
	by := c.out.classifiedBy
	if errors.Is(ctx.Err(), context.Canceled) {
		g.log.Warn().Err(err).Str("tool", Bounded(c.tc.Name)).Str("hold_id", c.hold).
			Msg("the gateway's request ended before the engine answered; tool call refused (fail closed)")
		reason := "the gateway's request ended before the engine answered"
		if c.hold != "" {
			reason = "the gateway's request ended during the wait on hold " + c.hold + " or its re-submission"
		}
		c.out = g.failClosed(c.tc, reason)
		c.out.classifiedBy = by
		return
	}
	g.log.Error().Err(err).Str("tool", Bounded(c.tc.Name)).Str("hold_id", c.hold).Msg("engine fault; tool call refused (fail closed)")
	g.counters.add(&g.counters.InternalErrors, 1)
	c.out = g.failClosed(c.tc, "the engine could not decide: "+err.Error())
	var ue *UnreachableError
	if errors.As(err, &ue) {
		// The refusal reaches the gateway's client: not the engine's
		// address. The ledger row and the log keep it.
		c.out.Refusal.Reason = "the engine could not decide: " + ue.Public() + "; refused (fail closed)"
	}
	c.out.classifiedBy = by
}

func (g *Governor) failClosed(tc ToolCall, reason string) Outcome {
	return g.refuse(tc, OutcomeFailClosed, ErrFailClosed, RuleFailClosed, reason+"; refused (fail closed)", "")
}

// refuse is a refused outcome with its refusal entry.
func (g *Governor) refuse(tc ToolCall, outcome, code, rule, reason, holdID string) Outcome {
	o := Outcome{ToolCallID: tc.ID, Tool: tc.Name, Outcome: outcome, Rule: rule, Reason: reason, Enforced: g.mode != ModeObserve,
		Refusal: &Refusal{Error: code, Rule: rule, Reason: reason, ToolCallID: tc.ID, Tool: tc.Name, Stage: StageRefused, HoldID: holdID}}
	if holdID != "" {
		o.HoldID = &holdID
	}
	return o
}

// finish records the rows and builds the result. A ledger that cannot
// record refuses every call: an unrecorded answer is not given.
func (g *Governor) finish(ctx context.Context, req Request, calls []*call, t *tenancy.Tenant, session string) Result {
	rows := make([]Row, len(calls))
	for i, c := range calls {
		var err error
		if rows[i], err = g.row(req, c, t, session); err != nil {
			g.log.Error().Err(err).Str("tool", Bounded(c.tc.Name)).Msg("params of a log_params obligation unrecordable; tool call refused (fail closed)")
			c.out = g.failClosed(c.tc, "the params a log_params obligation asks for could not be recorded")
			rows[i], _ = g.row(req, c, t, session) // no obligation left: cannot fail
		}
	}
	if withheldWhole(req, calls) {
		for i, c := range calls { // the gateway was told BLOCKED for every call: none was released
			rows[i].EnforcementStage, rows[i].ReleasedAfterApproval = StageRefused, false
			c.out.ReleasedAfterApproval = false
		}
	}
	if len(rows) > 0 {
		// A gateway that gave up on the request (its timeout, a client gone
		// during a hold wait) ends ctx; the rows are recorded all the same.
		if err := g.ledger.Record(context.WithoutCancel(ctx), rows); err != nil {
			g.log.Error().Err(err).Msg("gateway ledger unavailable; every call of the request refused (fail closed)")
			g.counters.add(&g.counters.InternalErrors, 1)
			for _, c := range calls {
				c.out = g.failClosed(c.tc, "the gateway ledger could not record the decision")
			}
		}
	}
	res := Result{Outcomes: make([]Outcome, len(calls))}
	var refused []Refusal
	for i, c := range calls {
		res.Outcomes[i] = c.out
		g.counters.count(c.out)
		if g.observer != nil {
			g.observer.ToolCall(c.out.Outcome, g.now().Sub(c.started))
		}
		if c.out.Refusal != nil {
			refused = append(refused, *c.out.Refusal)
		}
	}
	if len(refused) > 0 {
		res.RefusalPayload = &RefusalPayload{Svc: RefusalList{Refused: refused, Version: 1}}
	}
	withheld := withheldWhole(req, calls)
	for i, c := range calls {
		if slices.Contains(c.out.obligations, engine.ObligationNotify) && released(withheld, &c.out) {
			g.notify(rows[i], t)
		}
	}
	return res
}

// withheldWhole reports whether the answer refuses every call of req: on
// path 1, where a response is BLOCKED as a whole, when any call is refused
// and enforced.
func withheldWhole(req Request, calls []*call) bool {
	if req.Transport == TransportInProcess {
		return false
	}
	return slices.ContainsFunc(calls, func(c *call) bool { return c.out.Enforced && c.out.Refused() })
}

// released reports whether a call reaches the client: every call in
// observe mode; none when the answer is refused as a whole (withheld,
// withheldWhole); else an allowed call.
func released(withheld bool, o *Outcome) bool {
	switch {
	case !o.Enforced:
		return true
	case withheld:
		return false
	}
	return o.Outcome == OutcomeAllow
}

// notify honours the notify obligation of a released call: one structured
// log line, "obligation":"notify", naming the principal the agent acts for,
// for the operator's log pipeline to route to the principal or a channel
// (docs/connector.md, "Obligations"). The ledger row names the obligation
// too.
func (g *Governor) notify(r Row, t *tenancy.Tenant) {
	ev := g.log.Warn().Str("obligation", engine.ObligationNotify).Str("tool", r.Tool).Str("tool_call_id", r.ToolCallID).
		Str("rule", r.Rule).Str("transport", r.Transport).Str("model", r.Model)
	if t != nil {
		ev = ev.Str("principal", t.Principal).Str("org", t.Org)
	}
	if r.Session != nil {
		ev = ev.Str("session", *r.Session)
	}
	if r.DecisionID != nil {
		ev = ev.Str("decision_id", *r.DecisionID)
	}
	ev.Msg("svc notify: a tool call under a notify obligation was released")
}
