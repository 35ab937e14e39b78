package cmd_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// connectorToken is the connector token of the tests (SVC_CONNECTOR_TOKEN).
const connectorToken = "conn-token-e2e"

// fixtureDir holds the LiteLLM fixtures; CI has ../shared beside the clone.
var fixtureDir = filepath.Join("..", "..", "shared", "fixtures", "litellm")

// gateway is an engine with a connector in front of it, the engine reached
// through a proxy that counts the decide requests it forwards.
type gateway struct {
	engine    *engineProc
	engineEnv map[string]string
	conn      *engineProc
	env       map[string]string
	decides   *atomic.Int64
}

// fixture reads a request fixture.
func fixture(t testing.TB, name string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(fixtureDir, "requests", name))
	require.NoError(t, err, "the LiteLLM fixtures are read from %s (../shared beside the clone)", fixtureDir)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	return m
}

// countingProxy forwards to target and counts the POST /v1/decide requests.
func countingProxy(t *testing.T, target string) (string, *atomic.Int64) {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(u)
	n := &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/decide" {
			n.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, n
}

// testdataFile copies a file of connector/testdata into the test's temp dir.
func testdataFile(t testing.TB, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "connector", "testdata", name))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	return path
}

// connectorEnv is the environment of a connector in front of coreURL.
func connectorEnv(t testing.TB, coreURL string) map[string]string {
	return map[string]string{
		"SVC_CONNECTOR_PORT":           "0",
		"SVC_CORE_URL":                 coreURL,
		"SVC_CORE_TOKEN":               "adapter-token",
		"SVC_CONNECTOR_TOKEN":          connectorToken,
		"SVC_GATEWAY_TENANCY_MAP_FILE": testdataFile(t, "tenancy.json"),
		"SVC_GATEWAY_TOOL_MAP_FILE":    testdataFile(t, "tools.json"),
		"SVC_GATEWAY_HOLD_WAIT":        "0",
		"SVC_GATEWAY_LEDGER_PATH":      filepath.Join(t.TempDir(), "gateway.db"),
	}
}

// startConnector runs `svc connector` with env and waits until it serves.
func startConnector(t testing.TB, env map[string]string) *engineProc {
	t.Helper()
	p, err := launchCommand(env, "svc connector serving", "connector")
	require.NoError(t, err)
	waitServing(t, p)
	return p
}

// startGateway starts an engine (OPA server mode, resolver tokens) and a
// connector in front of it; extra overrides the connector's settings.
func startGateway(t *testing.T, extra map[string]string) *gateway {
	t.Helper()
	engine, engineEnv := holdsEngine(t, map[string]string{"SVC_OPA_MODE": "server"})
	proxy, n := countingProxy(t, engine.URL)
	env := connectorEnv(t, proxy)
	for k, v := range extra {
		env[k] = v
	}
	return &gateway{engine: engine, engineEnv: engineEnv, conn: startConnector(t, env), env: env, decides: n}
}

// guardrail posts a guardrail request with the connector token.
func (g *gateway) guardrail(t testing.TB, body any) response {
	t.Helper()
	return postKey(t, g.conn.URL+"/beta/litellm_basic_guardrail_api", connectorToken, body)
}

// postKey posts body with x-api-key key ("" sends none).
func postKey(t testing.TB, u, key string, body any) response {
	t.Helper()
	raw, ok := body.([]byte)
	if !ok {
		raw = mustJSON(t, body)
	}
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	return do(t, req)
}

// refusals reads the refusal payload of a BLOCKED answer's blocked_reason:
// "Svc: <reason> [rule=<rule>] <payload>".
func refusals(t testing.TB, r response) []map[string]any {
	t.Helper()
	require.Equal(t, 200, r.Status)
	require.Equal(t, "BLOCKED", r.str("action"), "%v", r.Body)
	msg := r.str("blocked_reason")
	require.True(t, strings.HasPrefix(msg, "Svc: "), msg)
	i := strings.Index(msg, "] {")
	require.Positive(t, i, msg)
	var p struct {
		Svc struct {
			Refused []map[string]any `json:"refused"`
			Version int              `json:"version"`
		} `json:"svc"`
	}
	require.NoError(t, json.Unmarshal([]byte(msg[i+2:]), &p), msg)
	require.Equal(t, 1, p.Svc.Version)
	for _, r := range p.Svc.Refused {
		require.Equal(t, "refused_at_gateway", r["stage"])
	}
	return p.Svc.Refused
}

// ledgerRows lists the connector's ledger rows, newest first.
func (g *gateway) ledgerRows(t *testing.T) []map[string]any {
	t.Helper()
	r := runSvc(t, map[string]string{"SVC_GATEWAY_LEDGER_PATH": g.env["SVC_GATEWAY_LEDGER_PATH"]}, nil,
		"connector", "ledger", "--limit", "10000", "-o", "json")
	require.Zero(t, r.code, r.output())
	var rows []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rows), r.stdout)
	return rows
}

// health reads /healthz with key ("" sends none).
func (g *gateway) health(t testing.TB, key string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, g.conn.URL+"/healthz", nil)
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	return do(t, req)
}

// counter reads one counter of the health document.
func counter(t testing.TB, h response, name string) float64 {
	t.Helper()
	c, ok := h.Body["counters"].(map[string]any)
	require.True(t, ok, "%v", h.Body)
	return c[name].(float64)
}

// readAll reads a response body (for non-JSON answers).
func readAll(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(raw)
}
