package cmd_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/transport"
	"github.com/svc-dev/svc/transport/transporttest"
)

// tlsFiles issues a certificate of ca to two files of a temporary
// directory and returns the settings that serve it.
func tlsFiles(t *testing.T, ca *transporttest.CA) (certFile, keyFile string) {
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca.WritePair(t, 1, certFile, keyFile)
	return certFile, keyFile
}

// httpsURL is the https URL of a process that logged its address as
// http://.
func httpsURL(p *engineProc) string { return "https://" + strings.TrimPrefix(p.URL, "http://") }

// servedSerial handshakes with the https server at u trusting ca and
// returns the serial number of its certificate.
func servedSerial(t *testing.T, u string, ca *transporttest.CA) int64 {
	t.Helper()
	roots, err := transport.RootCAs(ca.File)
	require.NoError(t, err)
	c, err := tls.Dial("tcp", strings.TrimPrefix(u, "https://"), transport.ClientConfig(roots))
	require.NoError(t, err)
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// postTLS posts body to u with x-api-key key, trusting ca.
func postTLS(t *testing.T, u, key string, ca *transporttest.CA, body any) response {
	t.Helper()
	roots, err := transport.RootCAs(ca.File)
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: transport.ClientConfig(roots)}, Timeout: time.Minute}
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(mustJSON(t, body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", key)
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := response{Status: resp.StatusCode, Body: map[string]any{}}
	require.NoError(t, json.Unmarshal(raw, &out.Body), "%s", raw)
	return out
}

// tlsEngine starts an engine with the adapter token serving a certificate
// of a new authority, which it returns.
func tlsEngine(t *testing.T) (*engineProc, map[string]string, *transporttest.CA) {
	ca := transporttest.NewCA(t, "svc-ca")
	env := baseEnv(t)
	env["SVC_AUTH_TOKEN"] = "adapter-token"
	env["SVC_TLS_CERT_FILE"], env["SVC_TLS_KEY_FILE"] = tlsFiles(t, ca)
	return startEngine(t, env), env, ca
}

func TestEngineServesTLSAndItsClientsVerifyIt(t *testing.T) {
	p, env, ca := tlsEngine(t)
	u := httpsURL(p)

	cli := map[string]string{"SVC_CORE_URL": u, "SVC_CORE_TOKEN": "adapter-token", "SVC_CA_FILE": ca.File}
	r := runSvc(t, cli, nil, "holds", "list")
	assert.Equal(t, 0, r.code, r.output())
	r = runSvc(t, cli, jsonReader(t, envelope(nil)), "decide", "-f", "-")
	assert.Equal(t, 0, r.code, "allowed over TLS: %s", r.output())

	cli["SVC_CA_FILE"] = transporttest.NewCA(t, "other-ca").File
	r = runSvc(t, cli, nil, "holds", "list")
	assert.Equal(t, 1, r.code, r.output())
	assert.Contains(t, r.stderr, "certificate signed by unknown authority")
	delete(cli, "SVC_CA_FILE")
	r = runSvc(t, cli, nil, "holds", "list")
	assert.Equal(t, 1, r.code, "the system's authorities do not know the test CA: %s", r.output())

	resp, err := http.Get(p.URL + "/healthz")
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP to the TLS port is refused")
	resp.Body.Close()

	assert.EqualValues(t, 1, servedSerial(t, u, ca))
	roots, err := transport.RootCAs(ca.File)
	require.NoError(t, err)
	old := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11} //nolint:gosec // the old client under test
	_, err = tls.Dial("tcp", strings.TrimPrefix(u, "https://"), old)
	assert.ErrorContains(t, err, "protocol version", "TLS 1.1 is refused")
	require.Eventually(t, func() bool {
		return strings.Contains(p.Logs(), `"component":"http"`) && strings.Contains(p.Logs(), "unsupported versions")
	}, 30*time.Second, 10*time.Millisecond, "the refused handshake is logged as JSON:\n%s", p.Logs())
	ca.WritePair(t, 2, env["SVC_TLS_CERT_FILE"], env["SVC_TLS_KEY_FILE"])
	assert.EqualValues(t, 2, servedSerial(t, u, ca), "the renewed certificate serves the next handshake, without a restart")
}

func TestConnectorServesTLSAndVerifiesTheEngine(t *testing.T) {
	engine, _, ca := tlsEngine(t)

	env := connectorEnv(t, httpsURL(engine))
	env["SVC_CA_FILE"] = ca.File
	env["SVC_TLS_CERT_FILE"], env["SVC_TLS_KEY_FILE"] = tlsFiles(t, ca)
	conn := startConnector(t, env)
	r := postTLS(t, httpsURL(conn)+"/beta/litellm_basic_guardrail_api", connectorToken, ca,
		fixture(t, "01_post_call_single_read_tool_call.json"))
	assert.Equal(t, 200, r.Status)
	assert.Equal(t, "NONE", r.str("action"), "the engine was reached over TLS and allowed: %v", r.Body)
	assert.EqualValues(t, 1, servedSerial(t, httpsURL(conn), ca))

	// Trusting another authority, the connector cannot reach the engine:
	// the call is blocked, never allowed.
	env["SVC_CA_FILE"] = transporttest.NewCA(t, "other-ca").File
	env["SVC_GATEWAY_LEDGER_PATH"] = filepath.Join(t.TempDir(), "gateway.db")
	wrong := startConnector(t, env)
	r = postTLS(t, httpsURL(wrong)+"/beta/litellm_basic_guardrail_api", connectorToken, ca,
		fixture(t, "01_post_call_single_read_tool_call.json"))
	assert.Equal(t, "BLOCKED", r.str("action"), "%v", r.Body)
}

