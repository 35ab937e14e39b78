package inbox

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/svc-dev/svc/engine"
)

// heartbeat is how often an idle event stream sends a comment, so that a
// client gone away is noticed and proxies keep the stream open.
const heartbeat = 25 * time.Second

// Events is the engine.Publisher that tells the app's open list pages
// that a hold arrived or left pending: it fans the hold events out to
// their event streams. Hand it to the publishers of the engine and the
// hold service, and to the App (Deps.Events).
type Events struct {
	mu     sync.Mutex
	subs   map[chan string]struct{}
	closed chan struct{}
	once   sync.Once
}

var _ engine.Publisher = (*Events)(nil)

// NewEvents returns an Events with no stream open.
func NewEvents() *Events {
	return &Events{subs: map[chan string]struct{}{}, closed: make(chan struct{})}
}

// Publish implements engine.Publisher: a hold event wakes the open lists.
func (l *Events) Publish(ev engine.Event) {
	switch ev.Type {
	case engine.EventHoldCreated, engine.EventHoldResolved, engine.EventHoldExpired:
		l.notify(ev.Type)
	}
}

// Close ends every event stream, present and future, so that a server
// shutting down is not held up by them (register it with
// http.Server.RegisterOnShutdown).
func (l *Events) Close() { l.once.Do(func() { close(l.closed) }) }

// subscribe returns a channel of event types and its cancellation; false
// when max streams (0: no bound) are open already.
func (l *Events) subscribe(max int) (<-chan string, func(), bool) {
	ch := make(chan string, 1)
	l.mu.Lock()
	if max > 0 && len(l.subs) >= max {
		l.mu.Unlock()
		return nil, nil, false
	}
	l.subs[ch] = struct{}{}
	l.mu.Unlock()
	return ch, func() {
		l.mu.Lock()
		delete(l.subs, ch)
		l.mu.Unlock()
	}, true
}

// notify hands typ to every stream without blocking: a stream that has
// an event waiting already will reload anyway.
func (l *Events) notify(typ string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ch := range l.subs {
		select {
		case ch <- typ:
		default:
		}
	}
}

// handleEvents streams server-sent events to a list page: event "holds"
// when a hold is created, resolved or expires in this process. Past
// Config.MaxStreams open streams it answers 503 and closes the connection:
// the page then lists without live updates, and streams cannot take every
// connection from decisions.
func (a *App) handleEvents(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	events, cancel, ok := a.deps.Events.subscribe(a.cfg.MaxStreams)
	if !ok {
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "5")
		http.Error(w, "too many event streams open", http.StatusServiceUnavailable)
		return
	}
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, "retry: 5000\n\n")
	if rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		var err error
		select {
		case typ := <-events:
			_, err = fmt.Fprintf(w, "event: holds\ndata: %s\n\n", typ)
		case <-tick.C:
			_, err = fmt.Fprint(w, ": ping\n\n")
		case <-a.deps.Events.closed:
			return
		case <-r.Context().Done():
			return
		}
		if err != nil || rc.Flush() != nil {
			return
		}
	}
}
