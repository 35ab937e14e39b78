package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/svc-dev/svc/engine/envelope"
)

// Request is one decide call: the canonical envelope and what is known of
// the caller.
type Request struct {
	Envelope *envelope.Envelope
	Gate     string    // gate of a portal-issued credential, "" otherwise
	Received time.Time // when the request arrived, for the latency figure
}

// fault is a failure in the decision path; it always becomes deny.
type fault struct {
	rule   string
	reason string
	err    error
}

// Error names the rule, the reason and the cause of the fault.
func (f *fault) Error() string { return fmt.Sprintf("%s: %s: %v", f.rule, f.reason, f.err) }

// Unwrap returns the cause.
func (f *fault) Unwrap() error { return f.err }

func internalFault(reason string, err error) *fault {
	return &fault{rule: RuleInternalError, reason: reason, err: err}
}

// holdCreationFault is the fault of a require_approval whose hold could not
// be made or stored.
func holdCreationFault(err error) *fault {
	return &fault{rule: RuleHoldCreationFailed, reason: "hold could not be persisted", err: err}
}

// outcome is the working state of one decision.
type outcome struct {
	Decision
	created  *Hold   // hold created by this decision, stored by its commit
	redeemed *Hold   // hold consumed by this decision, as its commit leaves it
	charge   *Charge // charge of an allow, committed with its audit record
	// policy is the policy's own verdict and input the document it was
	// asked about, for the audit record (replay); nil when the decision
	// failed before the policy answered.
	policy *Verdict
	input  json.RawMessage
}

// Decide runs the pipeline for one envelope and returns the decision and
// its HTTP status: 200, or 500 with a deny when the decision path failed.
// The decision is on record (audit, and the charge of an allow) before
// Decide returns. The locks of its session, agent and principal are held
// from reading their totals until that record is committed, so no
// concurrent decision of any of them can read totals that miss a charge
// already granted.
func (e *Engine) Decide(ctx context.Context, req Request) (Decision, int) {
	env := req.Envelope
	if req.Received.IsZero() {
		req.Received = time.Now()
	}
	out := &outcome{Decision: Decision{
		DecisionID: NewID(), Obligations: []string{},
		Verb: env.Action.Verb, RawVerb: env.Action.RawVerb,
		Environment: env.Target.Environment, RawEnvironment: env.Target.RawEnvironment,
	}}
	ev, status := e.settle(ctx, req, out)
	e.deps.Observer.Decided(out.Decision.Decision, out.Rule, time.Since(req.Received))
	e.deps.Publisher.Publish(Event{Type: EventDecision, Body: ev})
	e.publishHoldEvents(out)
	return out.Decision, status
}

// settle decides and puts the decision on record under the session's lock.
// The hold a decision creates or consumes is written by the same commit as
// its record; when that write fails (or a concurrent re-submission consumed
// the hold first) the decision becomes a deny, which is committed instead.
//
// The freeze lock is taken after the session's, so a freeze change waits
// only for the decisions being made, not for those queued behind a busy
// session. It cannot deadlock: a decision that holds the freeze lock
// already has its session's and waits for nothing else.
//
// A decision gets its verdict by its deadline (Config.Deadline after its
// arrival), waiting for its session's lock included: one that is still
// waiting for the lock then, or still evaluating, is denied. Its record is
// committed after the deadline all the same.
func (e *Engine) settle(ctx context.Context, req Request, out *outcome) (DecisionEvent, int) {
	deadline := e.deadline(req)
	release, err := e.prepare(ctx, req, out, deadline)
	if err != nil {
		return e.conclude(ctx, req, out, e.failClosed(out, err))
	}
	defer release()
	e.freeze.RLock()
	defer e.freeze.RUnlock()
	status := http.StatusOK
	if err := e.safeDecide(ctx, req, out, deadline); err != nil {
		status = e.failClosed(out, err)
	}
	return e.conclude(ctx, req, out, status)
}

// deadline is when req must have its verdict, or zero for no bound.
func (e *Engine) deadline(req Request) time.Time {
	if e.cfg.Deadline <= 0 {
		return time.Time{}
	}
	return req.Received.Add(e.cfg.Deadline)
}

// prepare hashes the envelope and takes the locks of its session, agent
// and principal, waiting until deadline at most, and returns their release.
//
// With a shared store (Deps.Subjects) it then takes the same locks across
// replicas, by the same deadline.
func (e *Engine) prepare(ctx context.Context, req Request, out *outcome, deadline time.Time) (func(), error) {
	hash, err := req.Envelope.Hash()
	if err != nil {
		return nil, internalFault("envelope hash failed", err)
	}
	out.EnvelopeHash = hash
	names := budgetKeysOf(req.Envelope).lockNames()
	release, err := e.locks.lockAll(names, deadline)
	if err != nil {
		return nil, internalFault("decision not evaluated in time", err)
	}
	if e.deps.Subjects == nil {
		return release, nil
	}
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	shared, err := e.deps.Subjects.LockSubjects(ctx, names)
	if err != nil {
		release()
		return nil, internalFault("budget subjects could not be locked in the shared store", err)
	}
	return func() { shared(); release() }, nil
}

