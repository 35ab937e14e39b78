package holds

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/svc-dev/svc/engine"
)

// Run sweeps lapsed holds now and then every interval until ctx is done,
// logging failed sweeps. It returns nil when ctx ends.
func (s *Service) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		return fmt.Errorf("run hold sweep: interval %s is not positive", interval)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.Error().Err(err).Msg("hold expiry sweep")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sweep records the expiry of every lapsed hold as of s.Now(), writes a
// hold_resolution audit line for each and publishes hold.expired. Audit
// failures do not undo an expiry (expiry is the safe direction); they are
// returned, joined, after every hold has been handled.
func (s *Service) Sweep(ctx context.Context) error {
	now := s.Now()
	expired, err := s.store.Sweep(ctx, now)
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range expired {
		reason := "expires_ts reached before the hold was resolved"
		if h.DecidedBy != nil {
			reason = "expires_ts reached before the approved hold was redeemed"
		}
		rec := engine.AuditRecord{Kind: engine.EventHoldResolution, Body: holdEvent(engine.EventHoldResolution, h, now, reason)}
		if err := s.journal.Commit(ctx, engine.Entry{Records: []engine.AuditRecord{rec}}); err != nil {
			errs = append(errs, fmt.Errorf("audit expiry of hold %s: %w", h.ID, err))
		}
		s.pub.Publish(engine.Event{Type: engine.EventHoldExpired, Body: holdEvent(engine.EventHoldExpired, h, now, reason)})
	}
	return errors.Join(errs...)
}

// holdEvent is the audit record (event hold_resolution) or webhook body
// (hold.resolved, hold.expired) of a transition of h at now.
func holdEvent(event string, h engine.Hold, now time.Time, reason string) engine.HoldEvent {
	ev := engine.HoldEvent{
		Event:             event,
		TS:                engine.FormatTime(now),
		HoldID:            h.ID,
		RuleID:            h.Rule,
		Status:            h.Status,
		ExpiresTS:         engine.FormatTime(h.ExpiresTS),
		DecisionID:        h.DecisionID,
		EnvelopeHash:      h.EnvelopeHash,
		DecidedBy:         h.DecidedBy,
		DecidedByVerified: h.DecidedByVerified,
		Reason:            reason,
	}
	if h.DecidedTS != nil {
		ev.DecidedTS = engine.FormatTime(*h.DecidedTS)
	}
	if e := h.Envelope; e != nil {
		ev.SessionID, ev.AgentID = e.Agent.SessionID, e.Agent.ID
		ev.Ability, ev.Environment = e.Action.Ability, e.Target.Environment
	}
	return ev
}
