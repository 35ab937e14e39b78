package cmd_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConnectorFixtures sends every LiteLLM fixture through a connector in
// front of a real engine (real opa, bundled policy, the test tool map) and
// checks the answer, the refusals, the engine requests made and the ledger.
func TestConnectorFixtures(t *testing.T) {
	g := startGateway(t, nil)
	cases := []struct {
		file     string
		action   string
		decides  int64
		refused  []string // error of each refusal, in order
		rule     string   // rule of the first refusal
		session  string   // ledger session of the first call ("" when no row)
		outcomes []string // ledger outcomes of the calls, in order
	}{
		{"01_post_call_single_read_tool_call.json", "NONE", 1, nil, "",
			"gateway:acme:1a9d6319-c4a4-49ea-9005-1401186eb4bf", []string{"allow"}},
		{"02_post_call_destructive_delete_production.json", "BLOCKED", 1, []string{"svc_denied"},
			"svc.policy/irreversible_systemic_prod", "gateway:acme:oncall-runbook-7731", []string{"deny"}},
		{"03_post_call_two_tool_calls_allow_and_deny.json", "BLOCKED", 2, []string{"svc_hold_timeout"},
			"svc.policy/irreversible_broad_prod", "gateway:acme-billing:customer-ops-run-20261104-0117", []string{"allow", "hold_timeout"}},
		{"04_post_call_text_only_no_tool_calls.json", "NONE", 0, nil, "", "", nil},
		{"05_pre_call_prompt_and_tools.json", "NONE", 0, nil, "", "", nil},
		{"06_post_call_unmapped_key_hash_only.json", "BLOCKED", 0, []string{"svc_tenant_unmapped"},
			"svc.connector/tenant_unmapped", "", []string{"unmapped"}},
		{"07_post_call_svc_session_in_additional_params.json", "NONE", 1, nil, "",
			"gateway:acme-billing:sess_01JC9ZQ3R8T2V6X4Y7B1N5M0KD", []string{"allow"}},
		{"08_post_call_header_svc_session_forwarded.json", "BLOCKED", 1, []string{"svc_hold_timeout"},
			"svc.policy/irreversible_broad_prod", "gateway:acme:sess_01JC9ZV6F0H3K8M2P5R9T1W4XA", []string{"hold_timeout"}},
		{"09_post_call_header_svc_session_redacted.json", "BLOCKED", 1, []string{"svc_hold_timeout"},
			"svc.policy/irreversible_broad_prod", "gateway:acme:oncall-runbook-7731", []string{"hold_timeout"}},
		{"10_post_call_streamed_end_of_stream_tool_call.json", "BLOCKED", 1, []string{"svc_hold_timeout"},
			"svc.policy/irreversible_broad_prod", "gateway:acme-billing:customer-ops-run-20261104-0117", []string{"hold_timeout"}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			body := fixture(t, tc.file)
			before, rowsBefore := g.decides.Load(), len(g.ledgerRows(t))
			r := g.guardrail(t, body)
			require.Equal(t, 200, r.Status)
			require.Equal(t, tc.action, r.str("action"), "%v", r.Body)
			assert.Equal(t, tc.decides, g.decides.Load()-before, "engine decide requests")
			if tc.action == "BLOCKED" {
				refused := refusals(t, r)
				var codes []string
				for _, x := range refused {
					codes = append(codes, x["error"].(string))
					if x["error"] == "svc_hold_timeout" {
						require.NotEmpty(t, x["hold_id"])
						require.Contains(t, x["reason"], x["hold_id"])
					}
				}
				require.Equal(t, tc.refused, codes)
				require.Equal(t, tc.rule, refused[0]["rule"])
				require.Contains(t, r.str("blocked_reason"), "[rule="+tc.rule+"]")
			} else {
				require.NotContains(t, r.Body, "blocked_reason")
			}
			rows := g.ledgerRows(t)
			require.Len(t, rows, rowsBefore+len(tc.outcomes))
			for i, want := range tc.outcomes {
				row := rows[len(tc.outcomes)-1-i] // newest first
				assert.Equal(t, want, row["outcome"])
				assert.Equal(t, "generic_guardrail_api", row["transport"])
				for _, col := range []string{"api_base_host", "deployment_id", "provider"} {
					assert.Nil(t, row[col], col)
				}
				// Path 1 answers BLOCKED for the whole response when a call
				// is refused: every call of it was refused at the gateway.
				stage := "refused_at_gateway"
				if want == "allow" {
					if !slices.ContainsFunc(tc.outcomes, func(o string) bool { return o != "allow" }) {
						stage = "allowed_at_gateway"
					}
					assert.NotEmpty(t, row["decision_id"])
					assert.NotEmpty(t, row["envelope_hash"])
				}
				assert.Equal(t, stage, row["enforcement_stage"])
				if i == 0 && tc.session != "" {
					assert.Equal(t, tc.session, row["session"])
				}
			}
		})
	}
}

