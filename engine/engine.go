package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Config holds the engine's decision settings (validated by cmd).
type Config struct {
	Version string        // svc version, carried in events
	Window  time.Duration // rolling window of session budgets
	HoldTTL time.Duration // lifetime of a new hold
	Frozen  bool          // initial kill-switch state
}

// Deps are the parts the engine consumes. Publisher and Observer may be nil
// (no export, no metrics). When Recorder is also a Journal, a decision's
// records and an allow's charge are committed together, instead of the
// charge through Budgets.Charge and each record on its own.
type Deps struct {
	Evaluator Evaluator
	Budgets   Budgets
	Holds     Holds
	Recorder  Recorder
	Publisher Publisher
	Observer  Observer
	Logger    zerolog.Logger
	Now       func() time.Time
}

// AuditRecord is one record of the audit log: its kind and its body.
type AuditRecord struct {
	Kind string
	Body any
}

// Journal is a Recorder that commits all the records of one decision (the
// decision, the hold transition it caused) and the charge of an allow as
// one durable step: one commit per decision instead of one per record plus
// one for the charge, and no charge without its decision on record.
type Journal interface {
	Recorder
	// Commit records records in order and stores c (when not nil) in the
	// same commit; it returns only once all are durable, and an error means
	// c was not stored (the records, as with Record, may be missing).
	Commit(ctx context.Context, records []AuditRecord, c *Charge) error
}

// Engine runs the decide pipeline. It is safe for concurrent use.
type Engine struct {
	cfg     Config
	deps    Deps
	journal Journal // deps.Recorder when it is a Journal, else nil
	locks   *sessionLocks
	frozen  atomic.Bool
}

// New returns an Engine; it checks that every required dependency is set.
func New(cfg Config, deps Deps) (*Engine, error) {
	if deps.Evaluator == nil || deps.Budgets == nil || deps.Holds == nil || deps.Recorder == nil {
		return nil, errors.New("engine: evaluator, budgets, holds and recorder are required")
	}
	if deps.Publisher == nil {
		deps.Publisher = NopPublisher{}
	}
	if deps.Observer == nil {
		deps.Observer = NopObserver{}
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	e := &Engine{cfg: cfg, deps: deps, locks: newSessionLocks()}
	e.journal, _ = deps.Recorder.(Journal)
	e.frozen.Store(cfg.Frozen)
	return e, nil
}

// Frozen reports the kill-switch state.
func (e *Engine) Frozen() bool { return e.frozen.Load() }

// SetFrozen sets the kill-switch state.
func (e *Engine) SetFrozen(frozen bool) { e.frozen.Store(frozen) }

// NopPublisher discards events: the publisher when no export is configured.
type NopPublisher struct{}

// Publish implements Publisher.
func (NopPublisher) Publish(Event) {}

// NewID returns a random uuid4 as 32 lower-case hex digits.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	return hex.EncodeToString(b[:])
}

// record writes an audit record; with commit, it is the one place audit
// failures surface.
func (e *Engine) record(ctx context.Context, kind string, rec any) error {
	return e.deps.Recorder.Record(ctx, kind, rec)
}

// commit puts a decision's records on record, the decision first, with the
// charge of an allow (see charge). Without a Journal, the decision is
// recorded on its own, and a later record that fails is only logged: the
// decision stands, as it is already on record.
func (e *Engine) commit(ctx context.Context, records []AuditRecord, c *Charge) error {
	if e.journal != nil {
		return e.journal.Commit(ctx, records, c)
	}
	if err := e.record(ctx, records[0].Kind, records[0].Body); err != nil {
		return err
	}
	for _, r := range records[1:] {
		if err := e.record(ctx, r.Kind, r.Body); err != nil {
			e.deps.Logger.Error().Err(err).Str("kind", r.Kind).Msg("record of a decision not written to the audit log")
		}
	}
	return nil
}
