package cmd_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/database/pgtest"
)

// svcBin is the svc binary built once for the black-box tests.
var svcBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "svc-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	svcBin = filepath.Join(dir, "svc")
	// The svcfault tag builds in the crash hook of the crash tests, inert
	// unless its variable is set (ledger/fault_crash.go).
	args := []string{"build", "-tags", "svcfault", "-o", svcBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "github.com/svc-dev/svc")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build svc:", err)
		os.Exit(1)
	}
	code := pgtest.Main(m) // stops the throwaway PostgreSQL cluster, if a test started it
	os.RemoveAll(dir)
	os.Exit(code)
}

// engineProc is a running `svc serve` (or `svc connector`).
type engineProc struct {
	URL   string
	ready string // the log message that says it serves
	cmd   *exec.Cmd
	mu    sync.Mutex
	logs  bytes.Buffer
	token string
	done  chan struct{}
}

// baseEnv is the environment of every engine under test: a clean SVC_*
// slate with the audit log and database in the test's temp dir, and
// TMPDIR in a short directory of its own (the OPA socket's path must stay
// under 108 bytes), so the pack and socket directories of an engine the
// test kills with SIGKILL are removed with the test.
func baseEnv(t testing.TB) map[string]string {
	dir := t.TempDir()
	tmp, err := os.MkdirTemp("", "svc-e2e-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	return map[string]string{
		"SVC_PORT":       "0",
		"SVC_AUDIT_LOG":  filepath.Join(dir, "audit.jsonl"),
		"SVC_HOLDS_PATH": filepath.Join(dir, "svc.db"),
		"SVC_LOG_LEVEL":  "info",
		"TMPDIR":         tmp,
	}
}

func environ(env map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SVC_") {
			out = append(out, kv)
		}
	}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// startEngine runs `svc serve` and waits until it listens.
func startEngine(t testing.TB, env map[string]string) *engineProc {
	t.Helper()
	return startEngineArgs(t, env)
}

// startEngineArgs runs `svc serve args...` and waits until it listens.
func startEngineArgs(t testing.TB, env map[string]string, args ...string) *engineProc {
	t.Helper()
	p, err := launch(env, args...)
	require.NoError(t, err)
	waitServing(t, p)
	p.token = env["SVC_AUTH_TOKEN"]
	return p
}

// waitServing waits until p serves, failing t if it exits or takes 30 s;
// p is stopped when the test ends.
func waitServing(t testing.TB, p *engineProc) {
	t.Helper()
	t.Cleanup(func() { p.stop(t) })
	select {
	case <-p.serving():
	case <-p.done:
		t.Fatalf("svc serve exited before serving:\n%s", p.Logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("svc serve did not start:\n%s", p.Logs())
	}
}

func launch(env map[string]string, args ...string) (*engineProc, error) {
	return launchCommand(env, "svc serving", append([]string{"serve"}, args...)...)
}

// launchCommand runs `svc args...` and reads its address from the log
// record whose message is ready.
func launchCommand(env map[string]string, ready string, args ...string) (*engineProc, error) {
	return launchWith(svcBin, env, ready, args...)
}

// launchWith is launchCommand with the svc binary bin.
func launchWith(bin string, env map[string]string, ready string, args ...string) (*engineProc, error) {
	p := &engineProc{done: make(chan struct{}), ready: ready}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = environ(env)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	p.cmd.Stdout = io.Discard
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go p.scan(stderr)
	return p, nil
}

func (p *engineProc) scan(r io.Reader) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		p.mu.Lock()
		p.logs.WriteString(line + "\n")
		if p.URL == "" {
			var rec struct {
				Message string `json:"message"`
				Addr    string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Message == p.ready {
				p.URL = "http://" + rec.Addr
			}
		}
		p.mu.Unlock()
	}
	_ = p.cmd.Wait()
	close(p.done)
}

