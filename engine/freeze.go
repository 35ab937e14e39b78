package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// FreezeState is the kill-switch state.
type FreezeState struct {
	Frozen    bool      `json:"frozen"`
	Reason    string    `json:"reason"`
	By        string    `json:"by"`
	UpdatedTS time.Time `json:"updated_ts"`
}

// FreezeStore persists the kill-switch state across restarts.
type FreezeStore interface {
	LoadFreeze(ctx context.Context) (FreezeState, error)
	SaveFreeze(ctx context.Context, st FreezeState) error
}

// ErrFreezePinned refuses to clear a freeze that SVC_FREEZE pins on.
var ErrFreezePinned = &Error{Code: ECONFLICT, Name: "freeze_pinned",
	Message: "SVC_FREEZE=true pins the freeze on; unset it and restart to clear",
	Fields:  map[string]any{"variable": "SVC_FREEZE"}}

// KillSwitch owns the freeze flag: the pinned setting, the persisted state,
// and the records every change leaves (audit line, webhook, SIEM event).
type KillSwitch struct {
	mu     sync.Mutex
	engine *Engine
	store  FreezeStore
	pinned bool
	state  FreezeState
}

// NewKillSwitch loads the persisted state; pinned (SVC_FREEZE=true) keeps
// the engine frozen whatever was stored.
func NewKillSwitch(ctx context.Context, e *Engine, store FreezeStore, pinned bool) (*KillSwitch, error) {
	st, err := store.LoadFreeze(ctx)
	if err != nil {
		return nil, err
	}
	k := &KillSwitch{engine: e, store: store, pinned: pinned, state: st}
	if pinned && !st.Frozen {
		k.state = FreezeState{Frozen: true, Reason: "pinned by SVC_FREEZE", By: "config:SVC_FREEZE"}
	}
	e.frozen.Store(k.state.Frozen)
	return k, nil
}

// FreezeView is the answer of the freeze routes.
type FreezeView struct {
	FreezeState
	Pinned  bool `json:"pinned"`
	Changed bool `json:"changed"`
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
	if k.state.Frozen == frozen {
		return FreezeView{FreezeState: k.state, Pinned: k.pinned}, nil
	}
	k.engine.freeze.Lock()
	defer k.engine.freeze.Unlock()
	now := k.engine.deps.Now()
	st := FreezeState{Frozen: frozen, Reason: reason, By: by, UpdatedTS: now}
	ev := FreezeEvent{Event: "freeze", TS: FormatTime(now), Frozen: frozen, Reason: reason, By: by}
	if err := k.engine.record(ctx, "freeze", ev); err != nil {
		return FreezeView{}, fmt.Errorf("audit freeze change: %w", errors.Join(ErrAuditUnavailable, err))
	}
	if err := k.store.SaveFreeze(ctx, st); err != nil {
		return FreezeView{}, err
	}
	k.state = st
	k.engine.frozen.Store(frozen)
	ev.Event = EventFreezeFlipped
	k.engine.deps.Publisher.Publish(Event{Type: EventFreezeFlipped, Body: ev})
	action := "cleared"
	if frozen {
		action = "flipped"
	}
	k.emit(action, st)
	return FreezeView{FreezeState: st, Pinned: k.pinned, Changed: true}, nil
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
