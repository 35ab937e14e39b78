package engine

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testCredential = "cred-0123456789-secret"

// testCA is a certificate authority made for one test; path holds its PEM.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	path string
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "svc test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	return &testCA{cert: cert, key: key, path: path}
}

// serverCert issues a certificate for the loopback names.
func (ca *testCA) serverCert(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "portal"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// portal is a real introspection endpoint on loopback that counts its calls
// and records the last request.
type portal struct {
	srv   *httptest.Server
	calls atomic.Int32
	mu    sync.Mutex
	h     http.HandlerFunc
	last  seenRequest
}

type seenRequest struct {
	method, contentType, accept, auth, body string
}

// newPortal serves h over TLS with a certificate of ca, or over plain http
// when ca is nil.
func newPortal(t *testing.T, ca *testCA, h http.HandlerFunc) *portal {
	t.Helper()
	p := &portal{h: h}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	p.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	if ca == nil {
		p.srv.Start()
	} else {
		p.srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.serverCert(t)}}
		p.srv.StartTLS()
	}
	t.Cleanup(p.srv.Close)
	return p
}

func (p *portal) serve(w http.ResponseWriter, r *http.Request) {
	p.calls.Add(1)
	body, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	p.last = seenRequest{r.Method, r.Header.Get("Content-Type"), r.Header.Get("Accept"),
		r.Header.Get("Authorization"), string(body)}
	h := p.h
	p.mu.Unlock()
	h(w, r)
}

func (p *portal) set(h http.HandlerFunc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.h = h
}

func (p *portal) seen() seenRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func answer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

var activeGateA = answer(http.StatusOK, `{"active":true,"gate":"gate-a","scope":"decide"}`)

// blocking answers activeGateA once release is closed, nothing if the client
// goes away first.
func blocking(release <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
			activeGateA(w, r)
		case <-r.Context().Done():
		}
	}
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func gateConfig(url string, ca *testCA) GateConfig {
	return GateConfig{URL: url, CABundle: ca.path, CacheSeconds: 30, Timeout: 2 * time.Second}
}

func newGate(t *testing.T, cfg GateConfig) (*Introspector, *fakeClock) {
	t.Helper()
	g, err := NewIntrospector(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	g.Now = clk.now
	return g, clk
}

// requireGateErr checks an *Error's code and reason, and that it never
// carries the credential.
func requireGateErr(t *testing.T, err error, code, reason string) {
	t.Helper()
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, code, e.Code)
	assert.Equal(t, statusOf(code), map[string]int{EUNAUTHORIZED: 401, EFORBIDDEN: 403}[code])
	if code == EUNAUTHORIZED {
		assert.Equal(t, "unauthorized", e.Name)
		assert.Nil(t, e.Fields)
	} else {
		assert.Equal(t, map[string]any{"reason": reason}, e.Fields)
	}
	assert.NotContains(t, e.Error(), testCredential)
}

