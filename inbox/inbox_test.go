package inbox

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/svc-dev/svc/engine"
)

var t0 = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)

func TestLimiterBurstThenOneEverySixSeconds(t *testing.T) {
	l := newLimiter()
	r := httptest.NewRequest("POST", "/ui/signin", nil)
	r.RemoteAddr = "192.0.2.7:5555"
	for i := range signinBurst {
		ok, _ := l.allow(r, t0)
		require.True(t, ok, "attempt %d of the burst", i+1)
	}
	ok, wait := l.allow(r, t0)
	require.False(t, ok)
	assert.Equal(t, signinEvery, wait)
	other := httptest.NewRequest("POST", "/ui/signin", nil)
	other.RemoteAddr = "192.0.2.8:5555"
	ok, _ = l.allow(other, t0)
	assert.True(t, ok, "another address has its own allowance")
	r.RemoteAddr = "192.0.2.7:6666"
	ok, _ = l.allow(r, t0.Add(signinEvery-time.Millisecond))
	assert.False(t, ok, "the port is not part of the address")
	ok, _ = l.allow(r, t0.Add(signinEvery+10*time.Millisecond))
	assert.True(t, ok, "one attempt more after 6 s")
}

func TestLimiterForgetsRefilledAddresses(t *testing.T) {
	l := newLimiter()
	r := httptest.NewRequest("POST", "/ui/signin", nil)
	for i := range maxLimited {
		r.RemoteAddr = "10.0." + itoa(i/256) + "." + itoa(i%256) + ":1"
		ok, _ := l.allow(r, t0)
		require.True(t, ok)
	}
	r.RemoteAddr = "192.0.2.1:1"
	ok, _ := l.allow(r, t0)
	assert.False(t, ok, "the table is full of addresses still limited")
	ok, _ = l.allow(r, t0.Add(time.Duration(signinBurst)*signinEvery))
	assert.True(t, ok, "refilled addresses are forgotten")
	assert.Less(t, len(l.buckets), maxLimited)
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestSessionCookies(t *testing.T) {
	s := newSessions(time.Hour)
	se, err := s.open("tok", t0)
	require.NoError(t, err)
	value := s.cookieValue(se)
	got, ok := s.lookup(value, t0.Add(time.Minute))
	require.True(t, ok)
	assert.Equal(t, "tok", got.token)
	assert.NotContains(t, value, "tok")

	parts := strings.Split(value, ".")
	// Another id: its first character changed (to "x", or to "y" when it is
	// an "x" already, so that the value does differ).
	other := "x"
	if parts[0][0] == 'x' {
		other = "y"
	}
	for name, bad := range map[string]string{
		"later expiry":    parts[0] + ".9999999999." + parts[2],
		"other id":        other + parts[0][1:] + "." + parts[1] + "." + parts[2],
		"no signature":    parts[0] + "." + parts[1],
		"empty signature": parts[0] + "." + parts[1] + ".",
		"empty":           "",
	} {
		_, ok := s.lookup(bad, t0)
		assert.False(t, ok, name)
	}
	_, ok = s.lookup(value, t0.Add(time.Hour))
	assert.False(t, ok, "expired")

	se, err = s.open("tok", t0)
	require.NoError(t, err)
	s.end(se.id)
	_, ok = s.lookup(s.cookieValue(se), t0)
	assert.False(t, ok, "ended")
}

func TestSessionsAreBounded(t *testing.T) {
	s := newSessions(time.Hour)
	for range maxSessions {
		_, err := s.open("tok", t0)
		require.NoError(t, err)
	}
	_, err := s.open("tok", t0)
	require.ErrorIs(t, err, errTooManySessions)
	_, err = s.open("tok", t0.Add(time.Hour))
	require.NoError(t, err, "expired sessions make room")
}

func TestLocalNext(t *testing.T) {
	for next, want := range map[string]string{
		"/ui/holds/abc":            "/ui/holds/abc",
		"/ui/inbox?status=all":     "/ui/inbox?status=all",
		"":                         "/ui/inbox",
		"https://evil.example/ui/": "/ui/inbox",
		"//evil.example/ui/":       "/ui/inbox",
		"/ui/\\evil":               "/ui/inbox",
		"/v1/holds":                "/ui/inbox",
		"/ui/x\r\nSet-Cookie: a=b": "/ui/inbox",
	} {
		assert.Equal(t, want, localNext(next), next)
	}
}

func TestCookiesSecureUnderTLS(t *testing.T) {
	for name, tt := range map[string]struct {
		tls    bool
		public string
		secure bool
	}{
		"plain HTTP":            {},
		"TLS":                   {tls: true, secure: true},
		"https public URL":      {public: "https://svc.example.com", secure: true},
		"http public URL, TLS":  {tls: true, public: "http://svc.example.com", secure: true},
		"http public URL alone": {public: "http://svc.example.com"},
	} {
		t.Run(name, func(t *testing.T) {
			a := &App{cfg: Config{PublicURL: tt.public}}
			r := httptest.NewRequest("GET", "/ui/signin", nil)
			if tt.tls {
				r.TLS = &tls.ConnectionState{}
			}
			w := httptest.NewRecorder()
			a.setCookie(w, r, sessionCookie, "v", 60)
			c := w.Result().Cookies()[0]
			assert.Equal(t, tt.secure, c.Secure)
			assert.True(t, c.HttpOnly)
			assert.Equal(t, http.SameSiteStrictMode, c.SameSite)
		})
	}
}

// FuzzSessionCookie checks that no cookie value but the one issued opens
// the session, and that none makes lookup panic.
func FuzzSessionCookie(f *testing.F) {
	s := newSessions(time.Hour)
	se, err := s.open("tok", t0)
	require.NoError(f, err)
	issued := s.cookieValue(se)
	f.Add(issued)
	f.Add("")
	f.Add("a.b.c")
	f.Add(se.id + ".-1." + strings.Repeat("A", 43))
	parts := strings.Split(issued, ".")
	f.Add(parts[0] + ".0" + parts[1] + "." + parts[2])
	f.Add(parts[0] + ".+" + parts[1] + "." + parts[2])
	f.Fuzz(func(t *testing.T, value string) {
		got, ok := s.lookup(value, t0)
		if value != issued {
			assert.False(t, ok, "a cookie never issued")
			return
		}
		assert.True(t, ok)
		assert.Equal(t, se.id, got.id)
	})
}

func TestMoneyWords(t *testing.T) {
	for _, tt := range []struct {
		in   engine.Amounts
		want string
	}{
		{nil, ""},
		{engine.Amounts{"EUR": 40_000_000}, "4000 EUR"},
		{engine.Amounts{"USD": 125_000, "EUR": 5}, "0.0005 EUR, 12.5 USD"},
		{engine.Amounts{"EUR": -15_000}, "-1.5 EUR"},
	} {
		assert.Equal(t, tt.want, moneyWords(tt.in), "%v", tt.in)
	}
}

// TestEventStreamsAreBounded: past max open streams a subscription is
// refused (the handler answers 503), and a stream that ends frees its place.
func TestEventStreamsAreBounded(t *testing.T) {
	ev := NewEvents()
	_, cancel1, ok := ev.subscribe(2)
	require.True(t, ok)
	_, cancel2, ok := ev.subscribe(2)
	require.True(t, ok)
	_, _, ok = ev.subscribe(2)
	require.False(t, ok, "a third stream past the bound")
	cancel1()
	_, cancel3, ok := ev.subscribe(2)
	require.True(t, ok, "a place freed")
	cancel2()
	cancel3()
	_, cancel4, ok := ev.subscribe(0)
	require.True(t, ok, "0: unbounded")
	cancel4()
}
