package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// root is the repository's root, from this package's directory.
const root = ".."

// Version and commit the test binary is built with, through the -ldflags
// of the Dockerfile.
const (
	buildVersion = "9.8.7-deploytest"
	buildCommit  = "0123456789abcdef"
)

// svcBin is svc built once, the way the Dockerfile builds it; opaBin is the
// pinned opa.
var svcBin, opaBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "svc-deploy-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	svcBin = filepath.Join(dir, "svc")
	ldflags := fmt.Sprintf("-X github.com/svc-dev/svc/cmd.Version=%s -X github.com/svc-dev/svc/cmd.Commit=%s", buildVersion, buildCommit)
	build := exec.Command("go", "build", "-ldflags", ldflags, "-o", svcBin, "github.com/svc-dev/svc")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build svc:", err)
		return 1
	}
	if opaBin, err = findOPA(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// findOPA returns the pinned opa that scripts/install-opa installs.
func findOPA() (string, error) {
	if p, err := exec.LookPath("opa"); err == nil {
		return p, nil
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		p := filepath.Join(strings.Split(strings.TrimSpace(string(out)), string(os.PathListSeparator))[0], "bin", "opa")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("opa not found on PATH or in $(go env GOPATH)/bin: run scripts/install-opa")
}

// repoFile returns the path of a repository file.
func repoFile(rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }

// readRepo returns a repository file's text.
func readRepo(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(repoFile(rel))
	require.NoError(t, err)
	return string(b)
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// proc is a process a test started; its output is kept for the failure
// message and scanned for the address it serves on.
type proc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

// startProc starts bin with args and exactly env (no inherited SVC_*
// variable), stopping it when the test ends.
func startProc(t *testing.T, env []string, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p, p
	require.NoError(t, p.cmd.Start())
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.stop() })
	return p
}

// Write keeps output.
func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// Output returns what the process printed so far.
func (p *proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// stop ends the process: SIGTERM, then SIGKILL after 20 s.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// servingAddr waits for svc's "... serving" log line and returns its addr.
func (p *proc) servingAddr(t *testing.T, message string) string {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		s := bufio.NewScanner(strings.NewReader(p.Output()))
		for s.Scan() {
			var line struct{ Message, Addr string }
			if json.Unmarshal(s.Bytes(), &line) == nil && line.Message == message && line.Addr != "" {
				return line.Addr
			}
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited before serving:\n%s", p.cmd.Path, p.Output())
		case <-deadline:
			t.Fatalf("%s did not log %q within 60 s:\n%s", p.cmd.Path, message, p.Output())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// baseEnviron is the test process's environment without any SVC_ variable.
func baseEnviron() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SVC_") {
			out = append(out, kv)
		}
	}
	return out
}

// runCmd runs bin with args and env, returning its exit code and output.
func runCmd(t *testing.T, env []string, bin string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, bin, args...)
	c.Env = env
	out, err := c.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok && ctx.Err() == nil {
		return ee.ExitCode(), string(out)
	}
	require.NoError(t, err, "%s %v:\n%s", bin, args, out)
	return 0, string(out)
}

// postJSON posts body with a bearer token and decodes the JSON answer.
func postJSON(t *testing.T, url, token string, body any) (int, map[string]any) {
	t.Helper()
	raw, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out), "answer of %s", url)
	return resp.StatusCode, out
}

// readEnvelope is an Action Envelope of a read-only, internal, reversible
// action: the bundled policy allows it.
func readEnvelope(session string) map[string]any {
	return map[string]any{
		"svc_version": "0.2",
		"agent":       map[string]any{"id": "agent-7", "on_behalf_of": "human:alice", "session_id": session},
		"action":      map[string]any{"namespace": "db", "verb": "read", "ability": "db/get_rows"},
		"target":      map[string]any{"kind": "table", "ref": "core.users", "environment": "staging"},
		"params":      map[string]any{},
		"magnitude":   map[string]any{"count": 1},
		"axes":        map[string]any{"reversibility": "reversible", "blast_radius": "single", "externality": "internal"},
		"approval":    map[string]any{"present": false, "hold_id": nil},
		"context":     map[string]any{},
		"meta":        map[string]any{"timestamp": "2026-11-21T10:00:00Z", "nonce": "n", "signature": "stub"},
	}
}

// TestVersionFromLdflags: the -ldflags the Dockerfile passes set the
// version and commit `svc version` prints, beside Go's and opa's versions.
func TestVersionFromLdflags(t *testing.T) {
	code, out := runCmd(t, append(baseEnviron(), "SVC_OPA_BIN="+opaBin), svcBin, "version")
	require.Equal(t, 0, code, out)
	assert.Equal(t, fmt.Sprintf("svc %s\ncommit: %s\ngo: %s\nopa: 1.22.0 (%s)\n", buildVersion, buildCommit, runtime.Version(), opaBin), out)
}
