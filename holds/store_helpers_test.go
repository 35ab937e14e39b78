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

// Consume is consume outside a decision's transaction, returning the
// consumed hold.
func (s *Store) Consume(ctx context.Context, id, decisionID string, now time.Time) (engine.Hold, error) {
	if err := consume(ctx, s.db, engine.Consumption{HoldID: id, DecisionID: decisionID, At: now}); err != nil {
		return engine.Hold{}, err
	}
	return s.Get(ctx, id, now)
}

// Resolve is resolve outside a decision's transaction, resolving hold id
// with r, returning the resolved hold.
func (s *Store) Resolve(ctx context.Context, id string, r engine.HoldResolution) (engine.Hold, error) {
	r.HoldID = id
	if err := s.resolveAlone(ctx, r); err != nil {
		return engine.Hold{}, err
	}
	return s.Get(ctx, id, r.At)
}

// resolveAlone is resolve outside a decision's transaction, as Consume and
// Create are consume and create.
func (s *Store) resolveAlone(ctx context.Context, r engine.HoldResolution) error {
	return resolve(ctx, s.db, r)
}