// TestConnectorLedgerHoldsNoProseOrKey checks that the ledger file carries
// neither the assistant's text nor the virtual key's hash.
func TestConnectorLedgerHoldsNoProseOrKey(t *testing.T) {
	g := startGateway(t, nil)
	body := fixture(t, "02_post_call_destructive_delete_production.json")
	refusals(t, g.guardrail(t, body))
	g.conn.stop(t)
	table := runSvc(t, map[string]string{"SVC_GATEWAY_LEDGER_PATH": g.env["SVC_GATEWAY_LEDGER_PATH"]}, nil, "connector", "ledger")
	require.Zero(t, table.code, table.output())
	require.Contains(t, table.stdout, "OUTCOME")
	require.Contains(t, table.stdout, "svc.policy/irreversible_systemic_prod")
	require.Contains(t, table.stdout, "refused_at_gateway")
	require.Equal(t, 2, countLines(table.stdout), "a header and one row")
	unset := runSvc(t, nil, nil, "connector", "ledger")
	require.Equal(t, 2, unset.code, unset.output())
	require.Contains(t, unset.stderr, "SVC_GATEWAY_LEDGER_PATH")
	missing := filepath.Join(t.TempDir(), "typo.db")
	none := runSvc(t, map[string]string{"SVC_GATEWAY_LEDGER_PATH": missing}, nil, "connector", "ledger")
	require.Equal(t, 1, none.code, none.output())
	require.Contains(t, none.stderr, "no ledger to read at "+missing)
	require.NoFileExists(t, missing, "reading a ledger creates none")
	raw, err := os.ReadFile(g.env["SVC_GATEWAY_LEDGER_PATH"])
	require.NoError(t, err)
	wal, _ := os.ReadFile(g.env["SVC_GATEWAY_LEDGER_PATH"] + "-wal")
	for _, secret := range []string{"stale session rows", "b24a3b36a357749f1a9cac75992995f76ae2f55861598c3d2d1fbd55d9ccb490"} {
		require.NotContains(t, string(raw)+string(wal), secret)
	}
}

// TestConnectorRoutesAndAuth: only the two POST routes, /healthz and
// /metrics exist; a wrong or missing key is 401 and counted.
func TestConnectorRoutesAndAuth(t *testing.T) {
	g := startGateway(t, nil)
	body := fixture(t, "01_post_call_single_read_tool_call.json")
	u := g.conn.URL + "/beta/litellm_basic_guardrail_api"
	require.Equal(t, 401, postKey(t, u, "", body).Status)
	require.Equal(t, 401, postKey(t, u, "wrong", body).Status)
	require.Equal(t, 401, postKey(t, g.conn.URL+"/v1/gateway/tool-calls", "wrong", map[string]any{}).Status)
	for _, path := range []string{"/beta/gateway_basic_guardrail_api", "/v1/decide", "/", "/beta/litellm_basic_guardrail_api/x",
		"//beta/litellm_basic_guardrail_api", "/beta/./litellm_basic_guardrail_api", "/beta/x/../litellm_basic_guardrail_api",
		"//healthz", "/healthz/"} {
		resp, err := http.Post(g.conn.URL+path, "application/json", strings.NewReader("{}"))
		require.NoError(t, err)
		readAll(t, resp)
		require.Equal(t, 404, resp.StatusCode, path)
	}
	resp, err := http.Get(u)
	require.NoError(t, err)
	readAll(t, resp)
	require.Equal(t, 405, resp.StatusCode)
	for _, path := range []string{"/healthz", "/metrics"} {
		resp, err := http.Head(g.conn.URL + path)
		require.NoError(t, err)
		readAll(t, resp)
		require.Equal(t, 405, resp.StatusCode, "HEAD %s: only GET is served", path)
		require.Equal(t, "GET", resp.Header.Get("Allow"))
	}
	for path, want := range map[string]int{"/beta/litellm_basic_guardrail_api": 405, "/nope": 404} {
		resp, err := http.Head(g.conn.URL + path)
		require.NoError(t, err)
		readAll(t, resp)
		require.Equal(t, want, resp.StatusCode, "HEAD %s", path)
	}
	require.Zero(t, g.decides.Load(), "refused requests never reach the engine")

	open := g.health(t, "")
	require.Equal(t, 200, open.Status)
	require.Equal(t, "ok", open.str("status"))
	require.Equal(t, true, open.Body["auth_required"])
	require.Equal(t, "/beta/litellm_basic_guardrail_api", open.str("endpoint"))
	require.NotContains(t, open.Body, "counters")
	require.Equal(t, map[string]any{"loaded": true, "orgs": float64(3), "loaded_at": open.Body["tenancy"].(map[string]any)["loaded_at"]}, open.Body["tenancy"])
	require.NotContains(t, g.health(t, "wrong").Body, "counters")
	h := g.health(t, connectorToken)
	require.Equal(t, float64(3), counter(t, h, "unauthorised"))

	metrics := func(key string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, g.conn.URL+"/metrics", nil)
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		return resp.StatusCode, readAll(t, resp)
	}
	code, _ := metrics("")
	require.Equal(t, 401, code)
	require.Equal(t, 200, g.guardrail(t, body).Status)
	code, text := metrics(connectorToken)
	require.Equal(t, 200, code)
	req, err := http.NewRequest(http.MethodGet, g.conn.URL+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "bearer "+connectorToken)
	lower, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	readAll(t, lower)
	require.Equal(t, 200, lower.StatusCode, "the auth scheme is case-insensitive")
	require.Contains(t, text, "svc_connector_unauthorised_total 4")
	require.Contains(t, text, "svc_connector_allowed_total 1")
	require.Contains(t, text, `svc_connector_tool_call_duration_seconds_count{outcome="allow"} 1`)
}

