package ledger

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// A busy gateway's agent and principal (every call through the connector
// charges the org's model and tenant) stay cached with the thousands of
// charges the bundled pack's budgets allow them, rather than being summed
// by SQLite on every decision; the cache's charges together stay within
// cacheTotal, the least recently used subject dropped first, and its count
// of them stays exact.
func TestChargeCacheKeepsBusySubjects(t *testing.T) {
	c := newChargeCache()
	one := engine.Totals{Objects: 1}
	busy := make([]cachedCharge, 2000)
	for i := range busy {
		busy[i] = cachedCharge{atMS: int64(i), Totals: one}
	}
	ak := cacheKey(engine.ScopeAgent, "gateway:acme/gpt-4o")
	c.load(ak, 0, busy)
	c.add([]engine.Charge{{SessionID: "s", AgentID: "gateway:acme/gpt-4o", At: time.UnixMilli(5000), Totals: one}})
	got, ok := c.usage(ak, 0)
	require.True(t, ok, "2,001 charges are cached")
	assert.Equal(t, int64(2001), got.Objects)
	got, ok = c.usage(ak, 1000)
	require.True(t, ok)
	assert.Equal(t, int64(1001), got.Objects, "charges before the window are dropped")
	assert.Equal(t, 1001, c.total)

	full := cacheTotal / cacheCharges
	for i := range full {
		c.load(fmt.Sprint(i), 0, make([]cachedCharge, cacheCharges))
	}
	assert.LessOrEqual(t, c.total, cacheTotal)
	_, ok = c.usage(ak, 1000)
	assert.False(t, ok, "the least recently used subject made room")
	_, ok = c.usage(fmt.Sprint(full-1), 0)
	assert.True(t, ok)
	n := 0
	for el := c.lru.Front(); el != nil; el = el.Next() {
		n += len(el.Value.(*cachedSession).charges)
	}
	assert.Equal(t, n, c.total, "the count of cached charges is exact")
	c.clear()
	assert.Zero(t, c.total)
}

// Money sums that would overflow int64 are not made in memory: the subject
// is left to SQLite, whose SUM refuses them (the decision fails closed).
func TestChargeCacheMoneyOverflow(t *testing.T) {
	big := []cachedCharge{{atMS: 1, currency: "EUR", amount: math.MaxInt64/2 + 1},
		{atMS: 2, currency: "EUR", amount: math.MaxInt64/2 + 1}}
	_, ok := sumCharges(big)
	assert.False(t, ok)
	u, ok := sumCharges(big[:1])
	assert.True(t, ok)
	assert.Equal(t, engine.Amounts{"EUR": math.MaxInt64/2 + 1}, u.Money)

	c := newChargeCache()
	c.load(sk("rich"), 0, big[:1])
	c.addTo(sk("rich"), engine.Charge{SessionID: "rich", At: time.UnixMilli(2), Currency: "EUR", Amount: math.MaxInt64/2 + 1})
	_, ok = c.usage(sk("rich"), 0)
	assert.False(t, ok, "the overflow is left to SQLite")
	_, cached := c.sessions[sk("rich")]
	assert.False(t, cached)
	assert.Zero(t, c.total)
}

// A cached subject's sums, kept as charges come and leave the window, are
// always those of its charges in the window summed afresh: money of a
// currency whose charges all left is gone, not 0.
func TestChargeCacheRunningSums(t *testing.T) {
	c := newChargeCache()
	key := sk("run")
	_, ok := c.load(key, -1000, nil) // a window opening before the first charge
	require.True(t, ok)
	var kept []cachedCharge
	currencies := []string{"EUR", "USD", "JPY"}
	for i := range 500 {
		ch := engine.Charge{SessionID: "run", At: time.UnixMilli(int64(10 * i)),
			Totals: engine.Totals{Deletes: int64(i % 2), ExternalSends: int64(i % 3), Objects: int64(i % 7)}}
		if i%4 != 0 {
			ch.Currency, ch.Amount = currencies[i%3], int64(i*1000)
		}
		c.add([]engine.Charge{ch})
		kept = append(kept, cachedCharge{atMS: ch.At.UnixMilli(), Totals: ch.Totals, currency: ch.Currency, amount: ch.Amount})
		since := int64(10*i - 300) // a window of 30 charges
		got, ok := c.usage(key, since)
		require.True(t, ok)
		for len(kept) > 0 && kept[0].atMS < since {
			kept = kept[1:]
		}
		want, _ := sumCharges(kept)
		require.Equal(t, want, got, "after charge %d", i)
	}
	got, _ := c.usage(key, 10*500)
	assert.Equal(t, engine.Usage{Money: engine.Amounts{}}, got, "every charge left the window")
	got.Money["EUR"] = 1
	again, _ := c.usage(key, 10*500)
	assert.Empty(t, again.Money, "a caller cannot change the cached sums")
}

// A subject found with more charges than the cache keeps is summed by
// SQLite for its next tooManySkips reads without its charges being read
// first, then tried again; the notes stay bounded.
func TestChargeCacheTooMany(t *testing.T) {
	c := newChargeCache()
	assert.False(t, c.tooMany("a"))
	c.markTooMany("a")
	for i := range tooManySkips {
		require.True(t, c.tooMany("a"), "read %d", i)
	}
	assert.False(t, c.tooMany("a"), "tried again")
	for i := range cacheSessions + 1 {
		c.markTooMany(fmt.Sprint(i))
	}
	assert.LessOrEqual(t, len(c.big), cacheSessions)
	c.clear()
	assert.Empty(t, c.big)
}
