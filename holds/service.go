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

// revertTimeout bounds the undo of a resolution that could not be audited.
const revertTimeout = 5 * time.Second

// Service resolves holds (engine.Resolver) and expires them (Run): it
// establishes who the approver is, enforces verification, four eyes and
// the resolution policy, applies the transition and writes its audit line
// and webhook event.
type Service struct {
	// Now is the clock used when a request carries no time; tests replace
	// it before use.
	Now func() time.Time

	store    *Store
	cfg      Config
	policy   policy
	terminal map[string]bool
	rec      engine.Recorder
	pub      engine.Publisher
	log      zerolog.Logger
}

var _ engine.Resolver = (*Service)(nil)

// NewService validates cfg and returns a Service over store that audits to
// rec and publishes webhook events to pub.
func NewService(store *Store, cfg Config, rec engine.Recorder, pub engine.Publisher, log zerolog.Logger) (*Service, error) {
	if store == nil || rec == nil || pub == nil {
		return nil, errors.New("new hold service: store, recorder and publisher are required")
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
		rec: rec, pub: pub, log: log}, nil
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
	who, verified, err := s.identify(r, h.ID)
	if err != nil {
		return engine.Hold{}, fmt.Errorf("resolve hold %s: %w", h.ID, err)
	}
	if err := s.authorize(h, who); err != nil {
		return engine.Hold{}, fmt.Errorf("resolve hold %s: %w", h.ID, err)
	}
	res := Resolution{Status: status, By: who, Verified: verified, Reason: r.Reason, Now: now}
	out, err := s.store.Resolve(ctx, h.ID, res)
	if err != nil {
		return engine.Hold{}, err
	}
	if err := s.rec.Record(ctx, engine.EventHoldResolution,
		holdEvent(engine.EventHoldResolution, out, now, out.ResolutionReason)); err != nil {
		return engine.Hold{}, s.revert(ctx, out.ID, res, err)
	}
	s.pub.Publish(engine.Event{Type: engine.EventHoldResolved,
		Body: holdEvent(engine.EventHoldResolved, out, now, out.ResolutionReason)})
	return out, nil
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

// authorize checks that h can be resolved at all, then that who may.
func (s *Service) authorize(h engine.Hold, who engine.Principal) error {
	if h.Status != engine.HoldPending {
		return notResolvable(h.ID, h.Status, "hold is "+h.Status+", only a pending hold can be resolved")
	}
	if s.terminal[h.Rule] {
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

// revert undoes a resolution whose audit line failed (fail closed: an
// unaudited approval must not stand) and returns the error to answer.
func (s *Service) revert(ctx context.Context, id string, res Resolution, auditErr error) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), revertTimeout)
	defer cancel()
	if err := s.store.unresolve(rctx, id, res); err != nil {
		s.log.Error().Err(err).Str("hold_id", id).Msg("unaudited hold resolution could not be reverted")
	}
	return fmt.Errorf("resolve hold %s: %w", id, derive(ErrAuditUnavailable,
		"the resolution could not be audited and was not applied: "+auditErr.Error(),
		map[string]any{"hold_id": id, "reason": "audit record could not be written"}))
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
