package ledger

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/svc-dev/svc/engine"
)

// The cache stays within its bounds: the least recently used session goes
// first, and a session with more charges than the cap is not kept (its
// reads go to SQLite).
func TestChargeCacheBounds(t *testing.T) {
	c := newChargeCache()
	for i := range cacheSessions + 10 {
		c.load(fmt.Sprint(i), 0, nil)
	}
	assert.Equal(t, cacheSessions, c.lru.Len())
	_, ok := c.usage("0", 0)
	assert.False(t, ok, "the oldest session was dropped")
	_, ok = c.usage(fmt.Sprint(cacheSessions+9), 0)
	assert.True(t, ok)

	at := time.UnixMilli(1000)
	one := engine.Totals{Objects: 1}
	c.load(sk("big"), 0, make([]cachedCharge, cacheCharges))
	c.add([]engine.Charge{{SessionID: "big", At: at, Totals: one}})
	_, ok = c.usage(sk("big"), 0)
	assert.False(t, ok, "past the cap the session is left to SQLite")

	c.load(sk("s"), 0, []cachedCharge{{atMS: 2000, Totals: one}})
	c.add([]engine.Charge{{SessionID: "s", At: at, Totals: one}})
	_, ok = c.usage(sk("s"), 0)
	assert.False(t, ok, "a charge older than the last is out of order: dropped")

	c.load(sk("t"), 0, nil)
	c.add([]engine.Charge{{SessionID: "t", At: at, Totals: one}})
	got, ok := c.usage(sk("t"), 500)
	assert.True(t, ok)
	assert.Equal(t, one, got.Totals)
	_, ok = c.usage(sk("t"), 0)
	assert.False(t, ok, "a wider window than the one cached is read from SQLite")
	c.clear()
	assert.Zero(t, c.lru.Len())
}

// sk is the cache key of a session.
func sk(id string) string { return cacheKey(engine.ScopeSession, id) }
