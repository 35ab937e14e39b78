package deploy_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// authzPolicy is OPA's authorization policy of the compose layout.
const authzPolicy = "deploy/opa/authz.rego"

// composeOPA is the real opa run as docker-compose.yml runs it: token
// authentication, the authorization policy file of the repository, the
// policy pack, SVC_OPA_TOKEN in its environment.
type composeOPA struct {
	url  string
	addr string
	p    *proc
}

// startComposeOPA starts opa on a free port with docker-compose.yml's flags
// and token, and waits until GET /health answers the token.
func startComposeOPA(t *testing.T, token string) *composeOPA {
	t.Helper()
	return startComposeOPAOn(t, freeAddr(t), token)
}

func startComposeOPAOn(t *testing.T, addr, token string) *composeOPA {
	t.Helper()
	args := append([]string{"run", "--server", "--addr", addr, "--skip-version-check", "--log-level", "error"},
		composeOPAFlags(t)...)
	args = append(args, repoFile("rego/policy"), repoFile(authzPolicy))
	o := &composeOPA{url: "http://" + addr, addr: addr}
	o.p = startProc(t, append(baseEnviron(), "SVC_OPA_TOKEN="+token), opaBin, args...)
	require.Eventually(t, func() bool { return o.status(t, http.MethodGet, "/health", token, "") == http.StatusOK },
		60*time.Second, 50*time.Millisecond, "opa did not start:\n%s", o.p.Output())
	return o
}

// composeOPAFlags are the authentication and authorization flags of the
// opa service of docker-compose.yml.
func composeOPAFlags(t *testing.T) []string {
	t.Helper()
	var flags []string
	for _, a := range stringList(t, loadCompose(t).service(t, "opa")["command"]) {
		if strings.HasPrefix(a, "--authentication") || strings.HasPrefix(a, "--authorization") {
			flags = append(flags, a)
		}
	}
	require.ElementsMatch(t, []string{"--authentication=token", "--authorization=basic"}, flags,
		"the opa service must run with token authentication and basic authorization")
	return flags
}

