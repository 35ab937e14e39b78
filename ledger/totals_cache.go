package ledger

import (
	"container/list"
	"sync"

	"github.com/svc-dev/svc/engine"
)

// The cache holds at most cacheSessions × cacheCharges charges of 56 bytes:
// 28 MiB.
const (
	// cacheSessions bounds how many subjects' charges (a session's, an
	// agent's, a principal's) are kept in memory; the least recently used
	// subject is dropped first and read from SQLite again on its next
	// decision.
	cacheSessions = 2048
	// cacheCharges bounds the charges kept for one subject (the bundled
	// pack's session object budget allows 200 per window); a subject with
	// more is not cached and is summed by SQLite each time. At most
	// 256 × MaxAmount × 10 000 = 2.56 × 10^18 units of money are summed in
	// memory: no int64 overflow.
	cacheCharges = 256
)

// cacheKey is the cache's key of the subject id of scope.
func cacheKey(scope engine.Scope, id string) string {
	return string(scope) + "\x00" + id
}

// chargeKeys are the cache keys of the subjects c is counted against.
func chargeKeys(c engine.Charge) []string {
	keys := []string{cacheKey(engine.ScopeSession, c.SessionID), cacheKey(engine.ScopeAgent, c.AgentID)}
	if c.PrincipalID != "" {
		keys = append(keys, cacheKey(engine.ScopePrincipal, c.PrincipalID))
	}
	return keys
}

// chargeCache keeps, for recently used subjects (sessions, agents and
// principals, by cacheKey), their charges made at or after a point in
// time, so that a decision's budget read is a sum in memory rather than a
// SQLite query. It is filled from SQLite on a miss and
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
	currency string
	amount   int64
}

func newChargeCache() *chargeCache {
	return &chargeCache{lru: list.New(), sessions: map[string]*list.Element{}}
}

// usage returns the sum of the subject's charges at or after sinceMS, if
// the cache holds every such charge.
func (c *chargeCache) usage(session string, sinceMS int64) (engine.Usage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.sessions[session]
	if !ok {
		return engine.Usage{}, false
	}
	s := el.Value.(*cachedSession)
	if sinceMS < s.since {
		return engine.Usage{}, false
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
func sumCharges(charges []cachedCharge) engine.Usage {
	u := engine.Usage{Money: engine.Amounts{}}
	for _, ch := range charges {
		u.Deletes += ch.Deletes
		u.ExternalSends += ch.ExternalSends
		u.Objects += ch.Objects
		if ch.amount > 0 {
			u.Money[ch.currency] += ch.amount
		}
	}
	return u
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

// add records committed charges of cached subjects.
func (c *chargeCache) add(charges []engine.Charge) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range charges {
		for _, key := range chargeKeys(ch) {
			c.addTo(key, ch)
		}
	}
}

// addTo records ch, committed, for the subject key if it is cached.
func (c *chargeCache) addTo(key string, ch engine.Charge) {
	el, ok := c.sessions[key]
	if !ok {
		return
	}
	s := el.Value.(*cachedSession)
	at := ch.At.UnixMilli()
	n := len(s.charges)
	if n >= cacheCharges || (n > 0 && at < s.charges[n-1].atMS) {
		c.remove(key) // too many, or out of order: SQLite sums it
		return
	}
	if at >= s.since {
		s.charges = append(s.charges, cachedCharge{atMS: at, Totals: ch.Totals, currency: ch.Currency, amount: ch.Amount})
	}
}

// forget drops the subjects (cache keys) given, whose charges are no
// longer known.
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
