package cmd_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
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

// testCA issues loopback server certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "svc test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca *testCA) serverCert(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (ca *testCA) file(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(path, ca.pem, 0o644))
	return path
}

// portal is an RFC 7662 introspection endpoint over HTTPS.
type portal struct {
	srv    *httptest.Server
	calls  atomic.Int64
	mu     sync.Mutex
	active map[string]string // credential → gate
	delay  time.Duration
}

func newPortal(t *testing.T, ca *testCA) *portal {
	t.Helper()
	p := &portal{active: map[string]string{}}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	p.srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.serverCert(t)}}
	p.srv.StartTLS()
	t.Cleanup(p.srv.Close)
	return p
}

func (p *portal) serve(w http.ResponseWriter, r *http.Request) {
	p.calls.Add(1)
	p.mu.Lock()
	delay := p.delay
	gate, ok := p.active[r.PostFormValue("token")]
	p.mu.Unlock()
	select { // a slow portal; one whose caller gave up stops waiting
	case <-time.After(delay):
	case <-r.Context().Done():
	}
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get("Authorization") != "Bearer portal-secret" || !ok {
		_ = json.NewEncoder(w).Encode(map[string]any{"active": false})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"active": true, "gate": gate})
}

func (p *portal) set(cred, gate string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if gate == "" {
		delete(p.active, cred)
	} else {
		p.active[cred] = gate
	}
}

func gateEngine(t *testing.T, url, caFile, cacheSeconds, timeout string) (*engineProc, map[string]string) {
	t.Helper()
	env := baseEnv(t)
	env["SVC_AUTH_TOKEN"] = "adapter-token"
	env["SVC_GATE_INTROSPECTION_URL"] = url
	env["SVC_GATE_INTROSPECTION_CA_BUNDLE"] = caFile
	env["SVC_GATE_INTROSPECTION_AUTH"] = "Bearer portal-secret"
	env["SVC_GATE_INTROSPECTION_CACHE_SECONDS"] = cacheSeconds
	env["SVC_GATE_INTROSPECTION_TIMEOUT"] = timeout
	return startEngine(t, env), env
}

func (p *engineProc) decideGate(t *testing.T, cred, gate string) response {
	t.Helper()
	return p.decideGateWith(t, cred, gate, envelope(nil))
}

