package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/svc-dev/svc/engine/envelope"
)

// budgetKeys are the subjects an envelope's charges are counted against:
// its session, its agent and its principal ("" when it names none), each
// folded, so that a change of case or a look-alike letter is the same
// subject. A fresh session id does not reset the agent's or the
// principal's budgets.
type budgetKeys struct {
	session, agent, principal string
}

func budgetKeysOf(env *envelope.Envelope) budgetKeys {
	return budgetKeys{session: env.Agent.SessionID, agent: envelope.Fold(env.Agent.ID), principal: envelope.Fold(env.Agent.OnBehalfOf)}
}

// lockNames are the names of the locks a decision holds from reading its
// budgets to committing its charge, in the order they are taken (sorted,
// so that two decisions sharing subjects cannot deadlock).
func (k budgetKeys) lockNames() []string {
	names := []string{"s\x00" + k.session, "a\x00" + k.agent}
	if k.principal != "" {
		names = append(names, "p\x00"+k.principal)
	}
	slices.Sort(names)
	return names
}

// cumulative reads what the envelope's subjects spent since since.
func (e *Engine) cumulative(ctx context.Context, k budgetKeys, since time.Time) (Cumulative, error) {
	c := Cumulative{WindowSeconds: int64(e.cfg.Window / time.Second)}
	for _, s := range []struct {
		scope Scope
		id    string
		dst   *Usage
	}{{ScopeSession, k.session, &c.Usage}, {ScopeAgent, k.agent, &c.Agent}, {ScopePrincipal, k.principal, &c.Principal}} {
		if s.id == "" {
			continue
		}
		u, err := e.deps.Budgets.Usage(ctx, s.scope, s.id, since)
		if err != nil {
			return Cumulative{}, fmt.Errorf("%s %q: %w", s.scope, s.id, err)
		}
		*s.dst = u
	}
	return c, nil
}

// ChargeOf is what an allowed envelope adds to the totals of its session,
// agent and principal.
func ChargeOf(env *envelope.Envelope) Totals {
	n := env.Magnitude.Count
	t := Totals{Objects: n}
	if env.Action.Verb == "delete" {
		t.Deletes = n
	}
	if env.Axes.Externality == "outbound" {
		t.ExternalSends = n
	}
	return t
}

// charge books what an allow costs; the charge is committed with the
// decision's audit records (Journal.Commit), under the locks of its
// subjects.
func (e *Engine) charge(env *envelope.Envelope, out *outcome, now time.Time) {
	k := budgetKeysOf(env)
	c := &Charge{SessionID: k.session, AgentID: k.agent, PrincipalID: k.principal,
		DecisionID: out.DecisionID, At: now, Totals: ChargeOf(env)}
	if m := env.Money; m != nil && m.Units > 0 {
		c.Currency, c.Amount = m.Currency, m.Units
	}
	out.charge = c
}