// TestConnectorCountersMove checks each counter of the health document.
func TestConnectorCountersMove(t *testing.T) {
	g := startGateway(t, nil)
	for _, f := range []string{"01_post_call_single_read_tool_call.json", "02_post_call_destructive_delete_production.json",
		"03_post_call_two_tool_calls_allow_and_deny.json", "04_post_call_text_only_no_tool_calls.json",
		"05_pre_call_prompt_and_tools.json", "06_post_call_unmapped_key_hash_only.json"} {
		require.Equal(t, 200, g.guardrail(t, fixture(t, f)).Status)
	}
	bad := postKey(t, g.conn.URL+"/beta/litellm_basic_guardrail_api", connectorToken, []byte(`{"input_type":"response","model":5}`))
	require.Equal(t, "BLOCKED", bad.str("action"))
	h := g.health(t, connectorToken)
	for name, want := range map[string]float64{"responses_seen": 5, "tool_calls_decided": 5, "allowed": 2, "blocked": 3,
		"pre_call_requests": 1, "unmapped_tenant": 1, "internal_errors": 0, "unauthorised": 0, "invalid_requests": 1} {
		assert.Equal(t, want, counter(t, h, name), name)
	}
}

// TestConnectorEngineDown: an engine that cannot be reached refuses every
// call under svc.core/fail_closed, with a 200 the gateway cannot fail open.
func TestConnectorEngineDown(t *testing.T) {
	env := connectorEnv(t, "http://127.0.0.1:1")
	p := startConnector(t, env)
	r := postKey(t, p.URL+"/beta/litellm_basic_guardrail_api", connectorToken, fixture(t, "01_post_call_single_read_tool_call.json"))
	refused := refusals(t, r)
	require.Len(t, refused, 1)
	require.Equal(t, "svc.core/fail_closed", refused[0]["rule"])
	require.Equal(t, "svc_fail_closed", refused[0]["error"])
	require.Contains(t, refused[0]["reason"], "engine unreachable (connection failed)")
	require.NotContains(t, r.str("blocked_reason"), "127.0.0.1:1", "the engine's address does not reach the client")
	p.stop(t)
	rows := runSvc(t, map[string]string{"SVC_GATEWAY_LEDGER_PATH": env["SVC_GATEWAY_LEDGER_PATH"]}, nil, "connector", "ledger", "-o", "json")
	require.Zero(t, rows.code, rows.output())
	require.Contains(t, rows.stdout, "engine unreachable at http://127.0.0.1:1", "the ledger keeps it for the operator")
}

