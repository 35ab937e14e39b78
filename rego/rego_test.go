package rego

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// opaBin returns the opa binary the tests run: $SVC_OPA_BIN or opa on PATH.
// A missing binary fails the test: the pack's tests are not optional.
func opaBin(t *testing.T) string {
	t.Helper()
	name := os.Getenv("SVC_OPA_BIN")
	if name == "" {
		name = "opa"
	}
	bin, err := exec.LookPath(name)
	require.NoError(t, err, "opa binary not found; run scripts/install-opa")
	return bin
}

func runOPA(t *testing.T, stdin string, args ...string) []byte {
	t.Helper()
	// Generous: the whole pack's tests take a while on a loaded machine.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, opaBin(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "opa %s:\n%s", strings.Join(args, " "), out)
	return out
}

func TestPackOPATest(t *testing.T) {
	// A generous per-test timeout: opa's default (5s) is tight on a loaded
	// machine running go test ./... with -race.
	out := runOPA(t, "", "test", "--format", "json", "--timeout", "240s", "policy")
	var results []struct {
		Name string `json:"name"`
		Fail bool   `json:"fail"`
	}
	require.NoError(t, json.Unmarshal(out, &results))
	require.GreaterOrEqual(t, len(results), 40, "expected the full opa test suite to run")
	for _, r := range results {
		assert.False(t, r.Fail, r.Name)
	}
}

func TestMaterialize(t *testing.T) {
	dir, cleanup, err := Materialize()
	require.NoError(t, err)
	t.Cleanup(func() { _ = cleanup() })

	info, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o700), info.Mode().Perm())

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		info, err := e.Info()
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o600), info.Mode().Perm(), e.Name())
		want, err := fs.ReadFile(Files(), e.Name())
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		assert.Equal(t, want, got, e.Name())
	}
	sort.Strings(names)
	assert.Equal(t, []string{"data.json", "policy.rego"}, names)

	require.NoError(t, cleanup())
	_, err = os.Stat(dir)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.NoError(t, cleanup(), "cleanup is idempotent")
}

func TestMaterializeFreshDirs(t *testing.T) {
	a, cleanA, err := Materialize()
	require.NoError(t, err)
	t.Cleanup(func() { _ = cleanA() })
	b, cleanB, err := Materialize()
	require.NoError(t, err)
	t.Cleanup(func() { _ = cleanB() })
	assert.NotEqual(t, a, b)
}

func TestFilesIncludesTests(t *testing.T) {
	_, err := fs.Stat(Files(), "policy_test.rego")
	assert.NoError(t, err)
}

func TestShipped(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"policy.rego", true},
		{"sub/extra.rego", true},
		{"data.json", true},
		{"sub/data.yaml", true},
		{"policy_test.rego", false},
		{"sub/more_test.rego", false},
		{"README.md", false},
		{"notes.txt", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, shipped(tt.name))
		})
	}
}

// TestMaterializedPackEvaluates checks the data path of the thresholds and
// that the materialized pack (without its tests) compiles and decides.
func TestMaterializedPackEvaluates(t *testing.T) {
	dir, cleanup, err := Materialize()
	require.NoError(t, err)
	t.Cleanup(func() { _ = cleanup() })

	out := runOPA(t, "", "eval", "--format", "values", "--data", dir, "data.svc.thresholds")
	var thresholds []map[string]int
	require.NoError(t, json.Unmarshal(out, &thresholds))
	assert.Equal(t, []map[string]int{{"deletes": 20, "external_sends": 50, "objects": 200}}, thresholds)

	out = runOPA(t, "{}", "eval", "--format", "values", "--stdin-input", "--data", dir, "data.svc.policy.decision")
	var decision []map[string]any
	require.NoError(t, json.Unmarshal(out, &decision))
	require.Len(t, decision, 1)
	assert.Equal(t, "deny", decision[0]["decision"])
	assert.Equal(t, "svc.policy/invalid_input", decision[0]["rule"])
	assert.Equal(t, []any{}, decision[0]["obligations"])
	assert.Nil(t, decision[0]["shadow"])
}
