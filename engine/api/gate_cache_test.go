package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/svc-dev/svc/engine"
)

func TestGateCacheWindowAndRevocation(t *testing.T) {
	ca := newTestCA(t)
	p := newPortal(t, ca, activeGateA)
	g, clk := newGate(t, gateConfig(p.srv.URL, ca))
	ctx := context.Background()
	step := func(advance time.Duration, declared string, wantCalls int32) error {
		t.Helper()
		clk.advance(advance)
		_, err := g.Authenticate(ctx, testCredential, declared)
		assert.Equal(t, wantCalls, p.calls.Load())
		return err
	}
	require.NoError(t, step(0, "gate-a", 1))
	require.NoError(t, step(10*time.Second, "gate-a", 1))
	requireGateErr(t, step(0, "gate-b", 1), engine.EFORBIDDEN, ReasonGateMismatch)
	requireGateErr(t, step(0, "", 1), engine.EFORBIDDEN, ReasonGateNotDeclared)

	p.set(answer(http.StatusOK, `{"active":false}`)) // revoked at the portal
	require.NoError(t, step(19*time.Second, "gate-a", 1), "still inside the 30 s window")
	requireGateErr(t, step(time.Second, "gate-a", 2), engine.EUNAUTHORIZED, "")
	requireGateErr(t, step(0, "gate-a", 3), engine.EUNAUTHORIZED, "") // the refusal was not cached

	for k := range g.cache.entries {
		assert.NotContains(t, k, testCredential)
	}
}

func TestGateCacheKeyedByHash(t *testing.T) {
	ca := newTestCA(t)
	p := newPortal(t, ca, activeGateA)
	g, _ := newGate(t, gateConfig(p.srv.URL, ca))
	_, err := g.Authenticate(context.Background(), testCredential, "gate-a")
	require.NoError(t, err)
	sum := sha256.Sum256([]byte(testCredential))
	require.Len(t, g.cache.entries, 1)
	assert.Contains(t, g.cache.entries, hex.EncodeToString(sum[:]))
}

func TestGateCacheCappedByExp(t *testing.T) {
	ca := newTestCA(t)
	p := newPortal(t, ca, nil)
	g, clk := newGate(t, gateConfig(p.srv.URL, ca))
	exp := clk.now().Add(5 * time.Second).Unix()
	p.set(answer(http.StatusOK, `{"active":true,"gate":"gate-a","exp":`+strconv.FormatInt(exp, 10)+`}`))
	_, err := g.Authenticate(context.Background(), testCredential, "gate-a")
	require.NoError(t, err)
	clk.advance(6 * time.Second)
	_, err = g.Authenticate(context.Background(), testCredential, "gate-a")
	requireGateErr(t, err, engine.EUNAUTHORIZED, "") // asked again, and the answer's exp has passed
	assert.Equal(t, int32(2), p.calls.Load())
}

func TestGateNoCacheAndNegativeAnswers(t *testing.T) {
	tests := []struct {
		name         string
		cacheSeconds int
		h            http.HandlerFunc
		wantCode     string
	}{
		{name: "cache 0 asks every time", cacheSeconds: 0, h: activeGateA},
		{name: "inactive not cached", cacheSeconds: 30, h: answer(http.StatusOK, `{"active":false}`), wantCode: engine.EUNAUTHORIZED},
		{name: "portal error not cached", cacheSeconds: 30, h: answer(http.StatusBadGateway, ``), wantCode: engine.EUNAUTHORIZED},
	}
	ca := newTestCA(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPortal(t, ca, tt.h)
			cfg := gateConfig(p.srv.URL, ca)
			cfg.CacheSeconds = tt.cacheSeconds
			g, _ := newGate(t, cfg)
			for i := range 3 {
				_, err := g.Authenticate(context.Background(), testCredential, "gate-a")
				if tt.wantCode == "" {
					require.NoError(t, err)
				} else {
					requireGateErr(t, err, tt.wantCode, "")
				}
				assert.Equal(t, int32(i+1), p.calls.Load())
			}
		})
	}
}

func TestGateCacheEviction(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c := newGateCache(3)
	c.put("a", "gate-a", now.Add(time.Hour), now)
	c.put("b", "gate-b", now.Add(time.Second), now) // expires first
	c.put("c", "gate-c", now.Add(time.Hour), now)
	later := now.Add(2 * time.Second)
	c.put("d", "gate-d", later.Add(time.Hour), later)
	_, ok := c.get("a", later)
	assert.True(t, ok, "expired b goes before the oldest a")
	_, ok = c.get("b", later)
	assert.False(t, ok)
	c.put("e", "gate-e", later.Add(time.Hour), later)
	_, ok = c.get("a", later)
	assert.False(t, ok, "with nothing expired, the oldest goes")
	for _, k := range []string{"c", "d", "e"} {
		gate, ok := c.get(k, later)
		assert.True(t, ok, k)
		assert.Equal(t, "gate-"+k, gate)
	}
	assert.Len(t, c.entries, 3)
	assert.Equal(t, 3, c.order.Len())
}
