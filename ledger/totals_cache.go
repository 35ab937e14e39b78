package ledger

import (
	"container/list"
	"sync"

	"github.com/svc-dev/svc/engine"
)

// The cache holds at most cacheSessions × cacheCharges charges of 32 bytes:
// 16 MiB.
const (
	// cacheSessions bounds how many sessions' charges are kept in memory;
	// the least recently used session is dropped first and read from
	// SQLite again on its next decision.
	cacheSessions = 2048
	// cacheCharges bounds the charges kept for one session (the bundled
	// pack's object budget allows 200 per window); a session with more is
	// not cached and is summed by SQLite each time.
	cacheCharges = 256
)

// chargeCache keeps, for recently used sessions, their charges made at or
// after a point in time, so that a decision's budget read is a sum in
// memory rather than a SQLite query. It is filled from SQLite on a miss and
// kept current by the audit commits that store charges (Audit.Commit is the
// only writer of charges): a committed charge is added before its caller
// learns of the commit, and a session whose commit failed is dropped, so the
// next read goes to SQLite. svc is the only writer of its database, so the
// cache cannot miss a charge written behind its back. It also relies on the
// engine.Budgets contract that a session's Totals and the commits of its
// charges never overlap (the engine's session lock): a miss that read
// SQLite while a commit of the same session added its charge could
// otherwise cache the read without that charge.
type chargeCache struct {
	mu       sync.Mutex
	lru      *list.List               // of *cachedSession, most recent first
	sessions map[string]*list.Element // session id → its lru element
}

// cachedSession is a session's charges made at or after since, oldest
// first.
type cachedSession struct {
	id      string
	since   int64 // unix ms
	charges []cachedCharge
}

type cachedCharge struct {
	atMS int64
	engine.Totals
}

func newChargeCache() *chargeCache {
	return &chargeCache{lru: list.New(), sessions: map[string]*list.Element{}}
}

// totals returns the sum of the session's charges at or after sinceMS, if
// the cache holds every such charge.
func (c *chargeCache) totals(session string, sinceMS int64) (engine.Totals, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.sessions[session]
	if !ok {
		return engine.Totals{}, false
	}
	s := el.Value.(*cachedSession)
	if sinceMS < s.since {
		return engine.Totals{}, false
	}
	c.lru.MoveToFront(el)
	drop := 0
	for drop < len(s.charges) && s.charges[drop].atMS < sinceMS {
		drop++
	}
	s.charges, s.since = s.charges[drop:], sinceMS
	return sumCharges(s.charges), true
}

// sumCharges adds up charges.
func sumCharges(charges []cachedCharge) engine.Totals {
	var t engine.Totals
	for _, ch := range charges {
		t.Deletes += ch.Deletes
		t.ExternalSends += ch.ExternalSends
		t.Objects += ch.Objects
	}
	return t
}

// load caches the session's charges at or after sinceMS, as just read from
// SQLite, oldest first.
func (c *chargeCache) load(session string, sinceMS int64, charges []cachedCharge) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(session)
	if len(charges) > cacheCharges {
		return
	}
	c.sessions[session] = c.lru.PushFront(&cachedSession{id: session, since: sinceMS, charges: charges})
	for c.lru.Len() > cacheSessions {
		c.remove(c.lru.Back().Value.(*cachedSession).id)
	}
}

// add records committed charges of cached sessions.
func (c *chargeCache) add(charges []engine.Charge) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range charges {
		el, ok := c.sessions[ch.SessionID]
		if !ok {
			continue
		}
		s := el.Value.(*cachedSession)
		at := ch.At.UnixMilli()
		n := len(s.charges)
		if n >= cacheCharges || (n > 0 && at < s.charges[n-1].atMS) {
			c.remove(ch.SessionID) // too many, or out of order: SQLite sums it
			continue
		}
		if at >= s.since {
			s.charges = append(s.charges, cachedCharge{atMS: at, Totals: ch.Totals})
		}
	}
}

// forget drops the given sessions, whose charges are no longer known.
func (c *chargeCache) forget(sessions []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range sessions {
		c.remove(id)
	}
}

// clear drops every session.
func (c *chargeCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Init()
	clear(c.sessions)
}

func (c *chargeCache) remove(session string) {
	if el, ok := c.sessions[session]; ok {
		c.lru.Remove(el)
		delete(c.sessions, session)
	}
}
