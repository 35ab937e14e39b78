package deploy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// unit is a systemd unit file: each key's values, in order.
type unit map[string][]string

func loadUnit(t *testing.T, rel string) unit {
	t.Helper()
	u := unit{}
	s := bufio.NewScanner(strings.NewReader(readRepo(t, rel)))
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		require.True(t, ok, "%s: %q", rel, line)
		u[k] = append(u[k], v)
	}
	return u
}

// one returns the single value of key.
func (u unit) one(t *testing.T, key string) string {
	t.Helper()
	require.Len(t, u[key], 1, "%s", key)
	return u[key][0]
}

// units are the systemd units and their environment file examples.
var units = []struct{ unit, envExample, envFile string }{
	{"deploy/systemd/svc.service", "deploy/systemd/svc.env.example", "/etc/svc/svc.env"},
	{"deploy/systemd/svc-connector.service", "deploy/systemd/svc-connector.env.example", "/etc/svc/svc-connector.env"},
}

// TestSystemdUnitsAreSandboxed: each unit runs svc from /usr/local/bin as
// a dynamic user with its own state directory, in the usual sandbox,
// restarting on failure but not on an invalid setting.
func TestSystemdUnitsAreSandboxed(t *testing.T) {
	for _, tt := range units {
		u := loadUnit(t, tt.unit)
		for key, want := range map[string]string{
			"DynamicUser": "yes", "ProtectSystem": "strict", "NoNewPrivileges": "yes", "PrivateTmp": "yes",
			"ProtectHome": "yes", "Restart": "on-failure", "RestartPreventExitStatus": "2", "CapabilityBoundingSet": "",
			"PrivateDevices": "yes", "RestrictSUIDSGID": "yes", "EnvironmentFile": tt.envFile, "UMask": "0077",
		} {
			assert.Equal(t, want, u.one(t, key), "%s: %s", tt.unit, key)
		}
		assert.NotEmpty(t, u.one(t, "StateDirectory"), tt.unit)
		assert.Equal(t, "/var/lib/"+u.one(t, "StateDirectory"), u.one(t, "WorkingDirectory"), tt.unit)
		assert.True(t, strings.HasPrefix(u.one(t, "ExecStart"), "/usr/local/bin/svc "), tt.unit)
	}
}

// TestSystemdAnalyzeVerify runs `systemd-analyze verify` on both units,
// their ExecStart pointed at a built svc (verify checks that the binary
// exists); any message, even a warning about an unknown key, fails.
func TestSystemdAnalyzeVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	require.NoError(t, err, "systemd-analyze is missing: run scripts/install-test-deps (Debian package systemd)")
	dir := t.TempDir()
	var paths []string
	for _, tt := range units {
		text := strings.ReplaceAll(readRepo(t, tt.unit), "/usr/local/bin/svc", svcBin)
		p := filepath.Join(dir, filepath.Base(tt.unit))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		paths = append(paths, p)
	}
	out, err := exec.Command(analyze, append([]string{"verify"}, paths...)...).CombinedOutput()
	require.NoError(t, err, "systemd-analyze verify:\n%s", out)
	assert.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify has something to say")

	// The check is not blind: a misspelled key is reported.
	bad := filepath.Join(dir, "bad.service")
	require.NoError(t, os.WriteFile(bad, []byte(strings.Replace(readRepo(t, units[0].unit), "ProtectSystem=", "ProtectSystm=", 1)), 0o644))
	out, _ = exec.Command(analyze, "verify", strings.ReplaceAll(bad, "/usr/local/bin/svc", svcBin)).CombinedOutput()
	assert.Contains(t, string(out), "ProtectSystm")
}

// handRun is a unit's ExecStart run by hand as docs/deploy.md says, with
// the example environment file's variables and the unit's Environment=,
// the paths of the VM mapped into a temporary directory.
type handRun struct {
	env   map[string]string
	paths *strings.Replacer
}

func newHandRun(t *testing.T, unitRel, envRel string, u unit) handRun {
	t.Helper()
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	etc := filepath.Join(dir, "etc")
	for _, d := range []string{creds, etc, filepath.Join(dir, "state"), filepath.Join(dir, "log")} {
		require.NoError(t, os.MkdirAll(d, 0o700))
	}
	h := handRun{env: map[string]string{}, paths: strings.NewReplacer(
		"/usr/local/bin/svc", svcBin, "/usr/local/bin/opa", opaBin, "/var/lib/"+u.one(t, "StateDirectory"), filepath.Join(dir, "state"),
		"/var/log/svc", filepath.Join(dir, "log"), "/etc/svc", etc, "%d", creds)}
	// The files the docs install: the resolver tokens (as a credential) and the tenancy map.
	for src, dst := range map[string]string{"resolvers.example.json": filepath.Join(creds, "resolvers.json"),
		"tenancy.example.json": filepath.Join(etc, "tenancy.json")} {
		require.NoError(t, os.WriteFile(dst, []byte(readRepo(t, src)), 0o600))
	}
	for _, kv := range u["Environment"] {
		k, v, _ := strings.Cut(kv, "=")
		h.env[k] = h.paths.Replace(v)
	}
	s := bufio.NewScanner(strings.NewReader(readRepo(t, envRel)))
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		require.True(t, ok, "%s: %q is not NAME=value", envRel, line)
		h.env[k] = h.paths.Replace(v)
	}
	return h
}

