package engine

import (
	"errors"
	"sync"
	"time"
)

// errSessionBusy is why a decision that waited for its session's lock until
// its deadline is denied: earlier decisions of the session still run.
var errSessionBusy = errors.New("earlier decisions of the session were still running at the decision's deadline")

// sessionLocks serialises the decisions of one session so that reading its
// totals, evaluating and charging happen as one step: concurrent requests of
// a session can never together exceed a budget. Idle locks are dropped.
type sessionLocks struct {
	mu    sync.Mutex
	locks map[string]*sessionLock
}

// sessionLock is taken by putting a token in its one-slot channel, so that
// a wait can end at a deadline; waiters take it in arrival order.
type sessionLock struct {
	token chan struct{}
	users int
}

func newSessionLocks() *sessionLocks {
	return &sessionLocks{locks: map[string]*sessionLock{}}
}

// lock acquires the session's lock and returns its release function. It
// waits until deadline at most (for ever when deadline is zero), then
// fails with errSessionBusy.
func (s *sessionLocks) lock(session string, deadline time.Time) (func(), error) {
	s.mu.Lock()
	l, ok := s.locks[session]
	if !ok {
		l = &sessionLock{token: make(chan struct{}, 1)}
		s.locks[session] = l
	}
	l.users++
	s.mu.Unlock()
	if err := l.acquire(deadline); err != nil {
		s.leave(session, l)
		return nil, err
	}
	return func() {
		<-l.token
		s.leave(session, l)
	}, nil
}

// leave drops one user of the session's lock, and the lock with its last.
func (s *sessionLocks) leave(session string, l *sessionLock) {
	s.mu.Lock()
	l.users--
	if l.users == 0 {
		delete(s.locks, session)
	}
	s.mu.Unlock()
}

func (l *sessionLock) acquire(deadline time.Time) error {
	select {
	case l.token <- struct{}{}:
		return nil
	default:
	}
	if deadline.IsZero() {
		l.token <- struct{}{}
		return nil
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case l.token <- struct{}{}:
		return nil
	case <-timer.C:
		return errSessionBusy
	}
}