func TestGateAuthenticate(t *testing.T) {
	pad := strings.Repeat("x", 64<<10)
	tests := []struct {
		name       string
		status     int
		body       string
		credential string
		declared   string
		wantGate   string
		wantCode   string
		wantReason string
		wantMsg    string
		wantCalls  int32
	}{
		{name: "active, gate matches", body: `{"active":true,"gate":"gate-a"}`, declared: "gate-a", wantGate: "gate-a"},
		{name: "surrounding spaces trimmed", body: `{"active":true,"gate":" gate-a "}`, declared: "gate-a ", wantGate: "gate-a"},
		{name: "future exp", body: `{"active":true,"gate":"gate-a","exp":4102444800}`, declared: "gate-a", wantGate: "gate-a"},
		{name: "body just under 64 KiB", body: `{"active":true,"gate":"gate-a","pad":"` + pad[:60<<10] + `"}`, declared: "gate-a", wantGate: "gate-a"},
		{name: "gate mismatch", body: `{"active":true,"gate":"gate-a"}`, declared: "gate-b", wantCode: EFORBIDDEN, wantReason: ReasonGateMismatch},
		{name: "gate case differs", body: `{"active":true,"gate":"gate-a"}`, declared: "GATE-A", wantCode: EFORBIDDEN, wantReason: ReasonGateMismatch},
		{name: "gate undeclared", body: `{"active":true,"gate":"gate-a"}`, wantCode: EFORBIDDEN, wantReason: ReasonGateNotDeclared},
		{name: "gate blank", body: `{"active":true,"gate":"gate-a"}`, declared: "  ", wantCode: EFORBIDDEN, wantReason: ReasonGateNotDeclared},
		{name: "inactive", body: `{"active":false}`, declared: "gate-a", wantCode: EUNAUTHORIZED},
		{name: "inactive and undeclared is 401", body: `{"active":false,"gate":"gate-a"}`, wantCode: EUNAUTHORIZED},
		{name: "active as string", body: `{"active":"true","gate":"gate-a"}`, declared: "gate-a", wantCode: EUNAUTHORIZED},
		{name: "active as number", body: `{"active":1,"gate":"gate-a"}`, declared: "gate-a", wantCode: EUNAUTHORIZED},
		{name: "active name folded", body: `{"Active":true,"gate":"gate-a"}`, declared: "gate-a", wantCode: EUNAUTHORIZED},
		{name: "no gate", body: `{"active":true}`, declared: "gate-a", wantCode: EUNAUTHORIZED},
		{name: "empty gate", body: `{"active":true,"gate":" "}`, declared: " ", wantCode: EUNAUTHORIZED},
		{name: "null gate", body: `{"active":true,"gate":null}`, wantCode: EUNAUTHORIZED},
		{name: "numeric gate", body: `{"active":true,"gate":7}`, declared: "7", wantCode: EUNAUTHORIZED},
		{name: "control char in gate", body: `{"active":true,"gate":"gate\u0000a"}`, declared: "gate\x00a", wantCode: EUNAUTHORIZED},
		{name: "past exp", body: `{"active":true,"gate":"gate-a","exp":1}`, declared: "gate-a", wantCode: EUNAUTHORIZED, wantMsg: "expired"},
		{name: "non-numeric exp", body: `{"active":true,"gate":"gate-a","exp":"soon"}`, declared: "gate-a", wantCode: EUNAUTHORIZED},
		{name: "not JSON", body: `active=true`, declared: "gate-a", wantCode: EUNAUTHORIZED},
		{name: "JSON array", body: `[{"active":true,"gate":"gate-a"}]`, declared: "gate-a", wantCode: EUNAUTHORIZED},
		{name: "JSON null", body: `null`, declared: "gate-a", wantCode: EUNAUTHORIZED},
		{name: "trailing data", body: `{"active":true,"gate":"gate-a"} {}`, declared: "gate-a", wantCode: EUNAUTHORIZED},
		{name: "oversized body", body: `{"active":true,"gate":"gate-a","pad":"` + pad + `"}`, declared: "gate-a", wantCode: EUNAUTHORIZED, wantMsg: "exceeds 64 KiB"},
		{name: "HTTP 500", status: 500, body: `{"active":true,"gate":"gate-a"}`, declared: "gate-a", wantCode: EUNAUTHORIZED, wantMsg: "HTTP 500"},
		{name: "HTTP 201", status: 201, body: `{"active":true,"gate":"gate-a"}`, declared: "gate-a", wantCode: EUNAUTHORIZED},
		{name: "no credential, portal not asked", credential: "-", body: `{"active":true,"gate":"gate-a"}`, declared: "gate-a", wantCode: EUNAUTHORIZED},
	}
	ca := newTestCA(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, cred, calls := tt.status, testCredential, tt.wantCalls
			if status == 0 {
				status = http.StatusOK
			}
			if tt.credential == "-" {
				cred = ""
			} else if calls == 0 {
				calls = 1
			}
			p := newPortal(t, ca, answer(status, tt.body))
			g, _ := newGate(t, gateConfig(p.srv.URL, ca))
			gate, err := g.Authenticate(context.Background(), cred, tt.declared)
			assert.Equal(t, calls, p.calls.Load())
			if tt.wantCode == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.wantGate, gate)
				return
			}
			requireGateErr(t, err, tt.wantCode, tt.wantReason)
			assert.Contains(t, err.Error(), tt.wantMsg)
			assert.Empty(t, gate)
		})
	}
}

