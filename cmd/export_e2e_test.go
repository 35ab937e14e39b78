package cmd_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// udpCollector receives RFC 5424 datagrams.
type udpCollector struct {
	conn   net.PacketConn
	mu     sync.Mutex
	frames []string
}

func newUDPCollector(t *testing.T) *udpCollector {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	c := &udpCollector{conn: conn}
	go func() {
		buf := make([]byte, 65536)
		for {
			n, _, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			c.mu.Lock()
			c.frames = append(c.frames, string(buf[:n]))
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() { conn.Close() })
	return c
}

var frameRE = regexp.MustCompile(`^<(\d+)>1 (\S+) (\S+) svc (\d+) (\S+) - (.*)$`)

// waitFrame waits for a frame with msgid whose body contains want.
func (c *udpCollector) waitFrame(t *testing.T, msgid, want string) (pri string, body map[string]any) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		frames := append([]string(nil), c.frames...)
		c.mu.Unlock()
		for _, f := range frames {
			m := frameRE.FindStringSubmatch(f)
			if m != nil && m[5] == msgid && strings.Contains(m[6], want) {
				require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(m[6], "\ufeff")), &body), f)
				return m[1], body
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %s frame containing %q", msgid, want)
	return "", nil
}

// webhookSink records signed webhook deliveries.
type webhookSink struct {
	mu     sync.Mutex
	events []map[string]any
	forged int
}

func newWebhookSink(t *testing.T, secret string) (*webhookSink, string) {
	t.Helper()
	s := &webhookSink{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts := r.Header.Get("X-Svc-Timestamp")
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts + "." + string(body)))
		want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
		s.mu.Lock()
		defer s.mu.Unlock()
		if !hmac.Equal([]byte(want), []byte(r.Header.Get("X-Svc-Signature"))) {
			s.forged++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var ev map[string]any
		_ = json.Unmarshal(body, &ev)
		s.events = append(s.events, ev)
	}))
	t.Cleanup(srv.Close)
	return s, srv.URL
}

func (s *webhookSink) wait(t *testing.T, event string) map[string]any {
	t.Helper()
	return s.waitWhere(t, event, func(map[string]any) bool { return true })
}

// waitWhere waits for a delivery of event that also satisfies match.
func (s *webhookSink) waitWhere(t *testing.T, event string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		for _, ev := range s.events {
			if ev["event"] == event && match(ev) {
				s.mu.Unlock()
				return ev
			}
		}
		s.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no matching %s webhook", event)
	return nil
}

func exportEngine(t *testing.T, extra map[string]string) (*engineProc, map[string]string, *udpCollector, *webhookSink) {
	t.Helper()
	col := newUDPCollector(t)
	sink, url := newWebhookSink(t, "hook-secret")
	env := baseEnv(t)
	env["SVC_AUTH_TOKEN"] = "adapter-token"
	tokens := filepath.Join(t.TempDir(), "resolvers.json")
	writeTokens(t, tokens, resolverTokens)
	env["SVC_RESOLVER_TOKENS"] = tokens
	env["SVC_SYSLOG_ENABLED"] = "true"
	env["SVC_SYSLOG_ADDRESS"] = col.conn.LocalAddr().String()
	env["SVC_WEBHOOK_URL"] = url
	env["SVC_WEBHOOK_SECRET"] = "hook-secret"
	for k, v := range extra {
		env[k] = v
	}
	return startEngine(t, env), env, col, sink
}

