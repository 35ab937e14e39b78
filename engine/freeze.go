package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// FreezeState is the kill-switch state. FreezeView is its wire form.
type FreezeState struct {
	Frozen bool
	Reason string
	By     string
	// UpdatedTS is when the state last changed; zero if it never has.
	UpdatedTS time.Time
	// FromPin marks a freeze that only SVC_FREEZE holds on: the state set
	// through the API under it is not frozen, so a start without
	// SVC_FREEZE clears it.
	FromPin bool
}

// FreezeStore persists the kill-switch state the engine last ran with, so
// that a restart keeps it and a start that changes it puts that on record.
type FreezeStore interface {
	LoadFreeze(ctx context.Context) (FreezeState, error)
	SaveFreeze(ctx context.Context, st FreezeState) error
}

// ErrFreezePinned refuses to clear a freeze that SVC_FREEZE pins on.
var ErrFreezePinned = &Error{Code: ECONFLICT, Name: "freeze_pinned",
	Message: "SVC_FREEZE=true pins the freeze on; unset it and restart to clear",
	Fields:  map[string]any{"variable": "SVC_FREEZE"}}

// The actor and reasons of the changes SVC_FREEZE makes at start-up.
const (
	pinActor    = "config:SVC_FREEZE"
	pinReason   = "SVC_FREEZE=true at start-up pins the freeze on"
	unpinReason = "SVC_FREEZE no longer set at start-up: the freeze it pinned is cleared"
)

// KillSwitch owns the freeze flag: the pinned setting, the persisted state,
// and the records every change leaves (audit line, webhook, SIEM event).
type KillSwitch struct {
	mu     sync.Mutex
	engine *Engine
	store  FreezeStore
	pinned bool
	state  FreezeState
}

// NewKillSwitch loads the state the engine last ran with; pinned
// (SVC_FREEZE=true) keeps the engine frozen whatever was set through the
// API. A start that changes the state, SVC_FREEZE having been set or unset
// since the last run, records the change as the API does, by
// config:SVC_FREEZE; failing to record it fails the start.
func NewKillSwitch(ctx context.Context, e *Engine, store FreezeStore, pinned bool) (*KillSwitch, error) {
	st, err := store.LoadFreeze(ctx)
	if err != nil {
		return nil, err
	}
	k := &KillSwitch{engine: e, store: store, pinned: pinned, state: st}
	e.frozen.Store(st.Frozen)
	if next, ok := startState(st, pinned); ok {
		if err := k.change(ctx, next); err != nil {
			return nil, fmt.Errorf("start-up freeze change (SVC_FREEZE=%t): %w", pinned, err)
		}
	}
	return k, nil
}

// startState is the state a start changes st, the state of the last run,
// to under SVC_FREEZE=pinned; ok is false when the start changes nothing.
func startState(st FreezeState, pinned bool) (next FreezeState, ok bool) {
	switch {
	case pinned && !st.Frozen:
		return FreezeState{Frozen: true, Reason: pinReason, By: pinActor, FromPin: true}, true
	case !pinned && st.FromPin:
		return FreezeState{Frozen: false, Reason: unpinReason, By: pinActor}, true
	}
	return st, false
}

// FreezeView is the answer of the freeze routes.
type FreezeView struct {
	FreezeState
	Pinned  bool
	Changed bool
}

// freezeJSON is the wire form of a FreezeView: updated_ts in FormatTime
// form, null when the state never changed.
type freezeJSON struct {
	Frozen    bool    `json:"frozen"`
	Reason    string  `json:"reason"`
	By        string  `json:"by"`
	UpdatedTS *string `json:"updated_ts"`
	Pinned    bool    `json:"pinned"`
	Changed   bool    `json:"changed"`
}