func TestPlainHTTPOffLoopbackRefused(t *testing.T) {
	env := baseEnv(t)
	env["SVC_HOST"] = "0.0.0.0"
	code, out := runFailing(t, env)
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, "SVC_HOST")
	assert.Contains(t, out, "SVC_ALLOW_PLAINTEXT")
	assert.Contains(t, out, "SVC_TLS_CERT_FILE")

	env = connectorEnv(t, "http://127.0.0.1:1")
	env["SVC_CONNECTOR_HOST"] = "0.0.0.0"
	r := runSvc(t, env, nil, "connector")
	assert.Equal(t, 2, r.code, r.output())
	assert.Contains(t, r.stderr, "SVC_CONNECTOR_HOST")
	assert.Contains(t, r.stderr, "SVC_ALLOW_PLAINTEXT")

	env = connectorEnv(t, "http://engine.internal:8080")
	r = runSvc(t, env, nil, "connector")
	assert.Equal(t, 2, r.code, r.output())
	assert.Contains(t, r.stderr, "SVC_CORE_URL")
	assert.Contains(t, r.stderr, "tokens in clear")

	cli := map[string]string{"SVC_CORE_URL": "http://10.255.255.1:8080", "SVC_CORE_TOKEN": "t"}
	r = runSvc(t, cli, nil, "holds", "list")
	assert.Equal(t, 1, r.code, r.output())
	assert.Contains(t, r.stderr, "SVC_CORE_URL")
	assert.Contains(t, r.stderr, "SVC_ALLOW_PLAINTEXT")

	env = baseEnv(t)
	env["SVC_OPA_URL"] = "http://opa.internal:8181"
	code, out = runFailing(t, env)
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, "SVC_OPA_URL")
	assert.Contains(t, out, "tokens in clear")
}

func TestEngineVerifiesAnOPAServedOverTLS(t *testing.T) {
	ca := transporttest.NewCA(t, "svc-ca")
	certFile, keyFile := tlsFiles(t, ca)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	opa := exec.Command("opa", "run", "--server", "--addr", addr, "--tls-cert-file", certFile,
		"--tls-private-key-file", keyFile, "--log-level", "error", "--skip-version-check", bundledPackDir(t))
	require.NoError(t, opa.Start(), "opa missing? run scripts/install-test-deps")
	t.Cleanup(func() { _ = opa.Process.Kill(); _ = opa.Wait() })
	roots, err := transport.RootCAs(ca.File)
	require.NoError(t, err)
	probe := &http.Client{Transport: &http.Transport{TLSClientConfig: transport.ClientConfig(roots)}}
	require.Eventually(t, func() bool {
		resp, err := probe.Get("https://" + addr + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 20*time.Millisecond, "opa did not serve TLS")

	env := baseEnv(t)
	env["SVC_OPA_URL"] = "https://" + addr
	env["SVC_CA_FILE"] = transporttest.NewCA(t, "other-ca").File
	code, out := runFailing(t, env)
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "certificate signed by unknown authority")

	env["SVC_CA_FILE"] = ca.File
	p := startEngine(t, env)
	assert.Equal(t, "allow", p.decide(t, envelope(nil)).str("decision"))
}

// TestConfigCheckNamesTheOperationsSettings: svc config check reports the
// TLS, plain-HTTP and retention problems with the others, for both
// processes.
func TestConfigCheckNamesTheOperationsSettings(t *testing.T) {
	dir := t.TempDir()
	bad := map[string]string{"SVC_HOST": "0.0.0.0", "SVC_TLS_KEY_FILE": filepath.Join(dir, "key.pem"),
		"SVC_RETENTION_DAYS": "-1", "SVC_CA_FILE": filepath.Join(dir, "no-ca.pem"), "SVC_OPA_URL": "http://opa.internal:8181"}
	r := runSvc(t, bad, nil, "config", "check")
	assert.Equal(t, 2, r.code, r.output())
	for _, name := range []string{"SVC_TLS_CERT_FILE", "SVC_RETENTION_DAYS", "SVC_CA_FILE", "SVC_OPA_URL"} {
		assert.Regexp(t, `(?m)^svc: serve: (invalid )?`+name+`: `, r.stderr, "every problem is named")
	}

	conn := map[string]string{"SVC_CONNECTOR_HOST": "0.0.0.0", "SVC_CONNECTOR_TOKEN": "t", "SVC_CORE_URL": "http://engine.internal:8080"}
	r = runSvc(t, conn, nil, "config", "check", "connector")
	assert.Equal(t, 2, r.code, r.output())
	for _, name := range []string{"SVC_CONNECTOR_HOST", "SVC_CORE_URL"} {
		assert.Regexp(t, `(?m)^svc: connector: (invalid )?`+name+`: .*SVC_ALLOW_PLAINTEXT`, r.stderr)
	}
	conn["SVC_ALLOW_PLAINTEXT"] = "1"
	r = runSvc(t, conn, nil, "config", "check", "connector")
	assert.Equal(t, 0, r.code, r.output())
}
