package deploy_test

import (
	"bufio"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// ignoreRule is one line of .dockerignore.
type ignoreRule struct {
	re     *regexp.Regexp
	negate bool
}

// dockerignore reads .dockerignore's rules: a pattern matches a path or any
// of its parent directories; `*` and `?` stay within a path element, `**`
// crosses them; a later `!` rule re-includes (Docker's semantics).
func dockerignore(t *testing.T) []ignoreRule {
	t.Helper()
	var rules []ignoreRule
	s := bufio.NewScanner(strings.NewReader(readRepo(t, ".dockerignore")))
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r := ignoreRule{}
		if rest, ok := strings.CutPrefix(line, "!"); ok {
			r.negate, line = true, rest
		}
		line = strings.TrimPrefix(line, "/")
		var b strings.Builder
		for i := 0; i < len(line); i++ {
			switch {
			case strings.HasPrefix(line[i:], "**/"):
				b.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(line[i:], "**"):
				b.WriteString(".*")
				i++
			case line[i] == '*':
				b.WriteString("[^/]*")
			case line[i] == '?':
				b.WriteString("[^/]")
			default:
				b.WriteString(regexp.QuoteMeta(line[i : i+1]))
			}
		}
		r.re = regexp.MustCompile("^" + b.String() + "(/.*)?$")
		rules = append(rules, r)
	}
	return rules
}

// excluded reports whether path is left out of the build context.
func excluded(rules []ignoreRule, path string) bool {
	out := false
	for _, r := range rules {
		if r.re.MatchString(path) {
			out = !r.negate
		}
	}
	return out
}

// TestDockerignore: the build context holds no history, local build,
// secret, environment file, database, audit log or virtual environment,
// and keeps everything the two images are built from.
func TestDockerignore(t *testing.T) {
	rules := dockerignore(t)
	for _, path := range []string{
		".git", ".git/HEAD", "bin/svc", "svc", "cmd/cmd.test", ".env", ".env.local", "resolvers.json", "tenancy.json",
		"secrets/opa-token", "tls/server.key", "tls/server.pem", "svc.db", "data/svc.db", "data/svc.db-wal", "svc.db-shm",
		"audit.jsonl", "var/audit.jsonl", ".venv/bin/python", "venv/lib/x.py", "connector/python/.venv/bin/python",
		"connector/python/svc_gateway/__pycache__/x.pyc", "connector/python/.pytest_cache/v", "dist/svc_gateway.whl",
	} {
		assert.True(t, excluded(rules, path), "%s must be kept out of the build context", path)
	}
	for _, path := range []string{
		"go.mod", "go.sum", "main.go", "cmd/serve.go", "engine/envelope/parse.go", "rego/policy/policy.rego",
		"rego/policy/data.json", "ledger/migrations/0001_init.sql", "holds/migrations/0001_holds.sql",
		"connector/python/svc_gateway/guardrail.py", ".env.example", "deploy/litellm/Dockerfile",
	} {
		assert.False(t, excluded(rules, path), "%s is needed by a build", path)
	}
}
