package holds

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/svc-dev/svc/engine"
)

// Resolution decisions of POST /v1/holds/{id}/resolve.
const (
	DecisionApprove = "approve"
	DecisionReject  = "reject"
)

// MaxReasonBytes bounds the free-text reason of a resolution.
const MaxReasonBytes = 1024

// Journal is the audit log the Service writes to (the ledger's Audit, an
// engine.Journal): Commit stores an entry's records and its hold write as
// one durable step, so a resolution is applied with its audit line or not
// at all.
type Journal interface {
	Commit(ctx context.Context, e engine.Entry) error
}

// Service resolves holds (engine.Resolver) and expires them (Run): it
// establishes who the approver is, enforces verification, four eyes and
// the resolution policy, commits the transition with its audit line and
// publishes its webhook event.
type Service struct {
	// Now is the clock used when a request carries no time; tests replace
	// it before use.
	Now func() time.Time

	store    *Store
	cfg      Config
	policy   policy
	terminal map[string]bool
	journal  Journal
	pub      engine.Publisher
	log      zerolog.Logger
}

var _ engine.Resolver = (*Service)(nil)

// NewService validates cfg and returns a Service over store that commits
// its transitions to journal and publishes webhook events to pub.
func NewService(store *Store, cfg Config, journal Journal, pub engine.Publisher, log zerolog.Logger) (*Service, error) {
	if store == nil || journal == nil || pub == nil {
		return nil, errors.New("new hold service: store, journal and publisher are required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new hold service: %w", err)
	}
	pol, _ := parsePolicy(cfg.ResolutionPolicy) // Validate parsed it
	terminal := map[string]bool{DefaultTerminalRule: true}
	for _, r := range cfg.TerminalRules {
		terminal[strings.TrimSpace(r)] = true
	}
	if toks, _ := loadTokens(cfg.ResolverTokens); cfg.RequireVerified && len(toks) == 0 {
		log.Warn().Msg("approver verification is required but SVC_RESOLVER_TOKENS binds no credential: every hold resolution will be refused")
	}
	return &Service{Now: time.Now, store: store, cfg: cfg, policy: pol, terminal: terminal,
		journal: journal, pub: pub, log: log}, nil
}

// Resolve approves or rejects a pending hold on behalf of the principal the
// request establishes; the package comment gives the order of the checks.
// Errors are *engine.Error values.
func (s *Service) Resolve(ctx context.Context, r engine.ResolveRequest) (engine.Hold, error) {
	now := r.Now
	if now.IsZero() {
		now = s.Now()
	}
	h, err := s.store.Get(ctx, r.HoldID, now)
	if err != nil {
		return engine.Hold{}, err
	}
	status, err := requestedStatus(r)
	if err != nil {
		return engine.Hold{}, fmt.Errorf("resolve hold %s: %w", h.ID, err)
	}
	who, verified, err := s.admit(h, r)
	if err != nil {
		return engine.Hold{}, err
	}
	res := engine.HoldResolution{HoldID: h.ID, Status: status, By: who, Verified: verified, Reason: r.Reason, At: now}
	out := resolved(h, res)
	if err := s.commit(ctx, out, res); err != nil {
		return engine.Hold{}, err
	}
	s.pub.Publish(engine.Event{Type: engine.EventHoldResolved,
		Body: holdEvent(engine.EventHoldResolved, out, now, out.ResolutionReason)})
	return out, nil
}

// Vet runs the checks of Resolve that do not depend on the decision and
// the reason (the hold exists, who asks, its state, four eyes, the
// resolution policy), in Resolve's order and with its errors, without
// resolving anything: what a reviewer's page shows instead of a button
// that could only be refused. Resolve runs them again, on the hold as it
// is then.
func (s *Service) Vet(ctx context.Context, r engine.ResolveRequest) (engine.Hold, error) {
	now := r.Now
	if now.IsZero() {
		now = s.Now()
	}
	h, err := s.store.Get(ctx, r.HoldID, now)
	if err != nil {
		return engine.Hold{}, err
	}
	if _, _, err := s.admit(h, r); err != nil {
		return h, err
	}
	return h, nil
}

// admit establishes who asks to resolve h (identify) and checks that they
// may (authorize).
func (s *Service) admit(h engine.Hold, r engine.ResolveRequest) (engine.Principal, bool, error) {
	who, verified, err := s.identify(r, h.ID)
	if err != nil {
		return engine.Principal{}, false, fmt.Errorf("resolve hold %s: %w", h.ID, err)
	}
	if err := s.authorize(h, who); err != nil {
		return engine.Principal{}, false, fmt.Errorf("resolve hold %s: %w", h.ID, err)
	}
	return who, verified, nil
}

