package cmd_test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// benchHeader is the head of svc bench's table.
const benchHeader = "mode      conc decisions  decided/s       p50       p90       p99  allow  approval   deny " +
	"errors   max RSS svc-cpu opa-cpu gen-cpu"

// TestBenchE2E drives a real engine (opa server mode, with a token) with
// `svc bench` pinned to one CPU, as scripts/bench runs it: every request
// is answered, the table has one row per concurrency with the CPU per
// decision of svc, its opa and the generator, the baseline of bare `opa
// eval` runs one row per concurrency too, the footer says what the
// generator was, and the audit log holds exactly the answered decisions.
func TestBenchE2E(t *testing.T) {
	cpu := firstCPU(t)
	url, env, out := benchE2E(t, []string{requireTaskset(t), "-c", cpu}, "--opa-runs", "3")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Equal(t, "svc bench: "+url+", 1s per run, 20 sessions", lines[0])
	require.Equal(t, benchHeader, lines[2])
	total := 0
	for i, conc := range []string{"1", "4"} {
		f := benchFields(t, lines[3+i], "server", conc)
		assert.Equal(t, "0", f[10], "errors: %s", lines[3+i])
		assert.NotEqual(t, "n/a", f[11], "RSS of --pid")
		total += benchDecisions(t, f)
		assertCPUColumns(t, f)
	}
	base := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "baseline: bare `opa eval`") })
	require.Positive(t, base, "%s", out)
	assert.Contains(t, lines[base], "3 runs per concurrency")
	for i, want := range [][]string{{"opa-eval", "1", "3"}, {"opa-eval", "4", "8"}} { // at least 2 per client
		f := strings.Fields(lines[base+1+i])
		require.Len(t, f, 15, lines[base+1+i])
		assert.Equal(t, want, f[:3])
		assert.Equal(t, []string{want[2], "0", "0", "0", "n/a", "n/a", "n/a", "n/a"}, f[7:],
			"every run a read, allowed: %s", lines[base+1+i])
		p50, err := time.ParseDuration(f[4])
		require.NoError(t, err)
		assert.Greater(t, p50, time.Millisecond, "a process start per run")
	}
	assert.Contains(t, lines, "load generator: svc bench, GOMAXPROCS=1, pinned to CPU "+cpu)
	answered := benchAnswered(t, lines)
	assert.Greater(t, answered, total, "the warm-ups are answered too")
	assert.Equal(t, answered, auditDecisionCount(t, env["SVC_AUDIT_LOG"]), "answered = decisions in the audit log")
}

// TestBenchWrkE2E drives a real engine with `svc bench --wrk`: wrk posts
// the envelope mix, the rows count verdicts and CPU per decision, the
// footer gives wrk's threads at each concurrency, and the audit log holds
// the answered decisions plus at most those wrk left in flight when it
// stopped.
func TestBenchWrkE2E(t *testing.T) {
	_, env, out := benchE2E(t, nil, "--wrk", requireWrk(t))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Equal(t, benchHeader, lines[2])
	total := 0
	for i, conc := range []string{"1", "4"} {
		f := benchFields(t, lines[3+i], "server", conc)
		total += benchDecisions(t, f)
		assertCPUColumns(t, f)
	}
	flight := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "in flight when wrk stopped: up to ") })
	require.Positive(t, flight, "%s", out)
	inFlight, err := strconv.Atoi(strings.TrimPrefix(lines[flight], "in flight when wrk stopped: up to "))
	require.NoError(t, err)
	assert.Equal(t, 2*(1+4), inFlight, "a warm-up and a run per concurrency")
	gen := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "load generator: ") })
	require.Positive(t, gen, "%s", out)
	assert.Regexp(t, `^load generator: wrk, 1 thread at concurrency 1, 2 threads at concurrency 4, (on CPUs|pinned to CPU) \S+$`,
		lines[gen])
	answered := benchAnswered(t, lines)
	assert.Greater(t, answered, total, "the warm-ups are answered too")
	decisions := auditDecisionCount(t, env["SVC_AUDIT_LOG"])
	assert.GreaterOrEqual(t, decisions, answered, "every answer is in the audit log")
	assert.LessOrEqual(t, decisions, answered+inFlight, "only the requests left in flight are uncounted")
}

// TestBenchBaselineOnly: with --baseline-only, svc bench needs no engine
// and prints the table's head and a row of bare `opa eval` runs per
// concurrency, and no answered count.
func TestBenchBaselineOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, svcBin, "bench", "--baseline-only", "--opa-runs", "2", "--concurrency", "1,2")
	cmd.Env = environ(nil)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, 7, "%s", out)
	assert.Equal(t, "svc bench: the baseline alone", lines[0])
	assert.Equal(t, benchHeader, lines[2])
	assert.True(t, strings.HasPrefix(lines[4], "baseline: bare `opa eval`"), lines[4])
	for i, want := range [][]string{{"opa-eval", "1", "2"}, {"opa-eval", "2", "4"}} {
		assert.Equal(t, want, strings.Fields(lines[5+i])[:3], lines[5+i])
	}
}

