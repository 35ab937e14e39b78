package cmd_test

import (
	"context"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBenchE2E drives a real engine (opa server mode, with a token) with
// `svc bench`: every request is answered, the table has one row per
// concurrency, the baseline of bare `opa eval` runs one row per concurrency
// too, and the audit log holds exactly the answered decisions.
func TestBenchE2E(t *testing.T) {
	env := baseEnv(t)
	env["SVC_OPA_MODE"] = "server"
	env["SVC_AUTH_TOKEN"] = "bench-token"
	p := startEngine(t, env)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, svcBin, "bench", "--url", p.URL, "--token", "bench-token", "--label", "server",
		"--concurrency", "1,4", "--duration", "1s", "--sessions", "20", "--opa-runs", "3")
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
	base := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "baseline: bare `opa eval`") })
	require.Positive(t, base, "%s", out)
	assert.Contains(t, lines[base], "3 runs per concurrency")
	for i, want := range [][]string{{"opa-eval", "1", "3"}, {"opa-eval", "4", "8"}} { // at least 2 per client
		f := strings.Fields(lines[base+1+i])
		require.Len(t, f, 12, lines[base+1+i])
		assert.Equal(t, want, f[:3])
		assert.Equal(t, []string{want[2], "0", "0", "0", "n/a"}, f[7:], "every run a read, allowed: %s", lines[base+1+i])
		p50, err := time.ParseDuration(f[4])
		require.NoError(t, err)
		assert.Greater(t, p50, time.Millisecond, "a process start per run")
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