// status sends one request and returns the answer's status, 0 when none.
func (o *composeOPA) status(t *testing.T, method, path, token, body string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, o.url+path, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestComposeOPARefusesAllButSvcsQuery: the compose OPA lets svc's token
// ask the decision query and /health, and refuses everything else, above
// all replacing the policy, with or without the token.
func TestComposeOPARefusesAllButSvcsQuery(t *testing.T) {
	const token = "opa-token-of-svc"
	o := startComposeOPA(t, token)
	const policy = "package svc.policy\n\nimport rego.v1\n\ndecision := {\"decision\": \"allow\", \"rule\": \"x\", \"reason\": \"x\"}\n"
	for _, tt := range []struct {
		name, method, path, token, body string
		want                            int
	}{
		{"replace the policy, no token", http.MethodPut, "/v1/policies/svc", "", policy, http.StatusUnauthorized},
		{"replace the policy, svc's token", http.MethodPut, "/v1/policies/svc", token, policy, http.StatusUnauthorized},
		{"replace the policy, wrong token", http.MethodPut, "/v1/policies/svc", "guess", policy, http.StatusUnauthorized},
		{"delete a policy", http.MethodDelete, "/v1/policies/authz", token, "", http.StatusUnauthorized},
		{"write data", http.MethodPut, "/v1/data/svc/policy", token, `{}`, http.StatusUnauthorized},
		{"read all data", http.MethodGet, "/v1/data", token, "", http.StatusUnauthorized},
		{"list policies", http.MethodGet, "/v1/policies", token, "", http.StatusUnauthorized},
		{"ad-hoc query", http.MethodPost, "/v1/query", token, `{"query": "data"}`, http.StatusUnauthorized},
		{"decision, no token", http.MethodPost, "/v1/data/svc/policy/decision", "", `{"input": {}}`, http.StatusUnauthorized},
		{"decision, wrong token", http.MethodPost, "/v1/data/svc/policy/decision", "guess", `{"input": {}}`, http.StatusUnauthorized},
		{"decision by GET", http.MethodGet, "/v1/data/svc/policy/decision", token, "", http.StatusUnauthorized},
		{"health, no token", http.MethodGet, "/health", "", "", http.StatusUnauthorized},
		{"decision, svc's token", http.MethodPost, "/v1/data/svc/policy/decision?strict-builtin-errors=true", token, `{"input": {}}`, http.StatusOK},
		{"health, svc's token", http.MethodGet, "/health", token, "", http.StatusOK},
	} {
		assert.Equal(t, tt.want, o.status(t, tt.method, tt.path, tt.token, tt.body), tt.name)
	}
}

// engineEnv is the environment of a `svc serve` in front of the compose OPA
// at opaURL, with its state in a temporary directory.
func engineEnv(t *testing.T, opaURL, opaToken string) []string {
	t.Helper()
	dir := t.TempDir()
	env := append(baseEnviron(), "SVC_PORT=0", "SVC_AUTH_TOKEN=adapter-token", "SVC_OPA_URL="+opaURL,
		"SVC_HOLDS_PATH="+filepath.Join(dir, "svc.db"), "SVC_AUDIT_LOG="+filepath.Join(dir, "audit.jsonl"))
	if opaToken != "" {
		env = append(env, "SVC_OPA_TOKEN="+opaToken)
	}
	return env
}

// TestSvcDecidesThroughComposeOPAWithItsToken: svc with SVC_OPA_TOKEN
// decides through the locked-down OPA; without the token it refuses to
// start; and when OPA stops accepting its token, every decision is a deny.
func TestSvcDecidesThroughComposeOPAWithItsToken(t *testing.T) {
	const token = "opa-token-of-svc"
	o := startComposeOPA(t, token)

	code, out := runCmd(t, engineEnv(t, o.url, ""), svcBin, "serve")
	assert.Equal(t, 1, code, "svc without the token must not start:\n%s", out)
	assert.Contains(t, out, "401", "the start-up check names OPA's refusal")

	engine := startProc(t, engineEnv(t, o.url, token), svcBin, "serve")
	url := "http://" + engine.servingAddr(t, "svc serving") + "/v1/decide"
	status, body := postJSON(t, url, "adapter-token", readEnvelope("s-1"))
	require.Equal(t, http.StatusOK, status, "%v", body)
	assert.Equal(t, "allow", body["decision"], "%v", body)
	assert.Equal(t, "svc.policy/read_only_internal", body["rule"], "%v", body)

	// OPA restarted with another token: svc's is refused, so it denies.
	o.p.stop()
	startComposeOPAOn(t, o.addr, "rotated-token")
	status, body = postJSON(t, url, "adapter-token", readEnvelope("s-2"))
	assert.Equal(t, http.StatusInternalServerError, status, "a fault of the decision path (docs/api.md)")
	assert.Equal(t, "deny", body["decision"], "%v", body)
	assert.Equal(t, "svc.core/internal_error", body["rule"], "%v", body)
}

// TestComposeOPAHealthcheckUsesTheToken runs the opa service's health
// check of docker-compose.yml with the real opa binary: healthy against an
// OPA holding the same SVC_OPA_TOKEN, unhealthy with another token.
func TestComposeOPAHealthcheckUsesTheToken(t *testing.T) {
	test := stringList(t, loadCompose(t).service(t, "opa")["healthcheck"].(map[string]any)["test"])
	require.Equal(t, []string{"CMD", "/opa", "eval", "--fail"}, test[:4], "the check runs the image's opa")
	require.Len(t, test, 5)
	o := startComposeOPA(t, "health-token")
	expr := strings.ReplaceAll(test[4], "127.0.0.1:8181", o.addr)
	require.NotEqual(t, test[4], expr, "the check asks OPA's port 8181 on loopback")
	for token, want := range map[string]int{"health-token": 0, "other-token": 1} {
		code, out := runCmd(t, append(baseEnviron(), "SVC_OPA_TOKEN="+token), opaBin, "eval", "--fail", expr)
		assert.Equal(t, want, code, "token %s:\n%s", token, out)
	}
}
