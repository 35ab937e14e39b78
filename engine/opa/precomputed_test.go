package opa

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serverDocument asks the supervised server for the document at path (a
// path of OPA's data API, such as /v1/data/svc_internal/precomputed) and
// returns its value, or nil when it is undefined.
func serverDocument(t *testing.T, s *OPAServer, path string) json.RawMessage {
	t.Helper()
	raw, err := s.rest.query(t.Context(), "http://opa"+path, []byte(`{}`))
	require.NoError(t, err)
	var answer struct {
		Result json.RawMessage `json:"result"`
	}
	require.NoError(t, json.Unmarshal(raw, &answer))
	return answer.Result
}

// opaEvalRaw is the value of query on the pack in dir, as `opa eval`
// prints it alone.
func opaEvalRaw(t *testing.T, dir, query string) string {
	t.Helper()
	out, err := exec.Command(opaTestBin(t), "eval", "--format", "raw", "--data", dir, query).Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// TestOPAServerPrecomputes: a server on a pack it does not watch loads the
// pack's data-only values, computed once by opa eval from the same files,
// and they are the values the pack computes for itself.
func TestOPAServerPrecomputes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pack  func(*testing.T) string
		valid bool
	}{
		{"bundled", bundledPack, true},
		{"broken tables", brokenTablesPack, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.pack(t)
			s := startOPAServer(t, opaTestBin(t), dir)
			require.NoError(t, s.Check(t.Context()))
			file, err := os.ReadFile(filepath.Join(s.dir, "batch", opaPrecomputedPath))
			require.NoError(t, err)
			var got struct {
				DataValid     bool   `json:"data_valid"`
				SensitiveJSON string `json:"sensitive_json"`
				AllFragments  string `json:"all_fragments"`
			}
			require.NoError(t, json.Unmarshal(file, &got))
			assert.Equal(t, tc.valid, got.DataValid)
			assert.Equal(t, opaEvalRaw(t, dir, "json.marshal(data.svc.sensitive)"), got.SensitiveJSON)
			assert.Equal(t, opaEvalRaw(t, dir, "data.svc.policy.all_fragments"), got.AllFragments)
			assert.NotEmpty(t, got.AllFragments)
			assert.JSONEq(t, string(file), string(serverDocument(t, s, "/v1/data/svc_internal/precomputed")))
		})
	}
}

// TestOPAServerWatchedPackIsNotPrecomputed: a watched pack is reloaded by
// OPA on its own, so values computed beforehand could describe other data:
// the server gets none, and the pack computes them for every query.
func TestOPAServerWatchedPackIsNotPrecomputed(t *testing.T) {
	s, err := StartOPAServer(OPAServerConfig{Bin: opaTestBin(t), PolicyDir: bundledPack(t), Watch: true,
		Timeout: 10 * time.Second, Logger: zerolog.Nop()})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	require.NoError(t, s.Check(t.Context()))
	assert.NoFileExists(t, filepath.Join(s.dir, "batch", opaPrecomputedPath))
	assert.Empty(t, serverDocument(t, s, "/v1/data/svc_internal/precomputed"))
	v, err := s.Evaluate(t.Context(), opaInput(nil))
	require.NoError(t, err)
	assert.Equal(t, "svc.policy/default_allow", v.Rule)
}

// TestOPAServerPrecomputeFaults: a pack without the document, or whose
// document fails to evaluate, gets no values (the failure logged) and is
// served as it is.
func TestOPAServerPrecomputeFaults(t *testing.T) {
	const decision = `package svc.policy
decision := {"decision": "allow", "rule": "svc.policy/t", "reason": "r", "obligations": [], "shadow": null}
`
	for _, tc := range []struct {
		name   string
		module string
		log    string
	}{
		{"undefined", decision, ""},
		{"not an object", decision + "precomputed := 1\n", "not an object"},
		{"built-in error", decision + "precomputed := {\"x\": to_number(\"x\")}\n", "computed for every query"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &opaLogBuffer{}
			s, err := StartOPAServer(OPAServerConfig{Bin: opaTestBin(t), PolicyDir: writePolicy(t, tc.module),
				Timeout: 10 * time.Second, Logger: zerolog.New(logs).Level(zerolog.WarnLevel)})
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, s.Close()) })
			require.NoError(t, s.Check(t.Context()))
			assert.NoFileExists(t, filepath.Join(s.dir, "batch", opaPrecomputedPath))
			v, err := s.Evaluate(t.Context(), opaInput(nil))
			require.NoError(t, err)
			assert.Equal(t, "svc.policy/t", v.Rule)
			if tc.log == "" {
				assert.NotContains(t, logs.String(), "computed for every query")
				return
			}
			assert.Contains(t, logs.String(), tc.log)
			assert.Contains(t, logs.String(), `"level":"warn","error":"opa eval`)
		})
	}
}
