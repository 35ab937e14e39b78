package cmd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exitUsage is the exit code of a usage error, which no verdict of svc
// decide (0, 1, 2) and no engine error (3) uses.
const exitUsage = 64

// TestExitCodesPerSubcommand: every subcommand's --help exits 0 and states
// its exit codes, usage errors among them; an unknown flag or a wrong
// argument exits 64 whatever the subcommand, so that a hook never reads a
// typo as a verdict.
func TestExitCodesPerSubcommand(t *testing.T) {
	noEngine := map[string]string{"SVC_CORE_URL": "http://127.0.0.1:1"}
	for _, sub := range [][]string{{"serve"}, {"decide"}, {"holds"}, {"holds", "list"}, {"holds", "show"},
		{"holds", "approve"}, {"holds", "reject"}, {"holds", "resolve"}, {"freeze"}, {"bench"},
		{"connector"}, {"connector", "ledger"}, {"replay"}, {"policy"}, {"policy", "test"}, {"version"}, {"config", "check"},
		{"healthcheck"}} {
		name := strings.Join(sub, " ")
		r := runSvc(t, noEngine, nil, append(sub, "--help")...)
		assert.Equal(t, 0, r.code, name)
		assert.Contains(t, r.stdout, "Exit code:", name)
		assert.Contains(t, r.stdout, "64 usage error", name)
		r = runSvc(t, noEngine, nil, append(sub, "--bogus")...)
		assert.Equal(t, exitUsage, r.code, "%s --bogus: %s", name, r.output())
		assert.Contains(t, r.stderr, "Run 'svc "+name+" --help' for usage.")
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"decide", "envelope.json"}, "to post the envelope in envelope.json, use -f envelope.json"},
		{[]string{"decide", "-f"}, "flag needs an argument"},
		{[]string{"freeze"}, "svc freeze takes one of on, off or status"},
		{[]string{"freeze", "maybe"}, `got "maybe"`},
		{[]string{"holds", "show"}, "svc holds show takes one hold ID (`svc holds list` lists them)"},
		{[]string{"holds", "approve"}, "takes one hold ID"},
		{[]string{"holds", "resolve", "h1", "--decision", "maybe"}, "--decision must be approve or reject"},
		{[]string{"holds", "list", "-o", "yaml"}, "-o must be table or json"},
		{[]string{"holds", "bogus"}, `got "bogus"`},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"serve", "extra"}, `got "extra"`},
		{[]string{"bench", "--concurrency", "0"}, "--concurrency"},
		{[]string{"bench", "--baseline-only"}, "--baseline-only: set --opa-runs"},
		{[]string{"replay"}, "--audit is required"},
		{[]string{"replay", "--audit", "audit.jsonl", "-o", "yaml"}, "-o must be table or json"},
		{[]string{"policy", "bogus"}, `got "bogus"`},
	} {
		r := runSvc(t, noEngine, nil, tt.args...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", tt.args, r.output())
		assert.Contains(t, r.stderr, tt.want, tt.args)
	}
	r := runSvc(t, map[string]string{}, strings.NewReader("{}"), "decide")
	assert.Equal(t, 3, r.code, "SVC_CORE_URL unset: an engine error, treated as deny: %s", r.output())
	r = runSvc(t, noEngine, nil, "holds", "list")
	assert.Equal(t, 1, r.code, "engine unreachable: %s", r.output())
	r = runSvc(t, nil, nil, "version")
	assert.Equal(t, 0, r.code)
}

// TestServeSettingErrorsExitTwo: every invalid setting stops svc serve
// with exit 2, the hold resolution settings included, naming the variable,
// the flag, or the config file's key.
func TestServeSettingErrorsExitTwo(t *testing.T) {
	dir := t.TempDir()
	yaml := filepath.Join(dir, "svc.yaml")
	require.NoError(t, os.WriteFile(yaml, []byte("SVC_PORT: 8081\n"), 0o600))
	for _, tt := range []struct {
		set  map[string]string
		args []string
		want string
	}{
		{map[string]string{"SVC_RESOLVER_TOKENS": "{not json"}, nil, "invalid SVC_RESOLVER_TOKENS"},
		{map[string]string{"SVC_RESOLVER_TOKENS": filepath.Join(dir, "missing.json")}, nil, "invalid SVC_RESOLVER_TOKENS"},
		{map[string]string{"SVC_RESOLUTION_POLICY": "[1]"}, nil, "invalid SVC_RESOLUTION_POLICY"},
		{nil, []string{"--port", "70000"}, `--port (SVC_PORT): must be an integer from 0 to 65535, got "70000"`},
		{nil, []string{"--config", yaml}, `unknown key "svc_port"`},
		{map[string]string{"SVC_LOG_FORMAT": "text"}, nil, "SVC_LOG_FORMAT: must be json or console"},
	} {
		env := baseEnv(t)
		for k, v := range tt.set {
			env[k] = v
		}
		code, out := runFailingArgs(t, env, tt.args...)
		assert.Equal(t, 2, code, "%v %v: %s", tt.set, tt.args, out)
		assert.Contains(t, out, tt.want)
	}
}

// TestClientWarnsOfUnknownVariables: a client command names a misspelled
// SVC_* variable and the one it probably meant.
func TestClientWarnsOfUnknownVariables(t *testing.T) {
	r := runSvc(t, map[string]string{"SVC_CORE_URL": "http://127.0.0.1:1", "SVC_CORE_TOKNE": "x", "SVC_VERIFY_SSL": "flase"},
		nil, "holds", "list")
	assert.Contains(t, r.stderr, "svc: warning: SVC_CORE_TOKNE is not a setting svc reads; did you mean SVC_CORE_TOKEN?")
	assert.Contains(t, r.stderr, `svc: warning: SVC_VERIFY_SSL="flase" is not true or false: read as true`)
}
