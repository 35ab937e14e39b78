package inbox

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Sign-in rate limit: each client address may try signinBurst sign-ins at
// once, then one every signinEvery.
const (
	signinBurst = 10
	signinEvery = 6 * time.Second
	// maxLimited bounds the addresses tracked; when it is reached the
	// addresses whose allowance is full again are forgotten, and while it
	// stays reached every new address is refused.
	maxLimited = 10000
)

// limiter is a token bucket per client address.
type limiter struct {
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newLimiter() *limiter { return &limiter{buckets: map[string]*bucket{}} }

// allow takes one attempt of the client of r at now, or reports how long
// it must wait for one.
func (l *limiter) allow(r *http.Request, now time.Time) (bool, time.Duration) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[host]
	if !ok {
		if len(l.buckets) >= maxLimited && !l.forgetFull(now) {
			return false, signinEvery
		}
		b = &bucket{tokens: signinBurst, at: now}
		l.buckets[host] = b
	}
	b.tokens = min(signinBurst, b.tokens+now.Sub(b.at).Seconds()/signinEvery.Seconds())
	b.at = now
	if b.tokens < 1 {
		return false, time.Duration((1 - b.tokens) * float64(signinEvery))
	}
	b.tokens--
	return true, 0
}

// forgetFull drops the buckets that have refilled by now and reports
// whether any was dropped.
func (l *limiter) forgetFull(now time.Time) bool {
	n := len(l.buckets)
	for host, b := range l.buckets {
		if b.tokens+now.Sub(b.at).Seconds()/signinEvery.Seconds() >= signinBurst {
			delete(l.buckets, host)
		}
	}
	return len(l.buckets) < n
}
