package cmd_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/rego"
)

// TestReadyzNamesTheFailingCheck: /readyz answers 200 while the evaluator,
// the database and the audit log work, and 503 naming the check at fault
// when the audit log becomes unwritable or the policy stops compiling,
// while /healthz, the liveness probe, still answers 200.
func TestReadyzNamesTheFailingCheck(t *testing.T) {
	pack, cleanup, err := rego.Materialize()
	require.NoError(t, err)
	t.Cleanup(func() { _ = cleanup() })
	env := baseEnv(t)
	env["SVC_POLICY_DIR"] = pack
	p := startEngine(t, env)

	r := p.call(t, "GET", "/readyz", nil)
	require.Equal(t, 200, r.Status, "%v", r.Body)
	assert.Equal(t, "ready", r.str("status"))
	assert.Equal(t, map[string]any{"evaluator": "ok", "database": "ok", "audit_log": "ok"}, r.Body["checks"])

	audit := env["SVC_AUDIT_LOG"]
	require.NoError(t, os.Remove(audit))
	require.NoError(t, os.Mkdir(audit, 0o700))
	r = p.call(t, "GET", "/readyz", nil)
	require.Equal(t, 503, r.Status, "%v", r.Body)
	assert.Equal(t, "not_ready", r.str("status"))
	assert.Equal(t, []any{"audit_log"}, r.Body["failing"])
	assert.Contains(t, r.Body["checks"].(map[string]any)["audit_log"], "open audit log")
	assert.Equal(t, 200, p.call(t, "GET", "/healthz", nil).Status, "the process is alive")
	require.NoError(t, os.Remove(audit))

	require.NoError(t, os.WriteFile(filepath.Join(pack, "broken.rego"), []byte("package svc.policy\nthis is not rego\n"), 0o600))
	r = p.call(t, "GET", "/readyz", nil)
	require.Equal(t, 503, r.Status, "%v", r.Body)
	assert.Equal(t, []any{"evaluator"}, r.Body["failing"])
	assert.Equal(t, "deny", p.decide(t, envelope(nil)).str("decision"), "decisions fail closed meanwhile")
	require.NoError(t, os.Remove(filepath.Join(pack, "broken.rego")))
	assert.Equal(t, 200, p.call(t, "GET", "/readyz", nil).Status)
}

// TestAuditLogUnopenableRefusesToStart: an audit log that cannot be opened
// at start-up stops svc serve (exit 1) naming it, rather than serving
// nothing but denies.
func TestAuditLogUnopenableRefusesToStart(t *testing.T) {
	env := baseEnv(t)
	env["SVC_AUDIT_LOG"] = t.TempDir() // a directory
	code, out := runFailing(t, env)
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "audit log (SVC_AUDIT_LOG=")
	assert.Contains(t, out, "open audit log")
}

// TestReadyzNamesAStalePack: in server mode a broken edit of the pack
// leaves opa deciding with the last pack that loaded; /readyz says so
// (policy_pack, with the load error) until an edit loads again.
func TestReadyzNamesAStalePack(t *testing.T) {
	pack, cleanup, err := rego.Materialize()
	require.NoError(t, err)
	t.Cleanup(func() { _ = cleanup() })
	env := baseEnv(t)
	env["SVC_POLICY_DIR"] = pack
	env["SVC_OPA_MODE"] = "server"
	p := startEngine(t, env)

	r := p.call(t, "GET", "/readyz", nil)
	require.Equal(t, 200, r.Status, "%v", r.Body)
	assert.Equal(t, "ok", r.Body["checks"].(map[string]any)["policy_pack"])

	broken := filepath.Join(pack, "broken.rego")
	require.NoError(t, os.WriteFile(broken, []byte("package svc.policy\nthis is not rego\n"), 0o600))
	require.Eventually(t, func() bool { return p.call(t, "GET", "/readyz", nil).Status == 503 }, 30*time.Second, 50*time.Millisecond)
	r = p.call(t, "GET", "/readyz", nil)
	assert.Equal(t, []any{"policy_pack"}, r.Body["failing"])
	assert.Contains(t, r.Body["checks"].(map[string]any)["policy_pack"], "stale")

	require.NoError(t, os.Remove(broken))
	require.Eventually(t, func() bool { return p.call(t, "GET", "/readyz", nil).Status == 200 }, 30*time.Second, 50*time.Millisecond)
}