// environ is the run's environment, with the listening port set to a free
// one (the examples' fixed ports may be taken on a shared machine).
func (h handRun) environ(portVar string) []string {
	env := baseEnviron()
	for k, v := range h.env {
		if k != portVar {
			env = append(env, k+"="+v)
		}
	}
	return append(env, portVar+"=0", "TMPDIR="+os.TempDir())
}

// command is the unit's ExecStart with the VM's paths mapped.
func (h handRun) command(t *testing.T, u unit) []string {
	t.Helper()
	return strings.Fields(h.paths.Replace(u.one(t, "ExecStart")))
}

// TestSystemdCommandLinesRunByHand: where systemd cannot run the units
// (PID 1 is not systemd here), their ExecStart runs by hand with the
// example environment files, as docs/deploy.md says: `svc config check`
// accepts the settings, the engine answers a decision, and the connector
// in front of it answers the gateway's guardrail call.
func TestSystemdCommandLinesRunByHand(t *testing.T) {
	engineUnit := loadUnit(t, units[0].unit)
	h := newHandRun(t, units[0].unit, units[0].envExample, engineUnit)
	code, out := runCmd(t, h.environ("SVC_PORT"), svcBin, "config", "check")
	require.Equal(t, 0, code, "svc config check of svc.env.example:\n%s", out)

	cmd := h.command(t, engineUnit)
	engine := startProc(t, h.environ("SVC_PORT"), cmd[0], cmd[1:]...)
	engineURL := "http://" + engine.servingAddr(t, "svc serving")
	status, body := postJSON(t, engineURL+"/v1/decide", h.env["SVC_AUTH_TOKEN"], readEnvelope("by-hand"))
	require.Equal(t, http.StatusOK, status, "%v\n%s", body, engine.Output())
	assert.Equal(t, "allow", body["decision"], "%v", body)
	_, err := os.Stat(h.env["SVC_AUDIT_LOG"])
	assert.NoError(t, err, "the audit log is where the environment file puts it")

	connUnit := loadUnit(t, units[1].unit)
	c := newHandRun(t, units[1].unit, units[1].envExample, connUnit)
	c.env["SVC_CORE_URL"] = engineURL
	c.env["SVC_CORE_TOKEN"] = h.env["SVC_AUTH_TOKEN"] // "the engine's SVC_AUTH_TOKEN", as the example says
	code, out = runCmd(t, c.environ("SVC_CONNECTOR_PORT"), svcBin, "config", "check", "connector")
	require.Equal(t, 0, code, "svc config check connector of svc-connector.env.example:\n%s", out)
	cmd = c.command(t, connUnit)
	conn := startProc(t, c.environ("SVC_CONNECTOR_PORT"), cmd[0], cmd[1:]...)
	url := "http://" + conn.servingAddr(t, "svc connector serving") + "/beta/litellm_basic_guardrail_api"
	raw, err := json.Marshal(map[string]any{"input_type": "response", "model": "gpt-4o",
		"request_data": map[string]any{"user_api_key_alias": "agent-prod"},
		"tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
			"function": map[string]any{"name": "crm_get_customer", "arguments": `{"customer_id": "c-1"}`}}}})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("x-api-key", c.env["SVC_CONNECTOR_TOKEN"])
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var verdict map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&verdict))
	assert.Equal(t, map[string]any{"action": "NONE"}, verdict, "a read by a key the example tenancy map binds\n%s", conn.Output())

	// docker-compose.yml's health checks of both, run against them.
	for service, addr := range map[string]string{"svc": strings.TrimPrefix(engineURL, "http://"), "connector": conn.servingAddr(t, "svc connector serving")} {
		check := stringList(t, loadCompose(t).service(t, service)["healthcheck"].(map[string]any)["test"])
		require.Equal(t, "/usr/local/bin/svc", check[1], service)
		args := strings.Split(strings.ReplaceAll(strings.Join(check[2:], "\x00"), "127.0.0.1:8080", addr), "\x00")
		require.NotEqual(t, check[2:], args, "the check probes port 8080 on loopback")
		code, out := runCmd(t, baseEnviron(), svcBin, args...)
		assert.Equal(t, 0, code, "the compose health check of %s: %s", service, out)
	}
}