func TestGateRequestShape(t *testing.T) {
	basic := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		name     string
		auth     string
		wantAuth string
	}{
		{name: "no portal credential", auth: "", wantAuth: ""},
		{name: "bearer", auth: "Bearer pt-abc.DEF_~+/=", wantAuth: "Bearer pt-abc.DEF_~+/="},
		{name: "bearer scheme folded", auth: "bearer pt-1", wantAuth: "Bearer pt-1"},
		{name: "basic, colon in password", auth: "Basic engine:pa ss:word", wantAuth: basic("engine:pa ss:word")},
		{name: "basic, empty password", auth: "BASIC engine:", wantAuth: basic("engine:")},
	}
	ca := newTestCA(t)
	p := newPortal(t, ca, activeGateA)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := gateConfig(p.srv.URL+"/oauth/introspect?realm=a", ca)
			cfg.Auth = tt.auth
			g, _ := newGate(t, cfg)
			_, err := g.Authenticate(context.Background(), "a b&c=d+é", "gate-a")
			require.NoError(t, err)
			got := p.seen()
			assert.Equal(t, seenRequest{method: http.MethodPost, contentType: "application/x-www-form-urlencoded",
				accept: "application/json", auth: tt.wantAuth, body: "token=a+b%26c%3Dd%2B%C3%A9"}, got)
		})
	}
}

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
	requireGateErr(t, step(0, "gate-b", 1), EFORBIDDEN, ReasonGateMismatch)
	requireGateErr(t, step(0, "", 1), EFORBIDDEN, ReasonGateNotDeclared)

	p.set(answer(http.StatusOK, `{"active":false}`)) // revoked at the portal
	require.NoError(t, step(19*time.Second, "gate-a", 1), "still inside the 30 s window")
	requireGateErr(t, step(time.Second, "gate-a", 2), EUNAUTHORIZED, "")
	requireGateErr(t, step(0, "gate-a", 3), EUNAUTHORIZED, "") // the refusal was not cached

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
	requireGateErr(t, err, EUNAUTHORIZED, "") // asked again, and the answer's exp has passed
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
		{name: "inactive not cached", cacheSeconds: 30, h: answer(http.StatusOK, `{"active":false}`), wantCode: EUNAUTHORIZED},
		{name: "portal error not cached", cacheSeconds: 30, h: answer(http.StatusBadGateway, ``), wantCode: EUNAUTHORIZED},
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

func TestGatePortalFaultsRefuse(t *testing.T) {
	ca, otherCA := newTestCA(t), newTestCA(t)
	down, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	downURL := "https://" + down.Addr().String() + "/introspect"
	require.NoError(t, down.Close())
	foreign := newPortal(t, otherCA, activeGateA)
	tests := []struct {
		name string
		cfg  GateConfig
		want string
	}{
		{name: "portal down", cfg: gateConfig(downURL, ca), want: "portal unreachable"},
		{name: "certificate from an unknown CA", cfg: gateConfig(foreign.srv.URL, ca), want: "certificate"},
		{name: "no CA bundle, system roots only", cfg: GateConfig{URL: foreign.srv.URL, CacheSeconds: 30, Timeout: 2 * time.Second}, want: "certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, _ := newGate(t, tt.cfg)
			_, err := g.Authenticate(context.Background(), testCredential, "gate-a")
			requireGateErr(t, err, EUNAUTHORIZED, "")
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	assert.Zero(t, foreign.calls.Load(), "the token never reached a portal with an unverified certificate")
}

func TestGateRedirectNotFollowed(t *testing.T) {
	ca := newTestCA(t)
	target := newPortal(t, ca, activeGateA)
	p := newPortal(t, ca, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.srv.URL, http.StatusTemporaryRedirect)
	})
	g, _ := newGate(t, gateConfig(p.srv.URL, ca))
	_, err := g.Authenticate(context.Background(), testCredential, "gate-a")
	requireGateErr(t, err, EUNAUTHORIZED, "")
	assert.Zero(t, target.calls.Load())
}