// conclude commits out, the decision answered with status; a decision whose
// hold write fails is denied and committed instead, and one that cannot be
// committed is denied and recorded best effort (recordDegraded).
func (e *Engine) conclude(ctx context.Context, req Request, out *outcome, status int) (DecisionEvent, int) {
	ev, err := e.commit(ctx, req, out)
	if err != nil && (out.created != nil || out.redeemed != nil) {
		status = e.holdWriteFailed(ctx, out, err)
		ev, err = e.commit(ctx, req, out)
	}
	if err != nil {
		status = e.failClosed(out, internalFault("audit record could not be written", err))
		ev = e.decisionEvent(req.Envelope, req, out)
		e.recordDegraded(ctx, ev, err)
	}
	return ev, status
}

// degradedTimeout bounds the wait for the record of a deny whose commit
// failed.
const degradedTimeout = 2 * time.Second

// DegradedDecisionEvent is the record of a fail-closed deny whose regular
// commit failed, written best effort to whichever sink of the audit log
// still works (Journal.RecordDegraded): the decision event, marked.
type DegradedDecisionEvent struct {
	DecisionEvent
	// Degraded is always true: the record was written outside a commit,
	// and may be missing from the other sink.
	Degraded bool `json:"degraded"`
	// AuditError is why the commit failed; it names the sink that failed.
	AuditError string `json:"audit_error"`
}

// recordDegraded puts the fail-closed deny ev, whose commit failed with
// cause, on record in whichever sink of the audit log still works. It
// cannot change the answer, and waits at most degradedTimeout, even for a
// caller that has gone.
func (e *Engine) recordDegraded(ctx context.Context, ev DecisionEvent, cause error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), degradedTimeout)
	defer cancel()
	rec := DegradedDecisionEvent{DecisionEvent: ev, Degraded: true, AuditError: cause.Error()}
	if err := e.deps.Recorder.RecordDegraded(ctx, EventDecision, rec); err != nil {
		e.logLimit.Event("no audit sink", e.deps.Logger.Error()).Err(err).Str("decision_id", ev.DecisionID).
			Msg("fail-closed deny recorded in no audit sink")
	}
}

// commit puts the decision on record: its audit records, its charge and its
// hold write, in one Journal commit.
func (e *Engine) commit(ctx context.Context, req Request, out *outcome) (DecisionEvent, error) {
	if out.Decision.Decision == Deny {
		out.Obligations = []string{} // a deny has nothing to honour
	}
	ev := e.decisionEvent(req.Envelope, req, out)
	err := e.deps.Recorder.Commit(ctx, Entry{
		Records: append([]AuditRecord{{Kind: EventDecision, Body: auditedDecision(ev, out)}}, e.holdRecords(out)...),
		Charge:  out.charge, Create: out.created, Consume: consumptionOf(out.redeemed),
	})
	return ev, err
}

// consumptionOf is the consumption a commit makes of the hold redeemed (as
// redeem left it: consumed by this decision), or nil.
func consumptionOf(redeemed *Hold) *Consumption {
	if redeemed == nil {
		return nil
	}
	return &Consumption{HoldID: redeemed.ID, DecisionID: redeemed.ConsumedBy, At: *redeemed.ConsumedTS}
}

// holdWriteFailed turns a decision whose hold write failed into a deny: a
// refusal when a concurrent re-submission consumed the hold first (or it
// lapsed meanwhile), else an engine fault; but a require_approval whose
// hold an identical one, created meanwhile, stands in for reuses that.
func (e *Engine) holdWriteFailed(ctx context.Context, out *outcome, err error) int {
	if h := out.redeemed; h != nil && errors.Is(err, ErrConflict) {
		out.HoldID, out.ParentDecisionID = "", ""
		out.redeemed, out.charge = nil, nil
		if err := e.lostRace(ctx, out, h.ID, e.deps.Now()); err != nil {
			return e.failClosed(out, err)
		}
		return http.StatusOK
	}
	if h := out.created; h != nil && errors.Is(err, ErrIdenticalHold) {
		switch reuseErr := e.reuseHold(ctx, out, HoldBinding(h), e.deps.Now()); {
		case errors.Is(reuseErr, ErrNotFound): // the identical hold went as soon as it came
			return e.failClosed(out, holdCreationFault(err))
		case reuseErr != nil:
			return e.failClosed(out, reuseErr)
		}
		return http.StatusOK
	}
	f := internalFault("hold could not be redeemed", err)
	if out.created != nil {
		f = holdCreationFault(err)
	}
	return e.failClosed(out, f)
}

// safeDecide runs decide and turns a panic in any part it calls (an
// evaluator, a store) into a fault, so the deny it becomes is still audited.
func (e *Engine) safeDecide(ctx context.Context, req Request, out *outcome, deadline time.Time) (err error) {
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	defer func() {
		if p := recover(); p != nil {
			err = internalFault("engine fault", fmt.Errorf("panic: %v", p))
		}
	}()
	return e.decide(ctx, req, out)
}