// decideGateWith posts body to /v1/decide with cred, declaring gate.
func (p *engineProc) decideGateWith(t *testing.T, cred, gate string, body any) response {
	t.Helper()
	req, err := http.NewRequest("POST", p.URL+"/v1/decide", jsonReader(t, body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+cred)
	if gate != "" {
		req.Header.Set("X-Svc-Gate", gate)
	}
	return do(t, req)
}

// gateCacheWindow is TestGateCredentials' SVC_GATE_INTROSPECTION_CACHE_SECONDS:
// long enough that two decisions sent back to back fall within one window
// even on a loaded machine.
const gateCacheWindow = 3 * time.Second

func TestGateCredentials(t *testing.T) {
	ca := newTestCA(t)
	portal := newPortal(t, ca)
	portal.set("cred-a", "gate-a")
	p, env := gateEngine(t, portal.srv.URL+"/introspect", ca.file(t), strconv.Itoa(int(gateCacheWindow/time.Second)), "2")

	r := p.decideGate(t, "cred-a", "gate-a")
	require.Equal(t, 200, r.Status, "%v", r.Body)
	assert.Equal(t, "allow", r.str("decision"))
	r = p.decideGate(t, "cred-a", "gate-b")
	assert.Equal(t, 403, r.Status)
	assert.Equal(t, "gate_mismatch", r.str("reason"))
	r = p.decideGate(t, "cred-a", "")
	assert.Equal(t, 403, r.Status)
	assert.Equal(t, "gate_not_declared", r.str("reason"))
	req, err := http.NewRequest("POST", p.URL+"/v1/decide", jsonReader(t, envelope(nil)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer cred-a")
	req.Header.Add("X-Svc-Gate", "gate-a")
	req.Header.Add("X-Svc-Gate", "gate-b")
	r = do(t, req)
	assert.Equal(t, 403, r.Status, "two X-Svc-Gate lines declare two gates")
	assert.Equal(t, "gate_mismatch", r.str("reason"))
	r = p.decideGate(t, "forged", "gate-a")
	assert.Equal(t, 401, r.Status)
	assert.Equal(t, "unauthorized", r.str("error"))
	require.Eventually(t, func() bool {
		recs := p.logsWith(refusedLine)
		return len(recs) > 0 && strings.Contains(fmt.Sprint(recs[len(recs)-1]["error"]), "not active")
	}, 5*time.Second, 10*time.Millisecond, "the portal's refusal is logged as a refused credential")
	assert.Empty(t, p.logsWith(portalDownLine), "a credential the portal refuses is no portal outage")
	r = p.decideGate(t, "adapter-token", "")
	assert.Equal(t, 200, r.Status, "SVC_AUTH_TOKEN is tried first and needs no gate header")

	hold := p.callAs(t, "cred-a", "GET", "/v1/holds", nil)
	assert.Equal(t, 401, hold.Status, "hold routes never accept portal credentials")

	t.Run("cache hit within the window, revocation seen after it", func(t *testing.T) {
		// Let what the decisions above cached expire, so that the first
		// decision here asks the portal and starts a fresh window: on a
		// loaded machine an older entry could expire between the two
		// decisions below and turn the cached answer into a refusal.
		time.Sleep(gateCacheWindow + 100*time.Millisecond)
		before := portal.calls.Load()
		require.Equal(t, 200, p.decideGate(t, "cred-a", "gate-a").Status)
		require.Equal(t, int64(1), portal.calls.Load()-before, "the expired entry is asked again")
		portal.set("cred-a", "")
		require.Equal(t, 200, p.decideGate(t, "cred-a", "gate-a").Status, "cached positive answer")
		assert.Equal(t, int64(1), portal.calls.Load()-before, "answered from the cache")
		time.Sleep(gateCacheWindow + 100*time.Millisecond)
		assert.Equal(t, 401, p.decideGate(t, "cred-a", "gate-a").Status, "revocation seen after the window")
	})

	p.stop(t)
	lines := auditLines(t, env["SVC_AUDIT_LOG"])
	require.NotEmpty(t, lines)
	assert.Equal(t, "gate-a", lines[0]["gate"], "the gate id is in the audit line")
}

// TestRedemptionBindsTheGate: a hold raised through one gate is redeemed
// only through that gate: not by another gate's credential, nor by
// SVC_AUTH_TOKEN; and a hold raised with SVC_AUTH_TOKEN not through a gate.
func TestRedemptionBindsTheGate(t *testing.T) {
	ca := newTestCA(t)
	portal := newPortal(t, ca)
	portal.set("cred-a", "gate-a")
	portal.set("cred-b", "gate-b")
	p, _ := holdsEngine(t, map[string]string{
		"SVC_GATE_INTROSPECTION_URL":       portal.srv.URL,
		"SVC_GATE_INTROSPECTION_CA_BUNDLE": ca.file(t),
		"SVC_GATE_INTROSPECTION_AUTH":      "Bearer portal-secret",
	})
	r := p.decideGateWith(t, "cred-a", "gate-a", heldEnvelope(nil))
	require.Equal(t, "require_approval", r.str("decision"), "%v", r.Body)
	viaGate := r.str("hold_id")
	hold := p.call(t, "GET", "/v1/holds/"+viaGate, nil)
	assert.Equal(t, "gate-a", hold.str("gate"), "the hold shows the gate it was raised through")
	viaToken, _ := raiseHold(t, p, map[string]any{"agent.session_id": "s-token"})
	for _, id := range []string{viaGate, viaToken} {
		require.Equal(t, 200, resolve(t, p, "tok-bob", id, map[string]any{"decision": "approve"}).Status)
	}

	refused := []struct {
		name        string
		cred, gate  string
		hold        string
		sessionEdit map[string]any
	}{
		{"another gate", "cred-b", "gate-b", viaGate, nil},
		{"SVC_AUTH_TOKEN for a gate's hold", "adapter-token", "", viaGate, nil},
		{"a gate for SVC_AUTH_TOKEN's hold", "cred-a", "gate-a", viaToken, map[string]any{"agent.session_id": "s-token"}},
	}
	for _, c := range refused {
		d := p.decideGateWith(t, c.cred, c.gate, resubmission(c.hold, c.sessionEdit))
		assert.Equal(t, "deny", d.str("decision"), c.name)
		assert.Equal(t, "svc_hold_actor_mismatch", d.str("reason"), c.name)
	}
	assert.Equal(t, "approved", p.call(t, "GET", "/v1/holds/"+viaGate, nil).str("status"), "refusals never consume")

	d := p.decideGateWith(t, "cred-a", "gate-a", resubmission(viaGate, nil))
	assert.Equal(t, "allow", d.str("decision"), "%v", d.Body)
	d = p.decideGateWith(t, "adapter-token", "", resubmission(viaToken, map[string]any{"agent.session_id": "s-token"}))
	assert.Equal(t, "allow", d.str("decision"), "%v", d.Body)
}

func TestGateWithoutAuthTokenKeepsHoldRoutesClosed(t *testing.T) {
	ca := newTestCA(t)
	portal := newPortal(t, ca)
	portal.set("cred", "g")
	env := baseEnv(t)
	env["SVC_GATE_INTROSPECTION_URL"] = portal.srv.URL
	env["SVC_GATE_INTROSPECTION_CA_BUNDLE"] = ca.file(t)
	env["SVC_GATE_INTROSPECTION_AUTH"] = "Bearer portal-secret"
	tokens := filepath.Join(t.TempDir(), "resolvers.json")
	writeTokens(t, tokens, resolverTokens)
	env["SVC_RESOLVER_TOKENS"] = tokens
	p := startEngine(t, env)
	assert.Equal(t, 401, p.callAs(t, "", "POST", "/v1/decide", envelope(nil)).Status)
	assert.Equal(t, 200, p.decideGate(t, "cred", "g").Status)
	assert.Equal(t, 401, p.callAs(t, "", "GET", "/v1/holds", nil).Status)
	assert.Equal(t, 401, p.callAs(t, "cred", "GET", "/v1/holds", nil).Status)
	assert.Equal(t, 200, p.callAs(t, "tok-bob", "GET", "/v1/holds", nil).Status)
	assert.Equal(t, 401, p.callAs(t, "", "GET", "/v1/freeze", nil).Status)
}

func TestGateCacheZeroAsksEveryTime(t *testing.T) {
	ca := newTestCA(t)
	portal := newPortal(t, ca)
	portal.set("cred", "g")
	p, _ := gateEngine(t, portal.srv.URL, ca.file(t), "0", "2")
	before := portal.calls.Load()
	for i := 0; i < 3; i++ {
		require.Equal(t, 200, p.decideGate(t, "cred", "g").Status)
	}
	assert.Equal(t, int64(3), portal.calls.Load()-before)
}

// refusedLine and portalDownLine are the log messages of a refused
// credential and of a refusal the gate portal caused.
const (
	refusedLine    = "request refused: missing or invalid credential"
	portalDownLine = "gate portal failed (unreachable, or an answer svc cannot use): every gate credential is refused until it answers"
)

// requirePortalDownLogged checks that a portal fault was logged as an
// outage, with its cause, and not as a refused credential.
func requirePortalDownLogged(t *testing.T, p *engineProc, cause string) {
	t.Helper()
	require.Eventually(t, func() bool { return len(p.logsWith(portalDownLine)) > 0 }, 5*time.Second, 10*time.Millisecond, p.Logs())
	rec := p.logsWith(portalDownLine)[0]
	assert.Equal(t, "error", rec["level"])
	assert.Contains(t, rec["error"], cause)
	assert.Empty(t, p.logsWith(refusedLine))
}

func TestGatePortalFaultsRefuse(t *testing.T) {
	ca := newTestCA(t)
	t.Run("slower than the timeout", func(t *testing.T) {
		portal := newPortal(t, ca)
		portal.set("cred", "g")
		portal.delay = 10 * time.Second
		p, _ := gateEngine(t, portal.srv.URL, ca.file(t), "30", "0.5")
		start := time.Now()
		assert.Equal(t, 401, p.decideGate(t, "cred", "g").Status)
		assert.Less(t, time.Since(start), 4*time.Second, "the 0.5 s timeout and slack, not the portal's 10 s")
		requirePortalDownLogged(t, p, "portal did not answer within 500ms")
	})
	t.Run("down", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		p, _ := gateEngine(t, "https://"+addr+"/introspect", ca.file(t), "30", "1")
		assert.Equal(t, 401, p.decideGate(t, "cred", "g").Status)
		requirePortalDownLogged(t, p, "portal unreachable")
	})
	t.Run("certificate from an unknown CA", func(t *testing.T) {
		portal := newPortal(t, newTestCA(t))
		portal.set("cred", "g")
		p, _ := gateEngine(t, portal.srv.URL, ca.file(t), "30", "1")
		assert.Equal(t, 401, p.decideGate(t, "cred", "g").Status)
		assert.Equal(t, int64(0), portal.calls.Load(), "the credential never reached an unverified portal")
		requirePortalDownLogged(t, p, "certificate")
	})
}

func TestGateConfigRefusals(t *testing.T) {
	for name, kv := range map[string][2]string{
		"plain http off loopback": {"SVC_GATE_INTROSPECTION_URL", "http://portal.example/introspect"},
		"bad timeout":             {"SVC_GATE_INTROSPECTION_TIMEOUT", "0"},
		"bad cache":               {"SVC_GATE_INTROSPECTION_CACHE_SECONDS", "-1"},
		"missing CA bundle":       {"SVC_GATE_INTROSPECTION_CA_BUNDLE", "/nonexistent/ca.pem"},
	} {
		t.Run(name, func(t *testing.T) {
			env := baseEnv(t)
			env["SVC_GATE_INTROSPECTION_URL"] = "https://127.0.0.1:9/introspect"
			env[kv[0]] = kv[1]
			code, out := runFailing(t, env)
			assert.Equal(t, 2, code, out)
			assert.Contains(t, out, kv[0])
		})
	}
}
