package export

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/svc-dev/svc/engine"
)

// stopGrace bounds the wait for a worker to notice cancellation once the
// drain deadline has passed; sinks abort their I/O on cancellation, so this
// is only a safety net against a hung close.
const stopGrace = time.Second

// sink is a destination: deliver sends one event (called only from the
// queue's worker) and close releases its connections when the worker ends.
type sink interface {
	deliver(ctx context.Context, ev engine.Event) error
	close()
}

// QueueStats describes one export queue, for the /healthz export block and
// for metrics.
type QueueStats struct {
	Enabled       bool   `json:"enabled"`
	QueueDepth    int    `json:"queue_depth"`
	QueueCapacity int    `json:"queue_capacity"`
	Dropped       uint64 `json:"dropped"` // refused by a full or closed queue, or abandoned at shutdown
	Sent          uint64 `json:"sent"`    // delivered
	Errors        uint64 `json:"errors"`  // failed after the sink's retries
}

// queue is a bounded FIFO of events drained by one worker goroutine, the
// only place its sink's I/O happens. push never blocks.
type queue struct {
	name  string
	items chan engine.Event
	sink  sink
	log   zerolog.Logger

	mu     sync.RWMutex // guards closed against a push racing close(items)
	closed bool

	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once

	dropped, sent, failed atomic.Uint64
}

func startQueue(name string, size int, s sink, log zerolog.Logger) *queue {
	ctx, cancel := context.WithCancel(context.Background())
	q := &queue{
		name:   name,
		items:  make(chan engine.Event, size),
		sink:   s,
		log:    log.With().Str("export", name).Logger(),
		ctx:    ctx,
		cancel: cancel,
		done:   make(chan struct{}),
	}
	go q.run()
	return q
}

// push enqueues ev, or drops and counts it when the queue is full or closed.
// A nil queue (a disabled destination) ignores the event.
func (q *queue) push(ev engine.Event) {
	if q == nil {
		return
	}
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		q.dropped.Add(1)
		return
	}
	select {
	case q.items <- ev:
	default:
		q.dropped.Add(1)
	}
}

// run delivers events until the queue is closed and empty. It logs only
// when delivery starts failing and when it recovers, not per event, so a
// dead collector cannot flood the log.
func (q *queue) run() {
	defer close(q.done)
	defer q.sink.close()
	failing := false
	for ev := range q.items {
		if q.ctx.Err() != nil {
			q.dropped.Add(1)
			continue
		}
		err := q.sink.deliver(q.ctx, ev)
		switch {
		case err == nil:
			q.sent.Add(1)
			if failing {
				failing = false
				q.log.Info().Msg("export delivery recovered")
			}
		case q.ctx.Err() != nil:
			q.dropped.Add(1)
		default:
			q.failed.Add(1)
			if !failing {
				failing = true
				q.log.Warn().Err(err).Msg("export delivery failing; events are being lost")
			}
		}
	}
}

// close stops intake and gives the worker until timeout to deliver the
// backlog; whatever is left is abandoned and counted as dropped. The final
// counts are logged. Safe to call more than once; a nil queue is a no-op.
func (q *queue) close(timeout time.Duration) {
	if q == nil {
		return
	}
	q.closeOnce.Do(func() {
		q.mu.Lock()
		q.closed = true
		close(q.items)
		q.mu.Unlock()
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		select {
		case <-q.done:
		case <-timer.C:
			q.cancel()
			select {
			case <-q.done:
			case <-time.After(stopGrace):
				q.log.Error().Msg("export worker did not stop")
			}
		}
		q.cancel()
		st := q.stats()
		lvl := zerolog.InfoLevel
		if st.Dropped > 0 || st.Errors > 0 {
			lvl = zerolog.WarnLevel
		}
		q.log.WithLevel(lvl).Uint64("dropped", st.Dropped).Uint64("sent", st.Sent).
			Uint64("errors", st.Errors).Msg("export queue closed")
	})
}

func (q *queue) stats() QueueStats {
	if q == nil {
		return QueueStats{}
	}
	return QueueStats{
		Enabled:       true,
		QueueDepth:    len(q.items),
		QueueCapacity: cap(q.items),
		Dropped:       q.dropped.Load(),
		Sent:          q.sent.Load(),
		Errors:        q.failed.Load(),
	}
}

// sleepCtx waits for d or until ctx ends, whichever is first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
