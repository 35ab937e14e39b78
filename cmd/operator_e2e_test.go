package cmd_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHealthcheck: `svc healthcheck URL` exits 0 on a 2xx answer and 1 on
// anything else, a redirect, a timeout, a refused connection or a bad URL
// included; usage errors exit 64.
func TestHealthcheck(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(http.StatusNoContent)
		case "/down":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/moved":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/slow":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{srv.URL + "/ok"}, 0, "204 No Content"},
		{[]string{srv.URL + "/down"}, 1, "503"},
		{[]string{srv.URL + "/moved"}, 1, "302"},
		{[]string{srv.URL + "/missing"}, 1, "404"},
		{[]string{"--timeout", "300ms", srv.URL + "/slow"}, 1, "Client.Timeout"},
		{[]string{deadURL + "/healthz"}, 1, "refused"},
		{[]string{"ftp://127.0.0.1/"}, 1, "want an http(s) URL"},
		{[]string{}, 64, "takes one argument"},
		{[]string{"--timeout", "0s", srv.URL + "/ok"}, 64, "--timeout"},
	} {
		r := runSvc(t, map[string]string{}, nil, append([]string{"healthcheck"}, tt.args...)...)
		assert.Equal(t, tt.code, r.code, "%v: %s", tt.args, r.output())
		assert.Contains(t, r.output(), tt.want, tt.args)
	}
	p := startEngine(t, baseEnv(t))
	r := runSvc(t, map[string]string{}, nil, "healthcheck", p.URL+"/healthz")
	assert.Equal(t, 0, r.code, "a running engine is healthy: %s", r.output())
}

// TestConfigCheckReportsEveryProblem: `svc config check` prints every
// invalid setting and unusable file at once, each naming its variable,
// and exits 2, where `svc serve` stops at the first; valid settings give a
// one-line summary and exit 0.
func TestConfigCheckReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	r := runSvc(t, map[string]string{}, nil, "config", "check")
	assert.Equal(t, 0, r.code, r.output())
	assert.Equal(t, "serve: ok: listens on 127.0.0.1:8080, policy by opa eval mode (opa), database temporary, audit log none\n", r.stdout)

	bad := map[string]string{
		"SVC_PORT": "70000", "SVC_LOG_LEVEL": "loud", "SVC_SYSLOG_PROTOCOL": "carrier-pigeon",
		"SVC_POLICY_DIR": filepath.Join(dir, "no-pack"), "SVC_OPA_BIN": filepath.Join(dir, "no-opa"),
		"SVC_RESOLVER_TOKENS": filepath.Join(dir, "no-tokens.json"), "SVC_HOLDS_PATH": filepath.Join(dir, "no-dir", "svc.db"),
		"SVC_AUDIT_LOG": filepath.Join(dir, "no-dir", "audit.jsonl"), "SVC_OPA_TOKEN": "secret-token",
	}
	r = runSvc(t, bad, nil, "config", "check")
	assert.Equal(t, 2, r.code, r.output())
	for name := range bad {
		assert.Regexp(t, `(?m)^svc: serve: (invalid )?`+name+`: `, r.stderr, "every problem is named")
	}
	assert.Contains(t, r.stderr, "svc: serve: 9 invalid setting(s)")
	assert.NotContains(t, r.output(), "secret-token", "a token is never echoed")
	serve := runSvc(t, bad, nil, "serve")
	assert.Equal(t, 2, serve.code)
	assert.NotContains(t, serve.stderr, "SVC_LOG_LEVEL", "svc serve names the first problem only")

	yaml := filepath.Join(dir, "svc.yaml")
	require.NoError(t, os.WriteFile(yaml, []byte("prot: 8080\n"), 0o600))
	r = runSvc(t, map[string]string{}, nil, "config", "check", "--config", yaml)
	assert.Equal(t, 2, r.code, r.output())
	assert.Contains(t, r.stderr, `unknown key "prot"`)

	r = runSvc(t, map[string]string{}, nil, "config", "check", "engine")
	assert.Equal(t, 64, r.code, r.output())
}