// TestConnectorObserveMode: nothing is blocked, but the ledger and the
// counters say what enforce would have done.
func TestConnectorObserveMode(t *testing.T) {
	g := startGateway(t, map[string]string{"SVC_MODE": "observe", "SVC_GATEWAY_HOLD_WAIT": "30"})
	for _, f := range []string{"02_post_call_destructive_delete_production.json", "06_post_call_unmapped_key_hash_only.json",
		"08_post_call_header_svc_session_forwarded.json"} {
		r := g.guardrail(t, fixture(t, f))
		require.Equal(t, "NONE", r.str("action"), "%s: %v", f, r.Body)
	}
	for _, body := range []string{`{bad`, `{"input_type":"response","model":5}`} {
		r := postKey(t, g.conn.URL+"/beta/litellm_basic_guardrail_api", connectorToken, []byte(body))
		require.Equal(t, 200, r.Status, body)
		require.Equal(t, "NONE", r.str("action"), "an unreadable body is not blocked in observe mode: %s", body)
	}
	rows := g.ledgerRows(t)
	require.Len(t, rows, 3)
	for i, want := range []string{"hold_timeout", "unmapped", "deny"} {
		assert.Equal(t, want, rows[i]["outcome"])
		assert.Equal(t, "allowed_at_gateway", rows[i]["enforcement_stage"])
		assert.Equal(t, false, rows[i]["enforced"])
		assert.Equal(t, "observe", rows[i]["mode"])
	}
	h := g.health(t, connectorToken)
	require.Equal(t, float64(3), counter(t, h, "blocked"))
	require.Equal(t, float64(2), counter(t, h, "invalid_requests"))
	require.Equal(t, "observe", h.str("mode"))
}

// TestConnectorRefusesToStart: settings are checked before serving, and a
// bad one stops the process with exit code 2 naming the variable.
func TestConnectorRefusesToStart(t *testing.T) {
	secretMap := filepath.Join(t.TempDir(), "tenancy.json")
	require.NoError(t, os.WriteFile(secretMap, []byte(`{"version": 1,
		"tenants": {"ops": {"org": "acme", "principal": "human:ops", "environment": "production",
			"evidence": {"token": "sk-live-4f9a8b7c6d5e4f3a2b1c"}}},
		"bind": {"key_alias": {"agent-ops": "ops"}}}`), 0o600))
	badTool := filepath.Join(t.TempDir(), "tools.json")
	require.NoError(t, os.WriteFile(badTool, []byte(`{"version": 1, "tools": [{"match": "db_*", "verb": "obliterate"}]}`), 0o600))
	base := map[string]string{"SVC_CONNECTOR_PORT": "0", "SVC_CORE_URL": "http://127.0.0.1:1", "SVC_CONNECTOR_TOKEN": "t"}
	cases := []struct {
		name, variable, want string
		edits                map[string]string
	}{
		{"no token", "SVC_CONNECTOR_TOKEN", "is required", map[string]string{"SVC_CONNECTOR_TOKEN": ""}},
		{"no core url", "SVC_CORE_URL", "is required", map[string]string{"SVC_CORE_URL": ""}},
		{"core url not http", "SVC_CORE_URL", "http(s)", map[string]string{"SVC_CORE_URL": "ftp://x"}},
		{"core url with a query", "SVC_CORE_URL", "without a query", map[string]string{"SVC_CORE_URL": "http://127.0.0.1:1/?access_token=sk-live-4f9a8b7c6d5e4f3a2b1c"}},
		{"core url with a fragment", "SVC_CORE_URL", "without a query or fragment", map[string]string{"SVC_CORE_URL": "http://127.0.0.1:1/#x"}},
		{"token with a newline", "SVC_CONNECTOR_TOKEN", "control or invisible characters", map[string]string{"SVC_CONNECTOR_TOKEN": "abc\ndef"}},
		{"core token with a space", "SVC_CORE_TOKEN", "spaces", map[string]string{"SVC_CORE_TOKEN": "abc def"}},
		{"token with a C1 control", "SVC_CONNECTOR_TOKEN", "control or invisible characters", map[string]string{"SVC_CONNECTOR_TOKEN": "a\u0085b"}},
		{"token with a zero-width space", "SVC_CONNECTOR_TOKEN", "control or invisible characters", map[string]string{"SVC_CONNECTOR_TOKEN": "ab\u200b"}},
		{"core url with an empty fragment", "SVC_CORE_URL", "without a query or fragment", map[string]string{"SVC_CORE_URL": "http://127.0.0.1:1/#"}},
		{"log format", "SVC_LOG_FORMAT", "json or console", map[string]string{"SVC_LOG_FORMAT": "xml"}},
		{"hold wait", "SVC_GATEWAY_HOLD_WAIT", "seconds", map[string]string{"SVC_GATEWAY_HOLD_WAIT": "-1"}},
		{"mode", "SVC_MODE", "enforce or observe", map[string]string{"SVC_MODE": "audit"}},
		{"anonymous word", "SVC_CONNECTOR_ALLOW_ANONYMOUS", "true or false", map[string]string{"SVC_CONNECTOR_ALLOW_ANONYMOUS": "maybe"}},
		{"literal secret", "SVC_GATEWAY_TENANCY_MAP_FILE", "evidence.token: a literal secret is refused", map[string]string{"SVC_GATEWAY_TENANCY_MAP_FILE": secretMap}},
		{"missing map", "SVC_GATEWAY_TENANCY_MAP_FILE", "no such file", map[string]string{"SVC_GATEWAY_TENANCY_MAP_FILE": secretMap + ".missing"}},
		{"tool map", "SVC_GATEWAY_TOOL_MAP_FILE", "verb: must be one of", map[string]string{"SVC_GATEWAY_TOOL_MAP_FILE": badTool}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tc.edits {
				env[k] = v
			}
			r := runSvc(t, env, nil, "connector")
			require.Equal(t, 2, r.code, r.output())
			require.Contains(t, r.stderr, tc.variable)
			require.Contains(t, r.stderr, tc.want)
			require.NotContains(t, r.stderr, "sk-live-4f9a8b7c6d5e4f3a2b1c")
		})
	}
	env := map[string]string{"SVC_CONNECTOR_PORT": "0", "SVC_CORE_URL": "http://127.0.0.1:1", "SVC_CONNECTOR_ALLOW_ANONYMOUS": "1"}
	p := startConnector(t, env)
	h := do(t, mustRequest(t, http.MethodGet, p.URL+"/healthz"))
	require.Equal(t, false, h.Body["auth_required"])
	require.Equal(t, false, h.Body["tenancy"].(map[string]any)["loaded"])
	r := postKey(t, p.URL+"/beta/litellm_basic_guardrail_api", "", fixture(t, "01_post_call_single_read_tool_call.json"))
	require.Equal(t, "svc_tenant_unmapped", refusals(t, r)[0]["error"], "no map: every caller is unmapped")
}

