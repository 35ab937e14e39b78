package holds

import (
	"context"
	"time"

	"github.com/svc-dev/svc/engine"
)

// Create persists a new pending hold outside a decision's transaction, as
// the tests' fixtures need (the engine creates holds through CreateIn).
func (s *Store) Create(ctx context.Context, h engine.Hold) error {
	return create(ctx, s.db, h)
}

// Consume is ConsumeIn in a transaction of its own, returning the consumed
// hold.
func (s *Store) Consume(ctx context.Context, id, decisionID string, now time.Time) (engine.Hold, error) {
	if err := consume(ctx, s.db, engine.Consumption{HoldID: id, DecisionID: decisionID, At: now}); err != nil {
		return engine.Hold{}, err
	}
	return s.Get(ctx, id, now)
}