// failClosed turns out into an engine-fault deny and logs the cause, one
// line per rule every LogPeriod at most (logLimit): a fault that lasts (a
// full disk) fails every decision alike.
func (e *Engine) failClosed(out *outcome, err error) int {
	f := &fault{}
	if !errors.As(err, &f) {
		f = internalFault("decision could not complete", err)
	}
	e.logLimit.Event("failed closed "+f.rule, e.deps.Logger.Error()).Err(err).Str("decision_id", out.DecisionID).
		Str("rule", f.rule).Msg("decision failed closed")
	out.Decision.Decision, out.Rule, out.Reason = Deny, f.rule, f.reason+"; denied (fail closed)"
	out.Obligations = []string{}
	out.HoldID, out.ExpiresTS, out.ParentDecisionID, out.HoldReused = "", "", "", false
	out.created, out.redeemed, out.charge = nil, nil, nil
	return http.StatusInternalServerError
}

func (e *Engine) decide(ctx context.Context, req Request, out *outcome) error {
	env := req.Envelope
	now := e.deps.Now()
	v, input, err := e.evaluate(ctx, env, now)
	if err != nil {
		return err
	}
	out.policy, out.input = &v, input
	out.Decision.Decision, out.Rule, out.Reason = v.Decision, v.Rule, v.Reason
	if len(v.Obligations) > 0 {
		out.Obligations = v.Obligations
	}
	if v.Decision == RequireApproval && e.cfg.Terminal(v.Rule) {
		out.Decision.Decision = Deny
		out.Reason = v.Reason + "; denied: rule " + v.Rule + " is terminal, no approval can lift it"
	}
	switch {
	case out.Decision.Decision == Deny:
		return nil // deny wins over everything, an approval included
	case env.Approval.Present:
		return e.redeem(ctx, req, out, now)
	case v.Decision == RequireApproval:
		return e.holdFor(ctx, req, out, now)
	}
	e.charge(env, out, now)
	return nil
}

// evaluate asks the policy about env and returns its verdict and the input
// document it was asked about.
func (e *Engine) evaluate(ctx context.Context, env *envelope.Envelope, now time.Time) (Verdict, json.RawMessage, error) {
	cumulative, err := e.cumulative(ctx, budgetKeysOf(env), now.Add(-e.cfg.Window))
	if err != nil {
		return Verdict{}, nil, internalFault("budget ledger unavailable", err)
	}
	input, err := PolicyInputOf(env, cumulative, e.Frozen())
	if err != nil {
		return Verdict{}, nil, internalFault("policy input could not be built", err)
	}
	start := time.Now()
	v, err := e.deps.Evaluator.Evaluate(ctx, input)
	if err != nil {
		err = internalFault("policy evaluation failed", err)
	} else if !v.Valid() {
		err = internalFault("policy returned an invalid verdict", fmt.Errorf("verdict %+v", v))
	}
	e.deps.Observer.Evaluated(time.Since(start), err)
	if err != nil {
		return Verdict{}, nil, err
	}
	return v, input, nil
}

// holdFor gives a require_approval its hold: the live hold of an identical
// action (same HoldBinding: envelope hash, parameters, actor and gate),
// pending or approved and not consumed, or else a new one, bound to all of
// these. A reused hold keeps its id and expiry; the decision names it and
// raises no hold event. The commit that would create the new hold refuses
// it when an identical one was created meanwhile (ErrIdenticalHold), and
// the decision then reuses that one (holdWriteFailed).
func (e *Engine) holdFor(ctx context.Context, req Request, out *outcome, now time.Time) error {
	env := req.Envelope
	paramsHash, err := env.ParamsHash()
	if err != nil {
		return holdCreationFault(err)
	}
	h := Hold{
		ID: NewID(), Status: HoldPending, Rule: out.Rule, Reason: out.Reason, Envelope: env,
		EnvelopeHash: out.EnvelopeHash, ParamsHash: paramsHash, Gate: &req.Gate,
		CreatedTS: now, ExpiresTS: now.Add(e.cfg.HoldTTL), DecisionID: out.DecisionID, Approvers: e.approversOf(out.Rule),
	}
	err = e.reuseHold(ctx, out, HoldBinding(&h), now)
	if !errors.Is(err, ErrNotFound) {
		return err
	}
	out.HoldID, out.ExpiresTS, out.created = h.ID, FormatTime(h.ExpiresTS), &h
	return nil
}

// reuseHold makes out name the live hold of binding, if there is one
// (ErrNotFound when none).
func (e *Engine) reuseHold(ctx context.Context, out *outcome, binding string, now time.Time) error {
	h, err := e.deps.Holds.Reusable(ctx, binding, now)
	switch {
	case errors.Is(err, ErrNotFound):
		return err
	case err != nil:
		return holdCreationFault(err)
	}
	out.HoldID, out.ExpiresTS, out.HoldReused, out.created = h.ID, FormatTime(h.ExpiresTS), true, nil
	return nil
}