func mustRequest(t testing.TB, method, u string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	require.NoError(t, err)
	return req
}

// TestConnectorTenancyReload: a changed map takes effect without a restart;
// an invalid one keeps the last good map and shows the error in health.
func TestConnectorTenancyReload(t *testing.T) {
	g := startGateway(t, nil)
	unmapped := fixture(t, "06_post_call_unmapped_key_hash_only.json")
	require.Equal(t, "svc_tenant_unmapped", refusals(t, g.guardrail(t, unmapped))[0]["error"])
	path := g.env["SVC_GATEWAY_TENANCY_MAP_FILE"]
	require.NoError(t, os.WriteFile(path, []byte(`{"version": 1, "tenants": {}`), 0o600))
	require.Eventually(t, func() bool {
		tn := g.health(t, connectorToken).Body["tenancy"].(map[string]any)
		return tn["error"] != nil && tn["loaded"] == true
	}, 10e9, 100e6, "an invalid file shows in health, the last good map stays")
	require.Equal(t, "NONE", g.guardrail(t, fixture(t, "01_post_call_single_read_tool_call.json")).str("action"))
	require.NoError(t, os.WriteFile(path, []byte(`{"version": 1,
		"tenants": {"cli": {"org": "acme-cli", "principal": "human:cli-owner", "environment": "staging"}},
		"bind": {"key_hash": {"2c2943a79221f3ae8ad2f788cf8403b9944b06da0bd7a21bcda911de25ead0cc": "cli"}}}`), 0o600))
	require.Eventually(t, func() bool { return g.guardrail(t, unmapped).str("action") == "NONE" }, 10e9, 100e6)
	h := g.health(t, connectorToken).Body["tenancy"].(map[string]any)
	require.Nil(t, h["error"])
	require.Equal(t, float64(1), h["orgs"])
	require.Equal(t, "svc_tenant_unmapped", refusals(t, g.guardrail(t, fixture(t, "01_post_call_single_read_tool_call.json")))[0]["error"])
}