// MarshalJSON renders the view in its wire form.
func (v FreezeView) MarshalJSON() ([]byte, error) {
	w := freezeJSON{Frozen: v.Frozen, Reason: v.Reason, By: v.By, Pinned: v.Pinned, Changed: v.Changed}
	if !v.UpdatedTS.IsZero() {
		ts := FormatTime(v.UpdatedTS)
		w.UpdatedTS = &ts
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the wire form (the CLI's view of an answer).
func (v *FreezeView) UnmarshalJSON(raw []byte) error {
	var w freezeJSON
	if err := json.Unmarshal(raw, &w); err != nil {
		return err
	}
	*v = FreezeView{FreezeState: FreezeState{Frozen: w.Frozen, Reason: w.Reason, By: w.By},
		Pinned: w.Pinned, Changed: w.Changed}
	if w.UpdatedTS != nil {
		ts, err := time.Parse(time.RFC3339Nano, *w.UpdatedTS)
		if err != nil {
			return fmt.Errorf("freeze updated_ts: %w", err)
		}
		v.UpdatedTS = ts.UTC()
	}
	return nil
}

// Query returns the state and emits a kill_switch "queried" event.
func (k *KillSwitch) Query() FreezeView {
	k.mu.Lock()
	st := k.state
	k.mu.Unlock()
	k.emit("queried", st)
	return FreezeView{FreezeState: st, Pinned: k.pinned}
}

// Set flips or clears the freeze. A change is audited first: nothing
// changes that is not on record. Setting the current value changes nothing.
// A change waits for the decisions being made, and holds back new ones until
// it is done (Engine.freeze): every decision made under the old state is on
// record before the change's own record, and every later one is decided
// under the new state.
func (k *KillSwitch) Set(ctx context.Context, frozen bool, reason, by string) (FreezeView, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.pinned && !frozen {
		return FreezeView{}, ErrFreezePinned
	}
	// Another engine sharing the store may have changed the state since
	// this one last read it: the change is made from the stored state.
	if err := k.sync(ctx); err != nil {
		return FreezeView{}, err
	}
	if k.state.Frozen == frozen {
		if frozen && k.state.FromPin {
			if err := k.adopt(ctx, reason, by); err != nil {
				return FreezeView{}, err
			}
		}
		return FreezeView{FreezeState: k.state, Pinned: k.pinned}, nil
	}
	k.engine.freeze.Lock()
	defer k.engine.freeze.Unlock()
	if err := k.change(ctx, FreezeState{Frozen: frozen, Reason: reason, By: by}); err != nil {
		return FreezeView{}, err
	}
	return FreezeView{FreezeState: k.state, Pinned: k.pinned, Changed: true}, nil
}

// Sync adopts the state stored by another engine sharing the store (a
// replica): when it differs from this engine's, it is applied, waiting for
// the decisions being made as Set does, and this engine exports its own
// kill_switch event (flipped or cleared). The change is already on record
// and published by the replica that made it. SVC_FREEZE's pin on this
// engine still holds: a stored clear leaves a pinned engine frozen.
func (k *KillSwitch) Sync(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.sync(ctx)
}

// sync is Sync under k.mu.
func (k *KillSwitch) sync(ctx context.Context) error {
	st, err := k.store.LoadFreeze(ctx)
	if err != nil {
		return fmt.Errorf("sync freeze state: %w", err)
	}
	if sameFreeze(st, k.state) {
		return nil
	}
	frozen := st.Frozen || k.pinned
	k.engine.freeze.Lock()
	flipped := k.engine.frozen.Load() != frozen
	k.state = st
	k.engine.frozen.Store(frozen)
	k.engine.freeze.Unlock()
	if flipped {
		action := "cleared"
		if frozen {
			action = "flipped"
		}
		shown := st
		shown.Frozen = frozen
		k.emit(action, shown)
	}
	return nil
}

// sameFreeze reports whether a and b are the same state, as stored (to
// the millisecond).
func sameFreeze(a, b FreezeState) bool {
	return a.Frozen == b.Frozen && a.Reason == b.Reason && a.By == b.By && a.FromPin == b.FromPin &&
		a.UpdatedTS.UnixMilli() == b.UpdatedTS.UnixMilli()
}

// adopt makes a freeze that only SVC_FREEZE holds the caller's too: on
// record (an audit line) and stored as set through the API, so that it
// outlasts the pin. The flag does not change, so nothing is published.
func (k *KillSwitch) adopt(ctx context.Context, reason, by string) error {
	_, err := k.put(ctx, FreezeState{Frozen: true, Reason: reason, By: by})
	return err
}

// change puts st on record, stores it (put), applies it and publishes it
// (webhook freeze.flipped, SIEM kill_switch).
func (k *KillSwitch) change(ctx context.Context, st FreezeState) error {
	ev, err := k.put(ctx, st)
	if err != nil {
		return err
	}
	k.engine.frozen.Store(st.Frozen)
	ev.Event = EventFreezeFlipped
	k.engine.deps.Publisher.Publish(Event{Type: EventFreezeFlipped, Body: ev})
	action := "cleared"
	if st.Frozen {
		action = "flipped"
	}
	k.emit(action, k.state)
	return nil
}

// put stamps st now, puts it on record (audit line first: nothing is
// stored that is not on record), stores it and makes it the state. It
// returns the audit record.
func (k *KillSwitch) put(ctx context.Context, st FreezeState) (FreezeEvent, error) {
	now := k.engine.deps.Now()
	st.UpdatedTS = now
	ev := FreezeEvent{Event: "freeze", TS: FormatTime(now), Frozen: st.Frozen, Reason: st.Reason, By: st.By}
	if err := k.engine.record(ctx, "freeze", ev); err != nil {
		return ev, fmt.Errorf("audit freeze change: %w", errors.Join(ErrAuditUnavailable, err))
	}
	if err := k.store.SaveFreeze(ctx, st); err != nil {
		return ev, err
	}
	k.state = st
	return ev, nil
}

// ErrAuditUnavailable reports that a change was refused because its audit
// record could not be written.
var ErrAuditUnavailable = &Error{Code: EINTERNAL, Name: "audit_unavailable",
	Message: "the change could not be audited and was not applied"}

func (k *KillSwitch) emit(action string, st FreezeState) {
	now := k.engine.deps.Now()
	k.engine.deps.Publisher.Publish(Event{Type: EventKillSwitch, Body: KillSwitchEvent{
		TS: FormatTime(now), Event: EventKillSwitch, Action: action, Frozen: st.Frozen, Reason: st.Reason,
		By: st.By, SvcVersion: k.engine.cfg.Version, EpochMS: now.UnixMilli(),
	}})
}
