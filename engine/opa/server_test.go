package opa

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/svc-dev/svc/engine"
)

// startOPAServer supervises a real opa server on dir for one test.
func startOPAServer(t testing.TB, bin, dir string) *OPAServer {
	t.Helper()
	s, err := StartOPAServer(OPAServerConfig{Bin: bin, PolicyDir: dir, Timeout: 10 * time.Second, Logger: zerolog.Nop()})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s
}

// waitUp waits until the supervised server answers its health check,
// without probing the policy.
func waitUp(t testing.TB, s *OPAServer) {
	t.Helper()
	require.Eventually(t, s.up.Load, 20*time.Second, 5*time.Millisecond, "opa server did not become ready")
}

// startExternalOPA runs `opa run --server` on loopback TCP for one test, as
// an operator would run the server svc does not manage, and returns its URL
// and process.
func startExternalOPA(t *testing.T, dir string) (string, *exec.Cmd) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	cmd := exec.Command(opaTestBin(t), "run", "--server", "--addr", addr,
		"--log-level", "error", "--skip-version-check", dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = killProcessGroup(cmd.Process.Pid)
		_ = cmd.Wait()
	})
	url := "http://" + addr
	probe, err := NewRESTEvaluator(url, time.Second)
	require.NoError(t, err)
	defer probe.Close()
	require.Eventually(t, func() bool { return probe.healthy(context.Background(), time.Second) }, 20*time.Second, 10*time.Millisecond)
	return url, cmd
}

func TestOPAServerRestartsAfterKill(t *testing.T) {
	s := startOPAServer(t, opaTestBin(t), bundledPack(t))
	require.NoError(t, s.Check(t.Context()))
	first := int(s.pid.Load())

	require.NoError(t, syscall.Kill(first, syscall.SIGKILL))
	got, err := s.Evaluate(t.Context(), opaInput(nil))
	require.Error(t, err, "a killed server never yields a verdict")
	assert.Equal(t, engine.Verdict{}, got)
	require.Eventually(t, func() bool { return !s.up.Load() }, 5*time.Second, time.Millisecond)
	_, err = s.Evaluate(t.Context(), opaInput(nil))
	require.ErrorIs(t, err, errOPADown, "while down, decisions fail at once")

	waitUp(t, s)
	got, err = s.Evaluate(t.Context(), opaInput(nil))
	require.NoError(t, err)
	assert.Equal(t, "svc.policy/default_allow", got.Rule)
	assert.NotEqual(t, first, int(s.pid.Load()), "a new process serves")
	assert.True(t, processGone(first))
}