func TestGateTimeoutRefuses(t *testing.T) {
	ca := newTestCA(t)
	slowBody := func(release <-chan struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"active":true,`)
			w.(http.Flusher).Flush()
			select {
			case <-release:
				_, _ = io.WriteString(w, `"gate":"gate-a"}`)
			case <-r.Context().Done():
			}
		}
	}
	for name, handler := range map[string]func(<-chan struct{}) http.HandlerFunc{
		"no answer": blocking, "headers then a stalled body": slowBody,
	} {
		t.Run(name, func(t *testing.T) {
			release := make(chan struct{})
			p := newPortal(t, ca, handler(release))
			t.Cleanup(func() { close(release) }) // runs before the server closes
			cfg := gateConfig(p.srv.URL, ca)
			cfg.Timeout = 200 * time.Millisecond
			g, _ := newGate(t, cfg)
			start := time.Now()
			_, err := g.Authenticate(context.Background(), testCredential, "gate-a")
			elapsed := time.Since(start)
			requireGateErr(t, err, EUNAUTHORIZED, "")
			assert.Contains(t, err.Error(), "did not answer within 200ms")
			assert.GreaterOrEqual(t, elapsed, cfg.Timeout)
			assert.Less(t, elapsed, cfg.Timeout+time.Second)
		})
	}
}

// sharedCallGate returns a gate without cache (so only the shared call can
// spare portal calls) that reports each caller waiting on a portal call.
func sharedCallGate(t *testing.T, p *portal, ca *testCA) (*Introspector, <-chan struct{}) {
	cfg := gateConfig(p.srv.URL, ca)
	cfg.CacheSeconds = 0
	g, _ := newGate(t, cfg)
	joined := make(chan struct{}, 64)
	g.joined = func() { joined <- struct{}{} }
	return g, joined
}

func TestGateConcurrentCallersShareOneCall(t *testing.T) {
	ca := newTestCA(t)
	release := make(chan struct{})
	p := newPortal(t, ca, blocking(release))
	g, joined := sharedCallGate(t, p, ca)
	const n = 8
	gates, errs := make([]string, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { gates[i], errs[i] = g.Authenticate(context.Background(), testCredential, "gate-a") })
	}
	for range n {
		<-joined
	}
	close(release)
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, "gate-a", gates[i])
	}
	assert.Equal(t, int32(1), p.calls.Load())
}

func TestGateCancelledCallerLeavesSharedCall(t *testing.T) {
	ca := newTestCA(t)
	release := make(chan struct{})
	p := newPortal(t, ca, blocking(release))
	g, joined := sharedCallGate(t, p, ca)
	ctxA, cancelA := context.WithCancel(context.Background())
	errA, resB := make(chan error, 1), make(chan error, 1)
	go func() { _, err := g.Authenticate(ctxA, testCredential, "gate-a"); errA <- err }()
	<-joined // A started the portal call
	go func() { _, err := g.Authenticate(context.Background(), testCredential, "gate-a"); resB <- err }()
	<-joined // B shares it
	cancelA()
	requireGateErr(t, <-errA, EUNAUTHORIZED, "")
	close(release)
	require.NoError(t, <-resB, "A going away must not fail B's shared call")
	assert.Equal(t, int32(1), p.calls.Load())
}

func TestGatePlainHTTPLoopback(t *testing.T) {
	p := newPortal(t, nil, activeGateA)
	_, port, err := net.SplitHostPort(p.srv.Listener.Addr().String())
	require.NoError(t, err)
	for _, host := range []string{"127.0.0.1", "localhost"} {
		t.Run(host, func(t *testing.T) {
			g, _ := newGate(t, GateConfig{URL: "http://" + net.JoinHostPort(host, port), CacheSeconds: 30, Timeout: 2 * time.Second})
			gate, err := g.Authenticate(context.Background(), testCredential, "gate-a")
			require.NoError(t, err)
			assert.Equal(t, "gate-a", gate)
		})
	}
}

func TestGateLoopbackOnlyDial(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:80": true, "127.3.2.1:80": true, "[::1]:443": true,
		"10.1.2.3:80": false, "192.168.0.1:443": false, "[2001:db8::1]:80": false, "no-port": false,
	} {
		err := loopbackOnly("tcp", addr, nil)
		assert.Equal(t, ok, err == nil, addr)
	}
}

func TestGateValidate(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	ca := newTestCA(t)
	caPEM, err := os.ReadFile(ca.path)
	require.NoError(t, err)
	notPEM := write("not.pem", "just text\n")
	keyPEM := write("key.pem", string(caPEM)+"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
	badCert := write("bad.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
	commented := write("bundle.pem", "# operator bundle\n"+string(caPEM))

	tests := []struct {
		name string
		edit func(*GateConfig)
		want string // "" = valid; else the variable named in the error
	}{
		{name: "https", edit: func(c *GateConfig) {}},
		{name: "disabled ignores the rest", edit: func(c *GateConfig) { c.URL, c.Timeout = "", -1 }},
		{name: "http 127.0.0.1", edit: func(c *GateConfig) { c.URL = "http://127.0.0.1:8080/introspect" }},
		{name: "http 127/8", edit: func(c *GateConfig) { c.URL = "http://127.9.9.9/" }},
		{name: "http ::1", edit: func(c *GateConfig) { c.URL = "http://[::1]:9000/" }},
		{name: "http localhost", edit: func(c *GateConfig) { c.URL = "http://LocalHost:9000/" }},
		{name: "http private address", edit: func(c *GateConfig) { c.URL = "http://10.0.0.1/" }, want: "SVC_GATE_INTROSPECTION_URL"},
		{name: "http name", edit: func(c *GateConfig) { c.URL = "http://portal.example.com/" }, want: "SVC_GATE_INTROSPECTION_URL"},
		{name: "http localhost lookalike", edit: func(c *GateConfig) { c.URL = "http://localhost.example.com/" }, want: "SVC_GATE_INTROSPECTION_URL"},
		{name: "other scheme", edit: func(c *GateConfig) { c.URL = "ftp://127.0.0.1/" }, want: "SVC_GATE_INTROSPECTION_URL"},
		{name: "relative", edit: func(c *GateConfig) { c.URL = "/introspect" }, want: "SVC_GATE_INTROSPECTION_URL"},
		{name: "unparseable", edit: func(c *GateConfig) { c.URL = "https://[::1" }, want: "SVC_GATE_INTROSPECTION_URL"},
		{name: "credentials in URL", edit: func(c *GateConfig) { c.URL = "https://u:p@portal.example.com/" }, want: "SVC_GATE_INTROSPECTION_URL"},
		{name: "cache 0", edit: func(c *GateConfig) { c.CacheSeconds = 0 }},
		{name: "negative cache", edit: func(c *GateConfig) { c.CacheSeconds = -1 }, want: "SVC_GATE_INTROSPECTION_CACHE_SECONDS"},
		{name: "cache above a day", edit: func(c *GateConfig) { c.CacheSeconds = 86401 }, want: "SVC_GATE_INTROSPECTION_CACHE_SECONDS"},
		{name: "zero timeout", edit: func(c *GateConfig) { c.Timeout = 0 }, want: "SVC_GATE_INTROSPECTION_TIMEOUT"},
		{name: "negative timeout", edit: func(c *GateConfig) { c.Timeout = -time.Second }, want: "SVC_GATE_INTROSPECTION_TIMEOUT"},
		{name: "timeout above 60 s", edit: func(c *GateConfig) { c.Timeout = 61 * time.Second }, want: "SVC_GATE_INTROSPECTION_TIMEOUT"},
		{name: "negative cache size", edit: func(c *GateConfig) { c.CacheSize = -1 }, want: "cache size"},
		{name: "bearer", edit: func(c *GateConfig) { c.Auth = "Bearer s3cr3t-Tok" }},
		{name: "basic", edit: func(c *GateConfig) { c.Auth = "Basic engine:s3cr3t-Tok" }},
		{name: "unknown scheme", edit: func(c *GateConfig) { c.Auth = "Token s3cr3t-Tok" }, want: "SVC_GATE_INTROSPECTION_AUTH"},
		{name: "bare token", edit: func(c *GateConfig) { c.Auth = "s3cr3t-Tok" }, want: "SVC_GATE_INTROSPECTION_AUTH"},
		{name: "empty bearer", edit: func(c *GateConfig) { c.Auth = "Bearer " }, want: "SVC_GATE_INTROSPECTION_AUTH"},
		{name: "bearer with space", edit: func(c *GateConfig) { c.Auth = "Bearer s3cr3t Tok" }, want: "SVC_GATE_INTROSPECTION_AUTH"},
		{name: "bearer with newline", edit: func(c *GateConfig) { c.Auth = "Bearer s3cr3t-Tok\nX: y" }, want: "SVC_GATE_INTROSPECTION_AUTH"},
		{name: "pre-encoded basic", edit: func(c *GateConfig) { c.Auth = "Basic czNjcjN0LVRvaw==" }, want: "SVC_GATE_INTROSPECTION_AUTH"},
		{name: "basic without user", edit: func(c *GateConfig) { c.Auth = "Basic :s3cr3t-Tok" }, want: "SVC_GATE_INTROSPECTION_AUTH"},
		{name: "basic with CR", edit: func(c *GateConfig) { c.Auth = "Basic engine:s3cr3t-Tok\r" }, want: "SVC_GATE_INTROSPECTION_AUTH"},
		{name: "bundle with comment lines", edit: func(c *GateConfig) { c.CABundle = commented }},
		{name: "missing bundle", edit: func(c *GateConfig) { c.CABundle = filepath.Join(dir, "absent.pem") }, want: "SVC_GATE_INTROSPECTION_CA_BUNDLE"},
		{name: "bundle not PEM", edit: func(c *GateConfig) { c.CABundle = notPEM }, want: "SVC_GATE_INTROSPECTION_CA_BUNDLE"},
		{name: "bundle with a key", edit: func(c *GateConfig) { c.CABundle = keyPEM }, want: "SVC_GATE_INTROSPECTION_CA_BUNDLE"},
		{name: "bundle with a bad certificate", edit: func(c *GateConfig) { c.CABundle = badCert }, want: "SVC_GATE_INTROSPECTION_CA_BUNDLE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := gateConfig("https://portal.example.com/oauth/introspect", ca)
			tt.edit(&cfg)
			err := cfg.Validate()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), "s3cr3t")
			_, err = NewIntrospector(cfg)
			require.Error(t, err, "the constructor validates too")
		})
	}
}

func TestGateDisabledHasNoIntrospector(t *testing.T) {
	cfg := GateConfig{Timeout: DefaultGateTimeout, CacheSeconds: DefaultGateCacheSeconds}
	assert.False(t, cfg.Enabled())
	_, err := NewIntrospector(cfg)
	require.ErrorContains(t, err, "SVC_GATE_INTROSPECTION_URL")
}
