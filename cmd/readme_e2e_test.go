package cmd_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Patterns of the README's walk-through ("Try it").
var (
	readmeStart  = regexp.MustCompile(`(?m)^\$ ((?:SVC_[A-Z_]+=\S+ )+)scripts/run$`)
	readmeCurl   = regexp.MustCompile(`(?s)-H 'Authorization: Bearer (\S+)' -H 'Content-Type: application/json' -d '(\{.*?\})'\n(\{[^\n]*\})`)
	readmeExport = regexp.MustCompile(`(?m)^\$ export SVC_CORE_URL=\S+ SVC_CORE_TOKEN=(\S+)$`)
	readmeCLI    = regexp.MustCompile(`(?m)^\$ bin/svc ((?:holds|freeze) .*)$`)
)

// TestReadmeWalkthrough follows the README's "Try it" as a newcomer would:
// the engine started as it says (the demo resolver tokens, the operator
// token, a temporary database), the three curl examples answering as
// shown, then every `bin/svc` command of the walk-through, approving the
// hold and freezing the engine, and the re-submission allowed once.
func TestReadmeWalkthrough(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	readme := string(raw)
	try := readme[strings.Index(readme, "## Try it"):strings.Index(readme, "## Choosing the OPA mode")]

	start := readmeStart.FindStringSubmatch(try)
	require.NotNil(t, start, "the README shows the command that starts the engine")
	env := baseEnv(t)
	delete(env, "SVC_HOLDS_PATH") // as scripts/run: a temporary database
	for _, kv := range strings.Fields(start[1]) {
		k, v, _ := strings.Cut(kv, "=")
		if _, err := os.Stat(filepath.Join(root, v)); err == nil {
			v = filepath.Join(root, v) // a file of the repository, named from its root
		}
		env[k] = v
	}
	require.Contains(t, env["SVC_RESOLVER_TOKENS"], "DEMO-ONLY", "a demo tokens file, named as such")
	p := startEngine(t, env)

	curls := readmeCurl.FindAllStringSubmatch(try, -1)
	require.Len(t, curls, 3, "allow, require_approval, deny")
	var held map[string]any
	holdID := ""
	for _, c := range curls {
		body := strings.ReplaceAll(c[2], `'\''`, `'`) // the shell's quoting of a quote
		var shown map[string]any
		require.NoError(t, json.Unmarshal([]byte(c[3]), &shown), c[3])
		r := p.callAs(t, c[1], "POST", "/v1/decide", body)
		assert.Equal(t, shown["decision"], r.str("decision"), "%v", r.Body)
		assert.Equal(t, shown["rule"], r.str("rule"))
		if r.str("hold_id") != "" {
			holdID = r.str("hold_id")
			require.NoError(t, json.Unmarshal([]byte(body), &held))
		}
	}
	require.NotEmpty(t, holdID)

	export := readmeExport.FindStringSubmatch(try)
	require.NotNil(t, export, "the README sets SVC_CORE_URL and SVC_CORE_TOKEN")
	cli := map[string]string{"SVC_CORE_URL": p.URL, "SVC_CORE_TOKEN": export[1]}
	commands := readmeCLI.FindAllStringSubmatch(try, -1)
	require.GreaterOrEqual(t, len(commands), 5)
	ran := map[string]bool{}
	for _, c := range commands {
		args := shellWords(strings.ReplaceAll(c[1], "<hold_id>", holdID))
		r := runSvc(t, cli, nil, args...)
		require.Equal(t, 0, r.code, "bin/svc %s:\n%s", c[1], r.output())
		ran[args[0]+" "+args[1]] = true
		if args[1] == "show" {
			assert.Contains(t, r.stdout, "last_seen_at < now() - interval '30 days'", "the approver sees the where clause")
		}
	}
	for _, want := range []string{"holds list", "holds approve", "freeze on", "freeze off"} {
		assert.True(t, ran[want], "the walk-through runs %s", want)
	}

	held["approval"] = map[string]any{"present": true, "hold_id": holdID}
	r := p.callAs(t, curls[1][1], "POST", "/v1/decide", held)
	assert.Equal(t, "allow", r.str("decision"), "%v", r.Body)
	assert.Equal(t, "svc.policy/approved_resubmission", r.str("rule"))
}

// shellWords splits a command line on spaces, keeping "double-quoted"
// words whole, as the README's commands are written.
func shellWords(s string) []string {
	var out []string
	for i, part := range strings.Split(s, `"`) {
		if i%2 == 1 {
			out = append(out, part)
			continue
		}
		out = append(out, strings.Fields(part)...)
	}
	return out
}

// TestReadmeExitCodes: the README's exit-code tables say what the commands
// do (TestExitCodesPerSubcommand checks the behaviour and --help).
func TestReadmeExitCodes(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	for _, row := range []string{
		"| `svc decide` | allow | deny | require_approval | engine unreachable or error | usage error |",
		"| `svc holds …`, `svc freeze` | done | engine refused or unreachable | — | — | usage error |",
		"| `svc serve` | stopped by SIGINT/SIGTERM | could not start or serve (OPA, database, audit log, port) | invalid setting | — | usage error |",
		"| `svc config check` | every setting valid | — | invalid setting (each printed) | — | usage error |",
		"| `svc healthcheck URL` | answered 2xx | anything else | — | — | usage error |",
		"| 64 | usage error",
	} {
		assert.Contains(t, string(raw), row)
	}
}
