package ledger

import (
	"container/list"
	"maps"
	"sync"

	"github.com/svc-dev/svc/engine"
)

// The cache holds at most cacheTotal charges of 56 bytes: 28 MiB, and
// cacheSessions subjects.
const (
	// cacheSessions bounds how many subjects' charges (a session's, an
	// agent's, a principal's) are kept in memory; the least recently used
	// subject is dropped first and read from SQLite again on its next
	// decision. A decision reads up to three subjects, so 1,000 active
	// sessions each acting as its own agent for its own principal are
	// 3,000 subjects: at 2,048 they evicted each other and a third of the
	// reads went to SQLite (10 % of svc's CPU at 16 clients in
	// scripts/bench). A subject without charges costs about 250 bytes
	// (its key included), 4 MiB at the bound; cacheTotal bounds the
	// charges.
	cacheSessions = 16 * 1024
	// cacheCharges bounds the charges kept for one subject (3.5 MiB); a
	// subject with more is not cached and is summed by SQLite each time, an
	// index scan of all its charges in the window (milliseconds for
	// thousands). It is far above the bundled pack's object budgets (200 per
	// session, 1,000 per agent, 2,000 per principal) because every call
	// through the gateway connector charges the same agent (the org's
	// model) and principal, whose budgets an operator raises: at 256, a
	// gateway's agent fell out of the cache within minutes and every
	// decision then summed its charges in SQLite
	// (BenchmarkConnectorAddedLatency: 7.9 ms of engine CPU per decision at
	// 3,000 charges). A cached subject's sums are kept as charges come and
	// go, so a decision's read costs the same at 10 charges as at 60,000.
	cacheCharges = 64 * 1024
	// cacheTotal bounds the charges of all cached subjects together; past
	// it, least recently used subjects are dropped.
	cacheTotal = 512 * 1024
	// tooManySkips is how many reads of a subject found with more than
	// cacheCharges charges go straight to SQLite's sums, rather than read
	// its cacheCharges+1 charges first, before it is tried again.
	tooManySkips = 1024
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
	total    int                      // charges of all cached subjects
	big      map[string]int           // subjects with too many charges → reads left to skip
}

// cachedSession is a session's charges made at or after since, oldest
// first.
type cachedSession struct {
	id      string
	since   int64 // unix ms
	charges []cachedCharge
	sum     engine.Usage // of charges, kept as they come and go
}

type cachedCharge struct {
	atMS int64
	engine.Totals
	currency string
	amount   int64
}

func newChargeCache() *chargeCache {
	return &chargeCache{lru: list.New(), sessions: map[string]*list.Element{}, big: map[string]int{}}
}

// tooMany reports whether the subject was found with too many charges to
// cache within its last tooManySkips reads, counting this one.
func (c *chargeCache) tooMany(session string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	left, ok := c.big[session]
	if !ok {
		return false
	}
	if left <= 1 {
		delete(c.big, session)
	} else {
		c.big[session] = left - 1
	}
	return true
}

// markTooMany notes a subject found with more than cacheCharges charges.
func (c *chargeCache) markTooMany(session string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.big) >= cacheSessions {
		clear(c.big)
	}
	c.big[session] = tooManySkips
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
		s.sum.Deletes -= s.charges[drop].Deletes
		s.sum.ExternalSends -= s.charges[drop].ExternalSends
		s.sum.Objects -= s.charges[drop].Objects
		if ch := s.charges[drop]; ch.amount > 0 {
			if s.sum.Money[ch.currency] -= ch.amount; s.sum.Money[ch.currency] == 0 {
				delete(s.sum.Money, ch.currency) // as sumCharges of the charges left would
			}
		}
		drop++
	}
	s.charges, s.since = s.charges[drop:], sinceMS
	c.total -= drop
	u := s.sum
	u.Money = maps.Clone(s.sum.Money)
	return u, true
}

// sumCharges adds up charges; ok is false when a sum overflows int64, which
// SQLite's SUM refuses (cacheCharges amounts of up to MaxAmount can).
func sumCharges(charges []cachedCharge) (engine.Usage, bool) {
	u := engine.Usage{Money: engine.Amounts{}}
	for _, ch := range charges {
		if !addCharge(&u, ch) {
			return engine.Usage{}, false
		}
	}
	return u, true
}

// addCharge adds ch to u; false when a sum overflows int64 (u is then
// partly changed).
func addCharge(u *engine.Usage, ch cachedCharge) bool {
	var ok1, ok2, ok3 bool
	u.Deletes, ok1 = addInt64(u.Deletes, ch.Deletes)
	u.ExternalSends, ok2 = addInt64(u.ExternalSends, ch.ExternalSends)
	u.Objects, ok3 = addInt64(u.Objects, ch.Objects)
	if !ok1 || !ok2 || !ok3 {
		return false
	}
	if ch.amount > 0 {
		sum, ok := addInt64(u.Money[ch.currency], ch.amount)
		if !ok {
			return false
		}
		u.Money[ch.currency] = sum
	}
	return true
}

// addInt64 is a + b, and false when it overflows.
func addInt64(a, b int64) (int64, bool) {
	sum := a + b
	return sum, (b >= 0) == (sum >= a)
}

// load caches the subject's charges at or after sinceMS, as just read from
// SQLite, oldest first, and returns their sum; ok is false, and nothing is
// cached, when there are more than cacheCharges or a sum overflows.
func (c *chargeCache) load(session string, sinceMS int64, charges []cachedCharge) (engine.Usage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(session)
	if len(charges) > cacheCharges {
		return engine.Usage{}, false
	}
	sum, ok := sumCharges(charges)
	if !ok {
		return engine.Usage{}, false
	}
	u := sum
	u.Money = maps.Clone(sum.Money)
	c.sessions[session] = c.lru.PushFront(&cachedSession{id: session, since: sinceMS, charges: charges, sum: sum})
	c.total += len(charges)
	c.evict()
	return u, true
}

// evict drops the least recently used subjects while the cache is past
// its bounds.
func (c *chargeCache) evict() {
	for c.lru.Len() > cacheSessions || c.total > cacheTotal {
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
		cc := cachedCharge{atMS: at, Totals: ch.Totals, currency: ch.Currency, amount: ch.Amount}
		if !addCharge(&s.sum, cc) {
			c.remove(key) // SQLite sums it, and refuses the overflow
			return
		}
		s.charges = append(s.charges, cc)
		c.total++
		c.evict()
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
	clear(c.big)
	c.total = 0
}

func (c *chargeCache) remove(session string) {
	if el, ok := c.sessions[session]; ok {
		c.total -= len(el.Value.(*cachedSession).charges)
		c.lru.Remove(el)
		delete(c.sessions, session)
	}
}