func (p *engineProc) serving() <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for {
			p.mu.Lock()
			ok := p.URL != ""
			p.mu.Unlock()
			if ok {
				close(ch)
				return
			}
			select {
			case <-p.done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return ch
}

// Logs returns what the engine has logged so far.
func (p *engineProc) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// logsWith returns the engine's log records whose message is msg.
func (p *engineProc) logsWith(msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(p.Logs(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["message"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// stop sends SIGTERM and waits for a graceful exit.
func (p *engineProc) stop(t testing.TB) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		t.Errorf("svc serve did not stop on SIGTERM:\n%s", p.Logs())
	}
}

// svcRun is how one run of the svc binary ended.
type svcRun struct {
	code           int
	stdout, stderr string
}

// output is what the run printed, standard output first.
func (r svcRun) output() string { return r.stdout + r.stderr }

// runSvc runs `svc args...` with environ(env) and stdin (nil: none), for a
// minute at most; only a failure to run it, or to see it end, fails t.
func runSvc(t *testing.T, env map[string]string, stdin io.Reader, args ...string) svcRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, svcBin, args...)
	cmd.Env = environ(env)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := svcRun{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ctx.Err() == nil {
		r.code = ee.ExitCode()
	} else {
		require.NoError(t, err, "svc %s:\n%s", strings.Join(args, " "), r.output())
	}
	return r
}

// runFailing runs `svc serve` expecting it to refuse to start.
func runFailing(t *testing.T, env map[string]string) (int, string) {
	t.Helper()
	return runFailingArgs(t, env)
}

// runFailingArgs runs `svc serve args...` expecting it to refuse to start.
func runFailingArgs(t *testing.T, env map[string]string, args ...string) (int, string) {
	t.Helper()
	r := runSvc(t, env, nil, append([]string{"serve"}, args...)...)
	require.NotZero(t, r.code, "svc serve should have refused to start:\n%s", r.output())
	return r.code, r.output()
}

// response is a decoded engine answer.
type response struct {
	Status int
	Body   map[string]any
	Header http.Header
}

func (r response) str(key string) string {
	s, _ := r.Body[key].(string)
	return s
}

// call sends a request with the engine's token (if any).
func (p *engineProc) call(t testing.TB, method, path string, body any) response {
	t.Helper()
	return p.callAs(t, p.token, method, path, body)
}

func (p *engineProc) callAs(t testing.TB, token, method, path string, body any) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, p.URL+path, rd)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return do(t, req)
}

// decide posts an envelope.
func (p *engineProc) decide(t testing.TB, env map[string]any) response {
	t.Helper()
	return p.call(t, "POST", "/v1/decide", env)
}

// envelope returns a fresh, valid envelope; edits are applied as
// "a.b" → value (nil deletes the key).
func envelope(edits map[string]any) map[string]any {
	env := map[string]any{
		"svc_version": "0.2",
		"agent":       map[string]any{"id": "agent-7", "on_behalf_of": "human:alice", "session_id": "sess-1"},
		"action":      map[string]any{"namespace": "db", "verb": "read", "ability": "db/get_rows"},
		"target":      map[string]any{"kind": "table", "ref": "core.users", "environment": "staging"},
		"params":      map[string]any{},
		"magnitude":   map[string]any{"count": 1},
		"axes":        map[string]any{"reversibility": "reversible", "blast_radius": "single", "externality": "internal"},
		"approval":    map[string]any{"present": false, "hold_id": nil},
		"context":     map[string]any{},
		"meta":        map[string]any{"timestamp": "2026-11-21T10:00:00Z", "nonce": "n", "signature": "stub"},
	}
	for path, v := range edits {
		parts := strings.Split(path, ".")
		m := env
		for _, p := range parts[:len(parts)-1] {
			next, ok := m[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[p] = next
			}
			m = next
		}
		if v == nil {
			delete(m, parts[len(parts)-1])
		} else {
			m[parts[len(parts)-1]] = v
		}
	}
	return env
}

// auditLines reads the JSONL audit log.
func auditLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "audit line %q", line)
		out = append(out, rec)
	}
	return out
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return raw
}

func countLines(s string) int { return len(strings.Split(strings.TrimSpace(s), "\n")) }

func jsonReader(t testing.TB, v any) io.Reader { return bytes.NewReader(mustJSON(t, v)) }

// do sends a prepared request and decodes the answer.
func do(t testing.TB, req *http.Request) response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := response{Status: resp.StatusCode, Header: resp.Header, Body: map[string]any{}}
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &out.Body), "body %s", raw)
	}
	return out
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }
