package engine

import (
	"errors"
	"sync"
	"time"
)

// errSessionBusy is why a decision that waited for its budget subjects'
// locks until its deadline is denied: earlier decisions of its session,
// agent or principal still run.
var errSessionBusy = errors.New("earlier decisions of the session, agent or principal were still running at the decision's deadline")

// sessionLocks serialises the decisions of one budget subject (a session,
// an agent, a principal) so that reading its totals, evaluating and
// charging happen as one step: concurrent requests can never together
// exceed a budget. Idle locks are dropped.
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

// lockAll acquires the locks named, in the order given (callers sort them,
// so that no two decisions wait for each other), and returns their
// release. It waits until deadline at most for all of them together.
func (s *sessionLocks) lockAll(names []string, deadline time.Time) (func(), error) {
	releases := make([]func(), 0, len(names))
	releaseAll := func() {
		for i := len(releases) - 1; i >= 0; i-- {
			releases[i]()
		}
	}
	for _, name := range names {
		release, err := s.lock(name, deadline)
		if err != nil {
			releaseAll()
			return nil, err
		}
		releases = append(releases, release)
	}
	return releaseAll, nil
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
