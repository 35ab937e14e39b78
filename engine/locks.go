package engine

import "sync"

// sessionLocks serialises the decisions of one session so that reading its
// totals, evaluating and charging happen as one step: concurrent requests of
// a session can never together exceed a budget. Idle locks are dropped.
type sessionLocks struct {
	mu    sync.Mutex
	locks map[string]*sessionLock
}

type sessionLock struct {
	sync.Mutex
	users int
}

func newSessionLocks() *sessionLocks {
	return &sessionLocks{locks: map[string]*sessionLock{}}
}

// lock acquires the session's lock and returns its release function.
func (s *sessionLocks) lock(session string) func() {
	s.mu.Lock()
	l, ok := s.locks[session]
	if !ok {
		l = &sessionLock{}
		s.locks[session] = l
	}
	l.users++
	s.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		s.mu.Lock()
		l.users--
		if l.users == 0 {
			delete(s.locks, session)
		}
		s.mu.Unlock()
	}
}