// resolved is pending hold h as res leaves it, exactly as the store then
// reads it back (times to the millisecond, in UTC).
func resolved(h engine.Hold, res engine.HoldResolution) engine.Hold {
	by, verified, at := res.By, res.Verified, fromMS(res.At.UnixMilli())
	h.Status, h.DecidedBy, h.DecidedTS, h.DecidedByVerified = res.Status, &by, &at, &verified
	h.ResolutionReason = res.Reason
	return h
}

// commit applies res (out is the hold it leaves) with its audit line, in
// one audit commit. A refusal of the store (the hold moved on since it was
// read) is returned as it is; any other failure is 500 audit_unavailable:
// nothing was applied, so no unaudited approval stands.
func (s *Service) commit(ctx context.Context, out engine.Hold, res engine.HoldResolution) error {
	rec := engine.AuditRecord{Kind: engine.EventHoldResolution,
		Body: holdEvent(engine.EventHoldResolution, out, res.At, out.ResolutionReason)}
	err := s.journal.Commit(ctx, engine.Entry{Records: []engine.AuditRecord{rec}, Resolve: &res})
	var refused *engine.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &refused):
		return fmt.Errorf("resolve hold %s: %w", res.HoldID, refused)
	}
	return fmt.Errorf("resolve hold %s: %w", res.HoldID, derive(ErrAuditUnavailable,
		"the resolution could not be audited and was not applied: "+err.Error(),
		map[string]any{"hold_id": res.HoldID, "reason": "audit record could not be written"}))
}

func requestedStatus(r engine.ResolveRequest) (string, error) {
	if len(r.Reason) > MaxReasonBytes {
		return "", engine.InvalidField("reason", fmt.Sprintf("at most %d bytes", MaxReasonBytes))
	}
	switch r.Decision {
	case DecisionApprove:
		return engine.HoldApproved, nil
	case DecisionReject:
		return engine.HoldRejected, nil
	}
	return "", engine.InvalidField("decision", "must be approve or reject")
}

// identify establishes the approver: the principal bound to the credential
// (verified), else, only when verification is off, the asserted one.
func (s *Service) identify(r engine.ResolveRequest, holdID string) (engine.Principal, bool, error) {
	toks, err := loadTokens(s.cfg.ResolverTokens)
	if err != nil {
		return engine.Principal{}, false, tokensUnavailable(err)
	}
	if p, ok := toks.lookup(r.Credential); ok {
		return p, true, nil
	}
	if s.cfg.RequireVerified {
		why := whyUnbound
		if len(toks) == 0 {
			why = whyNotConfigured
		}
		return engine.Principal{}, false, notVerified(holdID, why, r.Asserted)
	}
	if r.Asserted == nil {
		return engine.Principal{}, false, engine.InvalidField("principal",
			"required: {type, id} of the approver, since approver verification is off")
	}
	p, err := canonicalPrincipal(*r.Asserted)
	return p, false, err
}

// Terminal reports whether rule is terminal: DefaultTerminalRule or one of
// Config.TerminalRules. Its holds can never be resolved, and the engine,
// given this method, denies a require_approval under it rather than raise
// such a hold.
func (s *Service) Terminal(rule string) bool { return s.terminal[rule] }

// authorize checks that h can be resolved at all, then that who may.
func (s *Service) authorize(h engine.Hold, who engine.Principal) error {
	if h.Status != engine.HoldPending {
		return notResolvable(h.ID, h.Status, "hold is "+h.Status+", only a pending hold can be resolved")
	}
	if s.Terminal(h.Rule) {
		return notResolvable(h.ID, h.Status, "rule "+h.Rule+" is terminal: its holds can never be resolved")
	}
	if h.Envelope == nil {
		return engine.Errorf(engine.EINTERNAL, "hold %s has no envelope to check four eyes against", h.ID)
	}
	if isActor(h.Envelope.Agent, who) {
		return actorIsApprover(h.ID, who)
	}
	if allowed := s.policy.allowed(h.Rule); !slices.Contains(allowed, who.Type) {
		return typeNotAllowed(h.ID, h.Rule, who, allowed)
	}
	return nil
}

// Approvers are the principal types SVC_RESOLUTION_POLICY lets approve
// the holds of rule; an unlisted rule ("" included) has the default ones.
func (s *Service) Approvers(rule string) []string {
	return slices.Clone(s.policy.allowed(rule))
}

// Identify returns the principal of a resolver credential. When the tokens
// cannot be read it returns ErrTokensUnavailable: nobody is authenticated
// by an unreadable token set, and the caller is told why.
func (s *Service) Identify(token string) (engine.Principal, bool, error) {
	toks, err := loadTokens(s.cfg.ResolverTokens)
	if err != nil {
		return engine.Principal{}, false, tokensUnavailable(err)
	}
	p, ok := toks.lookup(token)
	return p, ok, nil
}
