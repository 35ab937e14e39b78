package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Config holds the engine's decision settings (validated by cmd).
type Config struct {
	Version string        // svc version, carried in events
	Window  time.Duration // rolling window of session budgets
	HoldTTL time.Duration // lifetime of a new hold
	// Deadline is how long after its arrival a decision must have its
	// verdict, its wait behind earlier decisions of its session included
	// (SVC_OPA_TIMEOUT); one that has none by then is denied. Zero: no
	// bound beyond the evaluator's own.
	Deadline time.Duration
	// Terminal reports whether a rule is terminal: its require_approval is
	// denied, since no approval could ever lift it (the holds service owns
	// the set and refuses to resolve such holds). Nil: RuleTerminal alone.
	Terminal func(rule string) bool
	// Approvers are the principal types that may approve the holds of rule
	// (SVC_RESOLUTION_POLICY; the hold service enforces it on resolution;
	// an unlisted rule, "" included, has the default ones). A hold is
	// reused only by an action whose rule has the same approvers, and a
	// re-submission the policy holds under another rule than its hold's
	// redeems only when the hold's approver may approve that rule too.
	// Nil: any type, every rule.
	Approvers func(rule string) []string
	// HoldLink returns the web page of a hold, sent as the url of its
	// hold.created event; nil (SVC_PUBLIC_URL unset) sends none.
	HoldLink func(id string) string
}

// Deps are the parts the engine consumes. Publisher and Observer may be nil
// (no export, no metrics).
type Deps struct {
	Evaluator Evaluator
	Budgets   Budgets
	Holds     Holds
	Recorder  Journal
	Publisher Publisher
	Observer  Observer
	Logger    zerolog.Logger
	Now       func() time.Time
	// Subjects, when set, serialises the decisions of a budget subject
	// across every engine sharing the store (replicas on one PostgreSQL);
	// nil when this engine is the store's only writer (SQLite).
	Subjects SubjectLocker
}

// SubjectLocker locks budget subjects across the engines that share one
// store. LockSubjects takes the locks named (sorted by the caller, so
// that no two decisions wait for each other), waiting until ctx ends at
// most, and returns their release; the engine holds them from reading the
// subjects' totals until the decision's charge is committed, so that no
// interleaving of replicas can overrun a budget. An error means no lock
// is held.
type SubjectLocker interface {
	LockSubjects(ctx context.Context, names []string) (release func(), err error)
}

// Engine runs the decide pipeline. It is safe for concurrent use.
type Engine struct {
	cfg   Config
	deps  Deps
	locks *sessionLocks
	// freeze orders decisions and changes of the freeze flag. A decision
	// holds it for reading from before it reads the flag until its record
	// is committed; a change holds it for writing while it records and
	// flips the flag. So a change waits for the decisions being made, and
	// none starts until it is done: every decision made under the old state
	// is on record before the change.
	freeze sync.RWMutex
	frozen atomic.Bool
	// logLimit rate-limits the lines of faults that fail every decision
	// alike while they last (failClosed, recordDegraded).
	logLimit *LogLimiter
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
	if cfg.Terminal == nil {
		cfg.Terminal = func(rule string) bool { return rule == RuleTerminal }
	}
	e := &Engine{cfg: cfg, deps: deps, locks: newSessionLocks(), logLimit: NewLogLimiter()}
	return e, nil
}

// Frozen reports the kill-switch state.
func (e *Engine) Frozen() bool { return e.frozen.Load() }

// Now is the engine's clock (Deps.Now): the time holds are judged at.
func (e *Engine) Now() time.Time { return e.deps.Now() }

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

// record writes an audit record outside a decision (a freeze change).
func (e *Engine) record(ctx context.Context, kind string, rec any) error {
	return e.deps.Recorder.Record(ctx, kind, rec)
}
