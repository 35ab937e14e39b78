package api

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/svc-dev/svc/engine"
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
	var e *engine.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, code, e.Code)
	assert.Equal(t, engine.StatusOf(code), map[string]int{engine.EUNAUTHORIZED: 401, engine.EFORBIDDEN: 403}[code])
	if code == engine.EUNAUTHORIZED {
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
		portal     bool // the refusal is the portal's fault (*PortalError)
	}{
		{name: "active, gate matches", body: `{"active":true,"gate":"gate-a"}`, declared: "gate-a", wantGate: "gate-a"},
		{name: "surrounding spaces trimmed", body: `{"active":true,"gate":" gate-a "}`, declared: "gate-a ", wantGate: "gate-a"},
		{name: "future exp", body: `{"active":true,"gate":"gate-a","exp":4102444800}`, declared: "gate-a", wantGate: "gate-a"},
		{name: "body just under 64 KiB", body: `{"active":true,"gate":"gate-a","pad":"` + pad[:60<<10] + `"}`, declared: "gate-a", wantGate: "gate-a"},
		{name: "gate mismatch", body: `{"active":true,"gate":"gate-a"}`, declared: "gate-b", wantCode: engine.EFORBIDDEN, wantReason: ReasonGateMismatch},
		{name: "gate case differs", body: `{"active":true,"gate":"gate-a"}`, declared: "GATE-A", wantCode: engine.EFORBIDDEN, wantReason: ReasonGateMismatch},
		{name: "gate undeclared", body: `{"active":true,"gate":"gate-a"}`, wantCode: engine.EFORBIDDEN, wantReason: ReasonGateNotDeclared},
		{name: "gate blank", body: `{"active":true,"gate":"gate-a"}`, declared: "  ", wantCode: engine.EFORBIDDEN, wantReason: ReasonGateNotDeclared},
		{name: "inactive", body: `{"active":false}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED},
		{name: "inactive and undeclared is 401", body: `{"active":false,"gate":"gate-a"}`, wantCode: engine.EUNAUTHORIZED},
		{name: "active as string", body: `{"active":"true","gate":"gate-a"}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED},
		{name: "active as number", body: `{"active":1,"gate":"gate-a"}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED},
		{name: "gate of 256 bytes", body: `{"active":true,"gate":"` + strings.Repeat("g", 256) + `"}`, declared: strings.Repeat("g", 256), wantGate: strings.Repeat("g", 256)},
		{name: "gate over 256 bytes", body: `{"active":true,"gate":"` + strings.Repeat("g", 257) + `"}`, declared: strings.Repeat("g", 257), wantCode: engine.EUNAUTHORIZED},
		{name: "escaped member names", body: `{"\u0061ctive":true,"g\u0061te":"gate-a"}`, declared: "gate-a", wantGate: "gate-a"},
		{name: "RFC 7662 members ignored", body: `{"active":true,"gate":"gate-a","scope":"decide","client_id":"litellm","sub":"svc","token_type":"Bearer","iat":1,"nbf":1,"aud":["svc"],"ext":{"active":false,"gate":"gate-b","Gate":"x"}}`, declared: "gate-a", wantGate: "gate-a"},
		{name: "whitespace around the object", body: " \n{\"active\":true,\"gate\":\"gate-a\"}\r\n", declared: "gate-a", wantGate: "gate-a"},
		{name: "declared list", body: `{"active":true,"gate":"gate-a"}`, declared: "gate-a, gate-b", wantCode: engine.EFORBIDDEN, wantReason: ReasonGateMismatch, wantMsg: "more than one gate"},
		{name: "declared list, own gate last", body: `{"active":true,"gate":"gate-a"}`, declared: "gate-b, gate-a", wantCode: engine.EFORBIDDEN, wantReason: ReasonGateMismatch, wantMsg: "more than one gate"},
		{name: "declared list, own gate twice", body: `{"active":true,"gate":"gate-a"}`, declared: "gate-a,gate-a", wantCode: engine.EFORBIDDEN, wantReason: ReasonGateMismatch},
		{name: "declared list, empty element", body: `{"active":true,"gate":"gate-a"}`, declared: "gate-a,", wantCode: engine.EFORBIDDEN, wantReason: ReasonGateMismatch},
		{name: "declared list of empty elements", body: `{"active":true,"gate":"gate-a"}`, declared: " , ", wantCode: engine.EFORBIDDEN, wantReason: ReasonGateMismatch},
		{name: "active name folded", body: `{"Active":true,"gate":"gate-a"}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED, wantMsg: `spells member "active" another way`, portal: true},
		{name: "active beside a case variant", body: `{"active":true,"Active":false,"gate":"gate-a"}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED, portal: true},
		{name: "gate beside a full-width variant", body: `{"active":true,"gate":"gate-a","ｇate":"gate-b"}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED, portal: true},
		{name: "gate beside a zero-width variant", body: `{"active":true,"gate":"gate-a","ga\u200bte":"gate-b"}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED, portal: true},
		{name: "gate beside a spaced variant", body: `{"active":true,"gate":"gate-a"," gate":"gate-b"}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED, portal: true},
		{name: "exp beside a case variant", body: `{"active":true,"gate":"gate-a","exp":4102444800,"EXP":1}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED, portal: true},
		{name: "active twice, last true", body: `{"active":false,"gate":"gate-a","active":true}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED, wantMsg: `names member "active" twice`, portal: true},
		{name: "active twice, first true", body: `{"active":true,"gate":"gate-a","active":false}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED, portal: true},
		{name: "active twice, both true", body: `{"active":true,"active":true,"gate":"gate-a"}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED, portal: true},
		{name: "active twice, once escaped", body: `{"active":false,"gate":"gate-a","\u0061ctive":true}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED, portal: true},
		{name: "gate twice", body: `{"active":true,"gate":"gate-b","gate":"gate-a"}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED, portal: true},
		{name: "exp twice", body: `{"active":true,"gate":"gate-a","exp":1,"exp":4102444800}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED, portal: true},
		{name: "other member twice", body: `{"active":true,"gate":"gate-a","scope":"read","scope":"decide"}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED, wantMsg: "names a member twice", portal: true},
		{name: "no gate", body: `{"active":true}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED},
		{name: "empty gate", body: `{"active":true,"gate":" "}`, declared: " ", wantCode: engine.EUNAUTHORIZED},
		{name: "null gate", body: `{"active":true,"gate":null}`, wantCode: engine.EUNAUTHORIZED},
		{name: "numeric gate", body: `{"active":true,"gate":7}`, declared: "7", wantCode: engine.EUNAUTHORIZED},
		{name: "control char in gate", body: `{"active":true,"gate":"gate\u0000a"}`, declared: "gate\x00a", wantCode: engine.EUNAUTHORIZED},
		{name: "past exp", body: `{"active":true,"gate":"gate-a","exp":1}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED, wantMsg: "expired"},
		{name: "non-numeric exp", body: `{"active":true,"gate":"gate-a","exp":"soon"}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED},
		{name: "not JSON", body: `active=true`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED, portal: true},
		{name: "JSON array", body: `[{"active":true,"gate":"gate-a"}]`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED, portal: true},
		{name: "JSON null", body: `null`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED, portal: true},
		{name: "trailing data", body: `{"active":true,"gate":"gate-a"} {}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED, portal: true},
		{name: "oversized body", body: `{"active":true,"gate":"gate-a","pad":"` + pad + `"}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED, wantMsg: "exceeds 64 KiB", portal: true},
		{name: "HTTP 500", status: 500, body: `{"active":true,"gate":"gate-a"}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED, wantMsg: "HTTP 500", portal: true},
		{name: "HTTP 201", status: 201, body: `{"active":true,"gate":"gate-a"}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED, portal: true},
		{name: "no credential, portal not asked", credential: "-", body: `{"active":true,"gate":"gate-a"}`, declared: "gate-a", wantCode: engine.EUNAUTHORIZED},
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
			_, portal := errors.AsType[*PortalError](err)
			assert.Equal(t, tt.portal, portal, "a refusal the portal caused, and only one, is a *PortalError")
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
			requireGateErr(t, err, engine.EUNAUTHORIZED, "")
			assert.Contains(t, err.Error(), tt.want)
			assert.ErrorAs(t, err, new(*PortalError))
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
	requireGateErr(t, err, engine.EUNAUTHORIZED, "")
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
			requireGateErr(t, err, engine.EUNAUTHORIZED, "")
			assert.Contains(t, err.Error(), "did not answer within 200ms")
			assert.ErrorAs(t, err, new(*PortalError))
			assert.GreaterOrEqual(t, elapsed, cfg.Timeout)
			assert.Less(t, elapsed, cfg.Timeout+3*time.Second, "the portal stalls until the test ends")
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
	requireGateErr(t, <-errA, engine.EUNAUTHORIZED, "")
	close(release)
	require.NoError(t, <-resB, "A going away must not fail B's shared call")
	assert.Equal(t, int32(1), p.calls.Load())
}
