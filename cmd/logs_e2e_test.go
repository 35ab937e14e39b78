package cmd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRequestLogAndRefusals: every request is logged once answered
// (method, route, status, duration, and on /v1/decide the decision id and
// verdict), probes at debug level only; a refused envelope is logged at
// warning level naming the field; debug adds a line per decision; neither
// a token nor a body is ever logged.
func TestRequestLogAndRefusals(t *testing.T) {
	env := baseEnv(t)
	env["SVC_AUTH_TOKEN"] = "secret-adapter-token"
	env["SVC_LOG_LEVEL"] = "debug"
	p := startEngine(t, env)
	d := p.decide(t, envelope(map[string]any{"params.note": "body-marker"}))
	require.Equal(t, 200, d.Status)
	bad := p.decide(t, envelope(map[string]any{"agent.id": "agent-7\nagent-8"}))
	require.Equal(t, 400, bad.Status, "%v", bad.Body)
	assert.Equal(t, "agent.id", bad.str("field"))
	p.call(t, "GET", "/healthz", nil)

	require.Eventually(t, func() bool { return len(p.logsWith("request")) >= 3 }, 5*time.Second, 20*time.Millisecond)
	byRoute := map[string]map[string]any{}
	for _, rec := range p.logsWith("request") {
		verdict, _ := rec["verdict"].(string)
		byRoute[rec["route"].(string)+" "+verdict] = rec
	}
	allow := byRoute["POST /v1/decide allow"]
	require.NotNil(t, allow, "%v", byRoute)
	assert.Equal(t, "info", allow["level"])
	assert.EqualValues(t, 200, allow["status"])
	assert.Equal(t, d.str("decision_id"), allow["decision_id"])
	assert.Contains(t, allow, "duration_ms")
	assert.EqualValues(t, 400, byRoute["POST /v1/decide deny"]["status"])
	assert.Equal(t, "debug", byRoute["GET /healthz "]["level"])

	refused := p.logsWith("request refused")
	require.Len(t, refused, 1)
	assert.Equal(t, "warn", refused[0]["level"])
	assert.Equal(t, "agent.id", refused[0]["field"])
	assert.Equal(t, "invalid_envelope", refused[0]["error"])
	require.Len(t, p.logsWith("decision"), 1, "debug: a line per decision")

	logs := p.Logs()
	assert.NotContains(t, logs, "secret-adapter-token")
	assert.NotContains(t, logs, "body-marker")
}

// TestInfoLevelHidesDebugLines: at info, probes and decision details are
// not logged, and a bad level names the flag that set it.
func TestInfoLevelHidesDebugLines(t *testing.T) {
	p := startEngine(t, baseEnv(t))
	p.call(t, "GET", "/healthz", nil)
	p.decide(t, envelope(nil))
	require.Eventually(t, func() bool { return len(p.logsWith("request")) >= 1 }, 5*time.Second, 20*time.Millisecond)
	assert.Empty(t, p.logsWith("decision"))
	for _, rec := range p.logsWith("request") {
		assert.NotEqual(t, "GET /healthz", rec["route"])
	}
	code, out := runFailingArgs(t, baseEnv(t), "--log-level", "loud")
	assert.Equal(t, 2, code)
	assert.Contains(t, out, `--log-level (SVC_LOG_LEVEL): must be debug, info, warn or error, got "loud"`)
}

// TestStartupSaysWhereStateLives: the start-up log says where the
// database and the audit log are (a temporary database is named as such),
// and warns of an unknown SVC_* variable, of a non-loopback address without
// authentication and of a resolver tokens file others can read.
func TestStartupSaysWhereStateLives(t *testing.T) {
	env := baseEnv(t)
	delete(env, "SVC_HOLDS_PATH")
	env["SVC_HOST"] = "0.0.0.0"
	env["SVC_ALLOW_PLAINTEXT"] = "1"
	env["SVC_PROT"] = "8080"
	env["SVC_REQUIRE_VERIFIED_APPROVER"] = "flase"
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	require.NoError(t, os.WriteFile(tokens, []byte(`{"tok-a": {"type": "human", "id": "a"}}`), 0o644))
	require.NoError(t, os.Chmod(tokens, 0o644))
	env["SVC_RESOLVER_TOKENS"] = tokens
	p := startEngine(t, env)
	state := p.logsWith("svc state")
	require.Len(t, state, 1, p.Logs())
	assert.Contains(t, state[0]["database"], "temporary, deleted at exit")
	assert.Equal(t, env["SVC_AUDIT_LOG"], state[0]["audit_log"])
	assert.Equal(t, "eval", state[0]["opa_mode"])
	assert.Equal(t, false, state[0]["auth"])
	logs := p.Logs()
	assert.Contains(t, logs, "SVC_PROT is not a setting svc reads; did you mean SVC_PORT?")
	assert.Contains(t, logs, `SVC_REQUIRE_VERIFIED_APPROVER=\"flase\" is not true or false: read as true, the check stays on`)
	assert.Equal(t, true, state[0]["require_verified_approver"])
	assert.Contains(t, logs, "SVC_HOST is not a loopback address and no authentication is configured")
	assert.Contains(t, logs, "the SVC_RESOLVER_TOKENS file is readable by its group or by others")

	quiet := baseEnv(t)
	require.NoError(t, os.Chmod(tokens, 0o600))
	quiet["SVC_RESOLVER_TOKENS"] = tokens
	q := startEngine(t, quiet)
	assert.Equal(t, quiet["SVC_HOLDS_PATH"], q.logsWith("svc state")[0]["database"])
	for _, w := range []string{"not a setting", "not a loopback", "readable by its group"} {
		assert.False(t, strings.Contains(q.Logs(), w), w)
	}
}
