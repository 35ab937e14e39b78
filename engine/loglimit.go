package engine

import (
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// LogPeriod is how often a LogLimiter lets a recurring line through.
const LogPeriod = 10 * time.Second

// LogLimiter rate-limits log lines that recur while a fault lasts (a full
// disk fails every decision alike): per key, the first line is logged, the
// next ones are counted and left out until LogPeriod has passed, and the
// next line logged then carries the count of those left out ("repeated").
// It is safe for concurrent use; keys are a fixed set of messages.
type LogLimiter struct {
	now   func() time.Time
	mu    sync.Mutex
	lines map[string]*logRun
}

// logRun is the state of one key: when its last line was logged and how
// many were left out since.
type logRun struct {
	logged  time.Time
	omitted int
}

// NewLogLimiter returns a LogLimiter on the wall clock.
func NewLogLimiter() *LogLimiter {
	return &LogLimiter{now: time.Now, lines: map[string]*logRun{}}
}

// Event returns ev, with the count of the lines of key left out since the
// last one logged, when a line of key may be logged now; else it discards
// ev, counts the line and returns nil, on which zerolog's methods do
// nothing.
func (l *LogLimiter) Event(key string, ev *zerolog.Event) *zerolog.Event {
	if ev == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	run, ok := l.lines[key]
	switch {
	case !ok:
		l.lines[key] = &logRun{logged: now}
		return ev
	case now.Sub(run.logged) < LogPeriod:
		run.omitted++
		ev.Discard()
		return nil
	}
	if run.omitted > 0 {
		ev = ev.Int("repeated", run.omitted)
	}
	run.logged, run.omitted = now, 0
	return ev
}