func TestOPAServerCheck(t *testing.T) {
	opa := opaTestBin(t)
	pack := bundledPack(t)
	tests := []struct {
		name string
		bin  string
		dir  string
		want string // "" means Check passes
	}{
		{"real opa and bundled pack", opa, pack, ""},
		{"missing binary", fakeOPA(t, "no-such-opa"), pack, "start opa server"},
		{"failing binary", fakeOPA(t, "fail.sh"), pack, "exited: exit status 3: rego_parse_error"},
		{"broken policy", opa, writePolicy(t, "package svc.policy\n\ndecision := if {\n"), "rego_parse_error"},
		{"missing policy dir", opa, filepath.Join(t.TempDir(), "nope"), "no such file or directory"},
		{"policy without decision", opa, writePolicy(t, "package svc.policy\n\nother := 1\n"), "is package svc.policy loaded"},
		{"empty policy dir", opa, t.TempDir(), "is package svc.policy loaded"},
		{"decision not an object", opa, writePolicy(t, "package svc.policy\n\ndecision := \"allow\"\n"), "not an object of strings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := startOPAServer(t, tt.bin, tt.dir).Check(t.Context())
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestOPAServerNeverReady: an opa that never answers fails Check at the
// caller's deadline, and Close kills its whole process group: the server's,
// or that of the opa eval computing a pack's precomputed values first.
func TestOPAServerNeverReady(t *testing.T) {
	for _, tc := range []struct {
		name  string
		watch bool // a watched pack is not precomputed
	}{
		{"server", true},
		{"precompute", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "child.pid")
			t.Setenv("FAKEOPA_PIDFILE", pidFile)
			s, err := StartOPAServer(OPAServerConfig{Bin: fakeOPA(t, "sleep.sh"), PolicyDir: t.TempDir(),
				Watch: tc.watch, Timeout: time.Second, Logger: zerolog.Nop()})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			err = s.Check(ctx)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Contains(t, err.Error(), "did not become ready")
			_, err = s.Evaluate(t.Context(), opaInput(nil))
			require.ErrorIs(t, err, errOPADown)
			leader := int(s.pid.Load())
			require.NoError(t, s.Close())
			if tc.watch {
				assert.True(t, processGone(leader))
			} else {
				assert.Zero(t, leader, "the server must not start before its values are computed")
			}
			assertChildKilled(t, pidFile)
		})
	}
}

func TestOPAServerPolicyFaults(t *testing.T) {
	tests := []struct {
		name   string
		module string
		want   string
	}{
		{"runtime error", "package svc.policy\n\ndecision := {\"decision\": \"allow\", \"rule\": \"r\", \"reason\": sprintf(\"%d\", [1 / input.zero])}\n", "500 Internal Server Error: { \"code\": \"internal_error\""},
		{"no decision rule", "package svc.policy\n\nother := 1\n", "policy decision is undefined"},
		{"decision lacks reason", "package svc.policy\n\ndecision := {\"decision\": \"allow\", \"rule\": \"r\"}\n", "lacks decision, rule or reason"},
		{"unknown decision", "package svc.policy\n\ndecision := {\"decision\": \"maybe\", \"rule\": \"r\", \"reason\": \"x\"}\n", `decision "maybe"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startOPAServer(t, opaTestBin(t), writePolicy(t, tt.module))
			waitUp(t, s)
			got, err := s.Evaluate(t.Context(), json.RawMessage(`{"zero": 0}`))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Equal(t, engine.Verdict{}, got)
		})
	}
}

// TestOPAServerWatch: with Watch, an edit of the policy dir reaches the
// running server without a restart; an edit that does not compile is
// logged and leaves the last good policy in force.
func TestOPAServerWatch(t *testing.T) {
	module := func(rule string) string {
		return "package svc.policy\n\ndecision := {\"decision\": \"deny\", \"rule\": \"" + rule + "\", \"reason\": \"x\"}\n"
	}
	dir := writePolicy(t, module("first"))
	logs := &opaLogBuffer{}
	s, err := StartOPAServer(OPAServerConfig{Bin: opaTestBin(t), PolicyDir: dir, Watch: true,
		Timeout: 10 * time.Second, Logger: zerolog.New(logs)})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Check(t.Context()))
	pid := s.pid.Load()
	rule := func() string {
		v, err := s.Evaluate(t.Context(), opaInput(nil))
		require.NoError(t, err)
		return v.Rule
	}
	// An edit is written whole and renamed into place, as editors and
	// deploys do: os.WriteFile truncates first, and --watch may load the
	// empty file in between (rego_parse_error: empty module).
	edit := func(src string) {
		tmp := filepath.Join(t.TempDir(), "policy.rego")
		require.NoError(t, os.WriteFile(tmp, []byte(src), 0o600))
		require.NoError(t, os.Rename(tmp, filepath.Join(dir, "policy.rego")))
	}

	edit("package svc.policy\n\ndecision := {\n")
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "rego_parse_error") }, 10*time.Second,
		10*time.Millisecond, "a failed reload is logged")
	assert.Contains(t, logs.String(), `"level":"warn"`)
	assert.Equal(t, "first", rule(), "the last good policy stays in force")
	require.Eventually(t, func() bool { stale, _ := s.PackStatus(); return stale }, 10*time.Second, 10*time.Millisecond)
	_, loadErr := s.PackStatus()
	assert.ErrorContains(t, loadErr, "rego_parse_error", "the load error is reported")
	assert.Contains(t, logs.String(), "policy pack stale: an edit failed to load")

	edit(module("second"))
	assert.Eventually(t, func() bool { return rule() == "second" }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, pid, s.pid.Load(), "reloaded in place")
	// The server answers with the new pack before svc has read OPA's log
	// line of the reload, which clears the stale flag.
	assert.Eventually(t, func() bool { stale, _ := s.PackStatus(); return !stale }, 10*time.Second, 10*time.Millisecond,
		"a pack that loads is fresh again")
	_, loadErr = s.PackStatus()
	assert.NoError(t, loadErr)
}

// opaLogBuffer is a goroutine-safe log sink.
type opaLogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *opaLogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *opaLogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestOPAServerConcurrentDecisions shares the keep-alive pool among many
// callers.
func TestOPAServerConcurrentDecisions(t *testing.T) {
	s := startOPAServer(t, opaTestBin(t), bundledPack(t))
	require.NoError(t, s.Check(t.Context()))
	var wg sync.WaitGroup
	errs := make(chan error, 128)
	for i := range 128 {
		wg.Go(func() {
			v, err := s.Evaluate(t.Context(), opaInput(withPrior(int64(i%25), 0, 0, false,
				withAction("delete", "dev", "reversible", "single", "internal", 1))))
			if err == nil && v.Decision == engine.Allow && i%25 >= 20 {
				err = assert.AnError
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// TestOPAServerFrozen: while the server does not answer (its process is
// frozen), every one of many concurrent decisions fails within the timeout
// of its call, time queued behind the stuck queries included; the
// supervisor then finds it wedged (its health checks fail), kills it and
// starts another, and decisions resume.
func TestOPAServerFrozen(t *testing.T) {
	const timeout = time.Second
	s, err := StartOPAServer(OPAServerConfig{Bin: opaTestBin(t), PolicyDir: bundledPack(t), Timeout: timeout,
		Logger: zerolog.Nop(), liveness: 100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	waitUp(t, s)
	_, err = s.Evaluate(t.Context(), opaInput(nil))
	require.NoError(t, err)

	frozen := int(s.pid.Load())
	require.NoError(t, syscall.Kill(frozen, syscall.SIGSTOP))
	t.Cleanup(func() { _ = syscall.Kill(frozen, syscall.SIGCONT) })
	require.Eventually(t, func() bool { return allThreadsStopped(frozen) }, 5*time.Second, time.Millisecond)
	const callers = 16 // far more than the query slots: most wait in the queue
	errs := make([]error, callers)
	took := make([]time.Duration, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			start := time.Now()
			_, errs[i] = s.Evaluate(t.Context(), opaInput(nil))
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	for i := range callers {
		assert.Error(t, errs[i])
		assert.Less(t, took[i], timeout+700*time.Millisecond, "call %d outlived its timeout (queued: one more timeout)", i)
	}

	require.Eventually(t, func() bool {
		_, err := s.Evaluate(t.Context(), opaInput(nil))
		return err == nil
	}, 20*time.Second, 50*time.Millisecond, "decisions resume on a new server")
	assert.NotEqual(t, frozen, int(s.pid.Load()), "the wedged server was replaced")
	assert.True(t, processGone(frozen), "the wedged server was killed")
}

// TestOPAServerAnswersCountAsLiveness: a server whose health checks all
// fail is kept while it answers decisions (a loaded server may be slow on
// GET /health), and killed as wedged once the decisions stop.
func TestOPAServerAnswersCountAsLiveness(t *testing.T) {
	const every = 50 * time.Millisecond
	var probes atomic.Int64
	s, err := StartOPAServer(OPAServerConfig{Bin: opaTestBin(t), PolicyDir: bundledPack(t), Timeout: 5 * time.Second,
		Logger: zerolog.Nop(), liveness: every,
		probe: func(context.Context) bool { probes.Add(1); return false }})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	waitUp(t, s)
	pid := s.pid.Load()

	busy := time.Now().Add(20 * every) // far past opaLivenessMisses ticks
	for time.Now().Before(busy) {
		_, err := s.Evaluate(t.Context(), opaInput(nil))
		require.NoError(t, err)
		time.Sleep(every / 5)
	}
	assert.Equal(t, pid, s.pid.Load(), "a server answering decisions was killed")
	assert.True(t, s.up.Load())

	require.Eventually(t, func() bool { return s.pid.Load() != pid }, 10*time.Second, every,
		"an idle server failing its health checks is not replaced")
	assert.GreaterOrEqual(t, probes.Load(), int64(opaLivenessMisses))
}

// allThreadsStopped reports whether every thread of process pid is in the
// stopped state.
func allThreadsStopped(pid int) bool {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(stats) == 0 {
		return false
	}
	for _, path := range stats {
		b, err := os.ReadFile(path)
		i := bytes.LastIndexByte(b, ')')
		if err != nil || i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return true
}

// TestOPAServerClose: Close is idempotent, ends the process and the
// supervisor's goroutines, removes the socket directory, and later
// decisions fail.
func TestOPAServerClose(t *testing.T) {
	s, err := StartOPAServer(OPAServerConfig{Bin: opaTestBin(t), PolicyDir: bundledPack(t),
		Timeout: 10 * time.Second, Logger: zerolog.Nop()})
	require.NoError(t, err)
	require.NoError(t, s.Check(t.Context()))
	for range 50 {
		_, err := s.Evaluate(t.Context(), opaInput(nil))
		require.NoError(t, err)
	}
	pid := int(s.pid.Load())
	require.NotEmpty(t, supervisorGoroutines(), "the leak check sees the running supervisor")
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())

	assert.True(t, processGone(pid), "opa %d survived Close", pid)
	assert.NoDirExists(t, s.dir)
	_, err = s.Evaluate(t.Context(), opaInput(nil))
	require.ErrorIs(t, err, errOPADown)
	assert.Eventually(t, func() bool { return supervisorGoroutines() == "" }, 5*time.Second, 10*time.Millisecond,
		"goroutines left behind:\n%s", supervisorGoroutines())
}

// supervisorGoroutines returns the stacks of goroutines running the
// supervisor, its REST client or a child's I/O.
func supervisorGoroutines() string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var left []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "engine.(*OPAServer)") || strings.Contains(g, "engine.(*RESTEvaluator)") ||
			strings.Contains(g, "os/exec.(*Cmd)") {
			left = append(left, g)
		}
	}
	return strings.Join(left, "\n\n")
}
