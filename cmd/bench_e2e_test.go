package cmd_test

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBenchE2E drives a real engine (opa server mode, with a token) with
// `svc bench`: every request is answered, the table has one row per
// concurrency, and the audit log holds exactly the answered decisions.
func TestBenchE2E(t *testing.T) {
	env := baseEnv(t)
	env["SVC_OPA_MODE"] = "server"
	env["SVC_AUTH_TOKEN"] = "bench-token"
	p := startEngine(t, env)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, svcBin, "bench", "--url", p.URL, "--token", "bench-token", "--label", "server",
		"--concurrency", "1,4", "--duration", "1s", "--sessions", "20")
	cmd.Env = environ(nil)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	p.stop(t)

	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Equal(t, "svc bench: "+p.URL+", 1s per run, 20 sessions", lines[0])
	require.Equal(t, "mode      conc decisions  decided/s       p50       p90       p99  allow  approval   deny "+
		"errors   max RSS", lines[2])
	total := 0
	for i, conc := range []string{"1", "4"} {
		f := strings.Fields(lines[3+i])
		require.Len(t, f, 12, lines[3+i])
		assert.Equal(t, []string{"server", conc}, f[:2])
		decisions, _ := strconv.Atoi(f[2])
		allow, _ := strconv.Atoi(f[7])
		approval, _ := strconv.Atoi(f[8])
		deny, _ := strconv.Atoi(f[9])
		assert.Positive(t, allow, lines[3+i])
		assert.Positive(t, deny, lines[3+i])
		assert.Equal(t, decisions, allow+approval+deny, lines[3+i])
		assert.Equal(t, "0", f[10], "errors: %s", lines[3+i])
		assert.Equal(t, "n/a", f[11])
		total += decisions
	}
	last := strings.Fields(lines[len(lines)-1])
	require.Len(t, last, 2)
	require.Equal(t, "answered", last[0])
	answered, err := strconv.Atoi(last[1])
	require.NoError(t, err)
	assert.Greater(t, answered, total, "the warm-ups are answered too")

	decisions := 0
	for _, rec := range auditLines(t, env["SVC_AUDIT_LOG"]) {
		if rec["event"] == "decision" {
			decisions++
		}
	}
	assert.Equal(t, answered, decisions, "answered = decisions in the audit log")
}