func TestDecisionAndHoldEventsAreExported(t *testing.T) {
	p, _, col, sink := exportEngine(t, nil)
	pri, _ := col.waitFrame(t, "lifecycle", `"start"`)
	assert.Equal(t, "133", pri, "local0 notice")
	r := p.decide(t, envelope(map[string]any{"context.traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}))
	pri, ev := col.waitFrame(t, "decision", r.str("decision_id"))
	assert.Equal(t, "134", pri, "local0 informational for allow")
	assert.Equal(t, "allow", ev["verdict"])
	assert.Equal(t, r.str("envelope_hash"), ev["envelope_hash"])
	assert.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ev["traceparent"])
	assert.Equal(t, "enforce", ev["mode"])

	id, parent := raiseHold(t, p, nil)
	pri, ev = col.waitFrame(t, "decision", parent)
	assert.Equal(t, "132", pri, "local0 warning for require_approval")
	assert.Equal(t, id, ev["hold_id"])
	created := sink.wait(t, "hold.created")
	assert.Equal(t, id, created["hold_id"])
	assert.Equal(t, "pending", created["status"])
	require.Equal(t, 200, resolve(t, p, "tok-bob", id, map[string]any{"decision": "approve"}).Status)
	resolved := sink.wait(t, "hold.resolved")
	assert.Equal(t, "approved", resolved["status"])
	assert.Equal(t, map[string]any{"type": "human", "id": "bob"}, resolved["decided_by"])
	d := p.decide(t, resubmission(id, nil))
	_, ev = col.waitFrame(t, "decision", d.str("decision_id"))
	assert.Equal(t, parent, ev["parent_decision_id"])
	assert.Zero(t, sink.forged)

	health := p.call(t, "GET", "/healthz", nil)
	exp, _ := health.Body["export"].(map[string]any)
	require.NotNil(t, exp, "%v", health.Body)
	assert.Contains(t, exp, "syslog")
	assert.Contains(t, exp, "webhook")
	p.stop(t)
	col.waitFrame(t, "lifecycle", `"stop"`)
}

func TestFreezeOverAPIAndCLI(t *testing.T) {
	p, env, col, sink := exportEngine(t, nil)
	assert.Equal(t, 401, p.callAs(t, "", "POST", "/v1/freeze", map[string]any{"frozen": true}).Status)
	r := p.callAs(t, "tok-bot", "POST", "/v1/freeze", map[string]any{"frozen": true})
	assert.Equal(t, 403, r.Status, "an agent resolver cannot flip the switch")
	r = p.callAs(t, "tok-bob", "POST", "/v1/freeze", map[string]any{"reason": "x"})
	assert.Equal(t, 400, r.Status)
	assert.Equal(t, "frozen", r.str("field"))

	r = p.callAs(t, "tok-bob", "POST", "/v1/freeze", map[string]any{"frozen": true, "reason": "incident 42"})
	require.Equal(t, 200, r.Status, "%v", r.Body)
	assert.Equal(t, true, r.Body["frozen"])
	assert.Equal(t, "human:bob", r.str("by"))
	pri, ks := col.waitFrame(t, "kill_switch", `"flipped"`)
	assert.Equal(t, "130", pri, "local0 critical")
	assert.Equal(t, "incident 42", ks["reason"])
	hook := sink.wait(t, "freeze.flipped")
	assert.Equal(t, true, hook["frozen"])
	d := p.decide(t, envelope(map[string]any{"action.verb": "delete"}))
	assert.Equal(t, "svc.policy/frozen", d.str("rule"))
	q := p.call(t, "GET", "/v1/freeze", nil)
	assert.Equal(t, true, q.Body["frozen"])
	col.waitFrame(t, "kill_switch", `"queried"`)

	p.stop(t)
	var freezeLines int
	for _, rec := range auditLines(t, env["SVC_AUDIT_LOG"]) {
		if rec["event"] == "freeze" {
			freezeLines++
			assert.Equal(t, "human:bob", rec["by"])
		}
	}
	assert.Equal(t, 1, freezeLines)

	again := startEngine(t, env)
	d = again.decide(t, envelope(map[string]any{"action.verb": "delete"}))
	assert.Equal(t, "svc.policy/frozen", d.str("rule"), "a restart stays frozen")
	cli := func(args ...string) (int, string) {
		r := runSvc(t, map[string]string{"SVC_CORE_URL": again.URL, "SVC_CORE_TOKEN": "adapter-token"}, nil, args...)
		return r.code, r.output()
	}
	code, out := cli("freeze", "status")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "FROZEN")
	code, out = cli("freeze", "off", "--reason", "resolved")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "not frozen")
	assert.Equal(t, "allow", again.decide(t, envelope(map[string]any{"action.verb": "delete"})).str("decision"))
	pri, ks = col.waitFrame(t, "kill_switch", `"cleared"`)
	assert.Equal(t, "130", pri)
	assert.Equal(t, "token:SVC_AUTH_TOKEN", ks["by"])
	sink.waitWhere(t, "freeze.flipped", func(ev map[string]any) bool { return ev["frozen"] == false })
	code, _ = cli("freeze", "sideways")
	assert.NotEqual(t, 0, code)
	again.stop(t)
	var cleared bool
	for _, rec := range auditLines(t, env["SVC_AUDIT_LOG"]) {
		cleared = cleared || (rec["event"] == "freeze" && rec["frozen"] == false && rec["reason"] == "resolved")
	}
	assert.True(t, cleared, "the CLI's change is on record")
}

func TestFreezePinnedBySVCFreeze(t *testing.T) {
	p, _, _, _ := exportEngine(t, map[string]string{"SVC_FREEZE": "true"})
	r := p.call(t, "POST", "/v1/freeze", map[string]any{"frozen": false})
	assert.Equal(t, 409, r.Status)
	assert.Contains(t, r.Body["reason"], "SVC_FREEZE")
	assert.Equal(t, "SVC_FREEZE", r.str("variable"))
	assert.Equal(t, true, p.call(t, "GET", "/v1/freeze", nil).Body["pinned"])
}
