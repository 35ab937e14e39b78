package cmd_test

import (
	"crypto/tls"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigFileAndFlagPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "svc.yaml")
	fileAudit := filepath.Join(dir, "from-file.jsonl")
	flagAudit := filepath.Join(dir, "from-flag.jsonl")
	require.NoError(t, os.WriteFile(cfgFile, []byte("freeze: true\naudit_log: "+fileAudit+"\nmax_body_bytes: 2048\n"), 0o600))
	env := baseEnv(t)
	delete(env, "SVC_AUDIT_LOG")
	env["SVC_MAX_BODY_BYTES"] = "4096" // env beats the file
	p, err := launch(env, "--config", cfgFile, "--audit-log", flagAudit)
	require.NoError(t, err)
	t.Cleanup(func() { p.stop(t) })
	<-p.serving()
	require.NotEmpty(t, p.URL, p.Logs())

	r := p.decide(t, envelope(map[string]any{"action.verb": "delete"}))
	assert.Equal(t, "svc.policy/frozen", r.str("rule"), "the file sets freeze")
	r = p.decide(t, envelope(map[string]any{"params.blob": strings.Repeat("x", 2500)}))
	assert.NotEqual(t, 413, r.Status, "SVC_MAX_BODY_BYTES=4096 from the environment beats the file's 2048")
	p.stop(t)
	assert.NotEmpty(t, auditLines(t, flagAudit), "--audit-log beats the file")
	_, err = os.Stat(fileAudit)
	assert.True(t, os.IsNotExist(err))

	code, out := runFailingArgs(t, env, "--config", filepath.Join(dir, "missing.yaml"))
	assert.Equal(t, 2, code)
	assert.Contains(t, out, "missing.yaml")
}

func TestClientVerifiesTLS(t *testing.T) {
	p := startEngine(t, baseEnv(t))
	target, err := url.Parse(p.URL)
	require.NoError(t, err)
	proxy := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(target))
	proxy.TLS = &tls.Config{Certificates: []tls.Certificate{newTestCA(t).serverCert(t)}}
	proxy.StartTLS()
	t.Cleanup(proxy.Close)
	run := func(verify string) (int, string) {
		env := map[string]string{"SVC_CORE_URL": proxy.URL}
		if verify != "" {
			env["SVC_VERIFY_SSL"] = verify
		}
		r := runSvc(t, env, nil, "holds", "list")
		return r.code, r.output()
	}
	code, out := run("")
	assert.Equal(t, 1, code, "certificates are verified by default")
	assert.Contains(t, out, "certificate")
	code, out = run("false")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "(no holds)")
}

// TestExportProblemsReportedTogether: a bad SVC_SYSLOG_TLS_CA is a
// configuration error (exit 2) like the other export settings, found before
// anything starts, and every export problem is reported at once.
func TestExportProblemsReportedTogether(t *testing.T) {
	notPEM := filepath.Join(t.TempDir(), "ca.txt")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o600))
	tlsSyslog := map[string]string{"SVC_SYSLOG_ENABLED": "true", "SVC_SYSLOG_PROTOCOL": "tls",
		"SVC_SYSLOG_ADDRESS": "127.0.0.1:6514"}
	cases := []struct {
		name string
		set  map[string]string
		want []string
	}{
		{"missing CA", map[string]string{"SVC_SYSLOG_TLS_CA": "/nonexistent/ca.pem"},
			[]string{"SVC_SYSLOG_TLS_CA: open /nonexistent/ca.pem"}},
		{"CA that is not PEM", map[string]string{"SVC_SYSLOG_TLS_CA": notPEM},
			[]string{"SVC_SYSLOG_TLS_CA: no PEM certificate in " + notPEM}},
		{"queue size and syslog", map[string]string{"SVC_SYSLOG_TLS_CA": notPEM, "SVC_WEBHOOK_QUEUE_SIZE": "0",
			"SVC_SYSLOG_FACILITY": "local8"},
			[]string{"SVC_SYSLOG_TLS_CA: no PEM certificate", `SVC_WEBHOOK_QUEUE_SIZE: must be an integer from 1 to 100000, got "0"`,
				`SVC_SYSLOG_FACILITY: unknown facility "local8"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := baseEnv(t)
			for k, v := range tlsSyslog {
				env[k] = v
			}
			for k, v := range c.set {
				env[k] = v
			}
			code, out := runFailing(t, env)
			assert.Equal(t, 2, code, out)
			assert.Contains(t, out, "svc: invalid configuration: ")
			for _, w := range c.want {
				assert.Contains(t, out, w)
			}
			assert.NotContains(t, out, "svc cannot start", "found before anything starts")
		})
	}
}
