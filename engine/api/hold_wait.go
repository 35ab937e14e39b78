package api

import (
	"context"
	"sync"
	"time"

	"github.com/svc-dev/svc/engine"
)

// holdWatch wakes the long-polls of holds when a hold leaves pending in
// this process (a resolution); an expiry wakes them by its own timer. It
// never reads the store: a waiter re-reads its hold once it is woken.
type holdWatch struct {
	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
	closed  chan struct{} // closed when the server shuts down: every wait ends
	once    sync.Once
}

func newHoldWatch() *holdWatch {
	return &holdWatch{waiters: map[string]map[chan struct{}]struct{}{}, closed: make(chan struct{})}
}

// subscribe returns a channel closed at the next notify of id, and its
// cancellation.
func (w *holdWatch) subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	w.mu.Lock()
	set := w.waiters[id]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		w.waiters[id] = set
	}
	set[ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if set, ok := w.waiters[id]; ok {
			delete(set, ch)
			if len(set) == 0 {
				delete(w.waiters, id)
			}
		}
	}
}

// notify wakes every waiter of id.
func (w *holdWatch) notify(id string) {
	w.mu.Lock()
	set := w.waiters[id]
	delete(w.waiters, id)
	w.mu.Unlock()
	for ch := range set {
		close(ch)
	}
}

// close ends every wait, present and future, at once.
func (w *holdWatch) close() { w.once.Do(func() { close(w.closed) }) }

// awaitHold returns hold id as Holds.Get does, once it is no longer
// pending or wait has passed, whichever comes first: it subscribes before
// each read, so a resolution between the read and the wait is not missed,
// and sleeps until a resolution in this process, the hold's expiry, the
// end of the wait or the end of ctx (the client gone). With a zero wait it
// is Holds.Get.
func (s *Server) awaitHold(ctx context.Context, id string, wait time.Duration) (engine.Hold, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		woken, cancel := s.watch.subscribe(id)
		h, err := s.holds.Get(ctx, id, s.engine.Now())
		if err != nil || h.Status != engine.HoldPending || wait <= 0 {
			cancel()
			return h, err
		}
		expiry := time.NewTimer(h.ExpiresTS.Sub(s.engine.Now()))
		select {
		case <-woken:
		case <-expiry.C:
		case <-deadline.C:
			wait = 0 // read once more and answer
		case <-s.watch.closed:
			wait = 0
		case <-ctx.Done():
			expiry.Stop()
			cancel()
			return engine.Hold{}, ctx.Err()
		}
		expiry.Stop()
		cancel()
	}
}

// waitSlot takes a slot for a long-poll and returns its release; false
// when MaxHoldWaiters long-polls wait already.
func (s *Server) waitSlot() (release func(), ok bool) {
	if s.waiters == nil {
		return func() {}, true
	}
	select {
	case s.waiters <- struct{}{}:
		return func() { <-s.waiters }, true
	default:
		return func() {}, false
	}
}

// HoldResolved wakes the long-polls of hold id, resolved outside this
// server's API (the web app, or another engine sharing the store); an
// empty id wakes every long-poll, for when such resolutions may have been
// missed. A woken poll re-reads its
// hold and waits again while it is pending.
func (s *Server) HoldResolved(id string) {
	if id != "" {
		s.watch.notify(id)
		return
	}
	s.watch.mu.Lock()
	ids := make([]string, 0, len(s.watch.waiters))
	for id := range s.watch.waiters {
		ids = append(ids, id)
	}
	s.watch.mu.Unlock()
	for _, id := range ids {
		s.watch.notify(id)
	}
}

// EndHoldWaits ends every long-poll of a hold at once, each answering its
// hold as it stands, so that a server shutting down is not held up by
// them (register it with http.Server.RegisterOnShutdown).
func (s *Server) EndHoldWaits() { s.watch.close() }