// TestConfigCheckConnector: the connector's settings and files, checked
// as `svc connector` reads them at start.
func TestConfigCheckConnector(t *testing.T) {
	dir := t.TempDir()
	badMap := filepath.Join(dir, "tenancy.json")
	require.NoError(t, os.WriteFile(badMap, []byte(`{"version": 1, "tenants": {}}`), 0o600))
	r := runSvc(t, map[string]string{"SVC_GATEWAY_TENANCY_MAP_FILE": badMap, "SVC_GATEWAY_TOOL_MAP_FILE": filepath.Join(dir, "no-tools.json"),
		"SVC_GATEWAY_LEDGER_PATH": filepath.Join(dir, "no-dir", "gateway.db"), "SVC_MODE": "audit"}, nil, "config", "check", "connector")
	assert.Equal(t, 2, r.code, r.output())
	for _, name := range []string{"SVC_CORE_URL", "SVC_CONNECTOR_TOKEN", "SVC_MODE", "SVC_GATEWAY_TENANCY_MAP_FILE",
		"SVC_GATEWAY_TOOL_MAP_FILE", "SVC_GATEWAY_LEDGER_PATH"} {
		assert.Contains(t, r.stderr, "svc: connector: "+name+":", "every problem is named")
	}

	good := map[string]string{"SVC_CORE_URL": "http://127.0.0.1:8080", "SVC_CONNECTOR_TOKEN": "t",
		"SVC_GATEWAY_TENANCY_MAP_FILE": "../tenancy.example.json", "SVC_GATEWAY_LEDGER_PATH": filepath.Join(dir, "gateway.db")}
	r = runSvc(t, good, nil, "config", "check", "serve", "connector")
	assert.Equal(t, 0, r.code, r.output())
	assert.Contains(t, r.stdout, "serve: ok: ")
	assert.Contains(t, r.stdout, "connector: ok: listens on 127.0.0.1:8081, engine http://127.0.0.1:8080, mode enforce, ledger "+
		filepath.Join(dir, "gateway.db")+", tenancy map ../tenancy.example.json\n")
}

// TestVersionNamesTheOPABinary: `svc version` prints svc's version and
// commit, the Go version, and the version of the opa svc serve would run.
func TestVersionNamesTheOPABinary(t *testing.T) {
	r := runSvc(t, map[string]string{}, nil, "version")
	require.Equal(t, 0, r.code, r.output())
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 4, r.stdout)
	assert.Regexp(t, `^svc \d+\.\d+\.\d+`, lines[0])
	assert.Regexp(t, `^commit: \S+$`, lines[1])
	assert.Equal(t, "go: "+runtime.Version(), lines[2])
	assert.Regexp(t, `^opa: 1\.22\.0 \(/\S+/opa\)$`, lines[3], "the pinned opa on PATH")

	missing := filepath.Join(t.TempDir(), "opa")
	r = runSvc(t, map[string]string{"SVC_OPA_BIN": missing}, nil, "version")
	require.Equal(t, 0, r.code, r.output())
	assert.Contains(t, r.stdout, "opa: not found (SVC_OPA_BIN="+missing+")\n")
}

// TestOPATokenSetting: SVC_OPA_TOKEN goes with SVC_OPA_URL only and is one
// header value; a bad one stops svc serve with exit 2, never echoed.
func TestOPATokenSetting(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"SVC_OPA_TOKEN": "tok-en"}, "SVC_OPA_TOKEN: is sent only to the OPA server of SVC_OPA_URL"},
		{map[string]string{"SVC_OPA_TOKEN": "tok en", "SVC_OPA_URL": "http://127.0.0.1:1"}, "SVC_OPA_TOKEN: must not contain spaces"},
	} {
		env := baseEnv(t)
		for k, v := range tt.env {
			env[k] = v
		}
		code, out := runFailing(t, env)
		assert.Equal(t, 2, code, out)
		assert.Contains(t, out, tt.want)
		assert.NotContains(t, out, tt.env["SVC_OPA_TOKEN"])
	}
}