// benchE2E runs `svc bench` with extra flags, at concurrency 1 and 4 for 1 s
// each over 20 sessions, against a real engine (opa server mode, with a
// token) that it stops afterwards; it returns the engine's URL, its
// environment and the output. A wrap command (taskset -c 0) runs svc
// bench when given.
func benchE2E(t *testing.T, wrap []string, extra ...string) (string, map[string]string, string) {
	t.Helper()
	env := baseEnv(t)
	env["SVC_OPA_MODE"] = "server"
	env["SVC_AUTH_TOKEN"] = "bench-token"
	p := startEngine(t, env)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	args := []string{"bench", "--url", p.URL, "--token", "bench-token", "--label", "server", "--concurrency", "1,4",
		"--duration", "1s", "--sessions", "20", "--pid", strconv.Itoa(p.cmd.Process.Pid)}
	cmdline := append(append(slices.Clone(wrap), svcBin), append(args, extra...)...)
	cmd := exec.CommandContext(ctx, cmdline[0], cmdline[1:]...)
	cmd.Env = environ(nil)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	p.stop(t)
	return p.URL, env, string(out)
}

// benchFields splits a row of the table and checks its mode, concurrency
// and verdicts: reads allowed, systemic deletes (5 % of the mix) denied
// when the row has enough decisions to draw one near certainly (a loaded
// machine under -race may answer only a dozen in a second), and the
// verdicts adding up to the decisions.
func benchFields(t *testing.T, line, mode, conc string) []string {
	t.Helper()
	f := strings.Fields(line)
	require.Len(t, f, 15, line)
	assert.Equal(t, []string{mode, conc}, f[:2])
	allow, _ := strconv.Atoi(f[7])
	approval, _ := strconv.Atoi(f[8])
	deny, _ := strconv.Atoi(f[9])
	assert.Positive(t, allow, line)
	if benchDecisions(t, f) >= 300 { // no deny in 300 draws: 0.95^300 ≈ 2e-7
		assert.Positive(t, deny, line)
	}
	assert.Equal(t, benchDecisions(t, f), allow+approval+deny, line)
	return f
}

// benchDecisions is the decisions column of a row.
func benchDecisions(t *testing.T, f []string) int {
	t.Helper()
	n, err := strconv.Atoi(f[2])
	require.NoError(t, err)
	return n
}

// assertCPUColumns checks that a row reports CPU per decision of the
// engine and of its opa (a decision in server mode costs both some) and of
// the generator, in whole µs.
func assertCPUColumns(t *testing.T, f []string) {
	t.Helper()
	for i, who := range []string{"svc", "opa", "generator"} {
		us, err := strconv.Atoi(f[12+i])
		require.NoError(t, err, "%s CPU: %v", who, f)
		if who != "generator" { // wrk's can round to 0 µs; svc's and opa's cannot
			assert.Positive(t, us, "%s CPU per decision: %v", who, f)
		}
	}
}

// benchAnswered reads the last line, `answered N`.
func benchAnswered(t *testing.T, lines []string) int {
	t.Helper()
	last := strings.Fields(lines[len(lines)-1])
	require.Len(t, last, 2)
	require.Equal(t, "answered", last[0])
	answered, err := strconv.Atoi(last[1])
	require.NoError(t, err)
	return answered
}

// auditDecisionCount counts the decision lines of an audit log.
func auditDecisionCount(t *testing.T, path string) int {
	t.Helper()
	n := 0
	for _, lines := range auditDecisions(t, path) {
		n += lines
	}
	return n
}

// requireWrk returns wrk's path, failing the test when it is missing.
func requireWrk(t *testing.T) string {
	t.Helper()
	wrk, err := exec.LookPath("wrk")
	require.NoError(t, err, "wrk is missing: run scripts/install-test-deps")
	return wrk
}

// requireTaskset returns taskset's path, failing the test when it is
// missing.
func requireTaskset(t *testing.T) string {
	t.Helper()
	taskset, err := exec.LookPath("taskset")
	require.NoError(t, err, "taskset is missing: Debian's util-linux has it")
	return taskset
}

// firstCPU is the first CPU this process may run on.
func firstCPU(t *testing.T) string {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^Cpus_allowed_list:\s*(\d+)`).FindSubmatch(status)
	require.NotNil(t, m, "%s", status)
	return string(m[1])
}