// TestConnectorRefusesInvalidText checks that a guardrail request holding
// invalid UTF-8 or an escaped lone surrogate is refused (BLOCKED) before
// any of its calls reaches the engine: read as U+FFFD, two requests that
// differ there would be one call (RFC 7493 I-JSON, engine/ijson).
func TestConnectorRefusesInvalidText(t *testing.T) {
	g := startGateway(t, nil)
	raw := mustJSON(t, fixture(t, "01_post_call_single_read_tool_call.json"))
	for _, bad := range []string{"agent-support-prod\xff", `agent-support-prod\ud800`} {
		body := bytes.Replace(raw, []byte(`"agent-support-prod"`), []byte(`"`+bad+`"`), 1)
		require.NotEqual(t, raw, body)
		r := g.guardrail(t, body)
		require.Equal(t, 200, r.Status, "%v", r.Body)
		assert.Equal(t, "BLOCKED", r.str("action"), "%v", r.Body)
		assert.Contains(t, r.str("blocked_reason"), "RFC 7493")
	}
	assert.Zero(t, g.decides.Load(), "no call reached the engine")
}

// A pre_call request governs nothing: one the strict reader refuses — a
// member twice in the prompt, a lone surrogate in the user's text, an image
// past the body limit — is still answered NONE and counted, while a
// post_call answer with the same faults is refused, and a body naming
// input_type twice is not taken for a pre_call.
func TestConnectorPreCallReadLeniently(t *testing.T) {
	g := startGateway(t, nil)
	pre := mustJSON(t, fixture(t, "05_pre_call_prompt_and_tools.json"))
	post := mustJSON(t, fixture(t, "01_post_call_single_read_tool_call.json"))
	faults := map[string]func([]byte) []byte{
		"member twice": func(b []byte) []byte {
			return bytes.Replace(b, []byte(`{`), []byte(`{"extra": {"a": 1, "a": 2}, `), 1)
		},
		"lone surrogate": func(b []byte) []byte {
			return bytes.Replace(b, []byte(`{`), []byte(`{"extra": "text \ud800 here", `), 1)
		},
		"past the body limit": func(b []byte) []byte {
			return bytes.Replace(b, []byte(`{`), []byte(`{"extra": "`+strings.Repeat("A", 9<<20)+`", `), 1)
		},
	}
	before := counter(t, g.health(t, connectorToken), "pre_call_requests")
	for name, fault := range faults {
		t.Run(name, func(t *testing.T) {
			r := g.guardrail(t, fault(pre))
			require.Equal(t, 200, r.Status, "%v", r.Body)
			assert.Equal(t, "NONE", r.str("action"), "%v", r.Body)
			r = g.guardrail(t, fault(post))
			assert.Equal(t, "BLOCKED", r.str("action"), "%v", r.Body)
			assert.Contains(t, r.str("blocked_reason"), "svc.core/invalid_request")
		})
	}
	assert.Equal(t, before+3, counter(t, g.health(t, connectorToken), "pre_call_requests"))
	twice := bytes.Replace(pre, []byte(`{`), []byte(`{"extra": {"a": 1, "a": 2}, "INPUT_TYPE": "response", `), 1)
	assert.Equal(t, "BLOCKED", g.guardrail(t, twice).str("action"))
	assert.Zero(t, g.decides.Load(), "no call reached the engine")
}

// TestConnectorLedgerTableEscapesModelText: a tool name and call id come
// from the model; a line feed in one would forge a row of the operator's
// table and a terminal escape would rewrite it, so they are printed
// escaped (the JSON output escapes them as JSON does).
func TestConnectorLedgerTableEscapesModelText(t *testing.T) {
	g := startGateway(t, nil)
	body := fixture(t, "01_post_call_single_read_tool_call.json")
	call := body["tool_calls"].([]any)[0].(map[string]any)
	call["id"] = "call_\x1b[31mRED\x1b[0m"
	call["function"].(map[string]any)["name"] = "crm_get_customer\n2099-01-01T00:00:00Z  allow  allowed_at_gateway  forged\x1b[2K"
	g.guardrail(t, body)
	g.conn.stop(t)
	table := runSvc(t, map[string]string{"SVC_GATEWAY_LEDGER_PATH": g.env["SVC_GATEWAY_LEDGER_PATH"]}, nil, "connector", "ledger")
	require.Zero(t, table.code, table.output())
	assert.Equal(t, 2, countLines(table.stdout), "a header and one row:\n%s", table.stdout)
	assert.NotContains(t, table.stdout, "\x1b")
	assert.Contains(t, table.stdout, `\n2099-01-01T00:00:00Z`)
	assert.Contains(t, table.stdout, `"call_\x1b[31mRED\x1b[0m"`)
}
