package deploy_test

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// composeFile is the reference layout.
const composeFile = "docker-compose.yml"

// compose is docker-compose.yml, decoded.
type compose map[string]any

func loadCompose(t *testing.T) compose {
	t.Helper()
	var c map[string]any // not compose: yaml would decode every nested mapping as one
	require.NoError(t, yaml.Unmarshal([]byte(readRepo(t, composeFile)), &c))
	return c
}

// section returns a top-level mapping (services, secrets, volumes).
func (c compose) section(name string) map[string]any {
	m, _ := c[name].(map[string]any)
	return m
}

func (c compose) service(t *testing.T, name string) map[string]any {
	t.Helper()
	s, ok := c.section("services")[name].(map[string]any)
	require.True(t, ok, "%s has no service %s", composeFile, name)
	return s
}

// stringList reads a YAML list of strings.
func stringList(t *testing.T, v any) []string {
	t.Helper()
	list, ok := v.([]any)
	require.True(t, ok, "want a list, got %#v", v)
	out := make([]string, len(list))
	for i, e := range list {
		out[i], ok = e.(string)
		require.True(t, ok, "want a string, got %#v", e)
	}
	return out
}

// documentedCopies are the files docs/deploy.md creates by a one-line
// step: `cp EXAMPLE FILE`, each EXAMPLE a repository file.
func documentedCopies(t *testing.T) map[string]string {
	t.Helper()
	copies := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)\bcp (\S+) (\S+)`).FindAllStringSubmatch(readRepo(t, "docs/deploy.md"), -1) {
		copies[filepath.Clean(m[2])] = filepath.Clean(m[1])
	}
	return copies
}

// checkReferenced checks that a file the compose file references (relative
// to the repository root) is in the repository, or is made by a documented
// copy of one that is, and then kept out of git.
func checkReferenced(t *testing.T, what, rel string, copies map[string]string) {
	t.Helper()
	rel = filepath.Clean(rel)
	if _, err := os.Stat(repoFile(rel)); err == nil {
		tracked := exec.Command("git", "-C", root, "ls-files", "--error-unmatch", rel)
		if tracked.Run() == nil {
			return
		}
	}
	src, ok := copies[rel]
	if !assert.True(t, ok, "%s: %s is neither in the repository nor made by a `cp EXAMPLE %s` step of docs/deploy.md", what, rel, rel) {
		return
	}
	_, err := os.Stat(repoFile(src))
	assert.NoError(t, err, "%s: docs/deploy.md copies %s from %s, which is not in the repository", what, rel, src)
	ignored := exec.Command("git", "-C", root, "check-ignore", "-q", "--no-index", rel)
	assert.NoError(t, ignored.Run(), "%s: %s (an operator's copy, maybe holding secrets) must be git-ignored", what, rel)
}

// TestComposeReferencesExist: every file, directory, build context and
// Dockerfile docker-compose.yml names exists or is made by a documented
// one-line step; every named volume, secret and dependency is declared.
func TestComposeReferencesExist(t *testing.T) {
	c := loadCompose(t)
	copies := documentedCopies(t)
	services := c.section("services")
	require.NotEmpty(t, services)
	for name, raw := range services {
		s := raw.(map[string]any)
		what := "service " + name
		switch b := s["build"].(type) {
		case nil:
		case string:
			checkReferenced(t, what+" build", filepath.Join(b, "Dockerfile"), copies)
		case map[string]any:
			ctx, _ := b["context"].(string)
			df, _ := b["dockerfile"].(string)
			checkReferenced(t, what+" build context", ctx, copies)
			checkReferenced(t, what+" dockerfile", filepath.Join(ctx, orDefault(df, "Dockerfile")), copies)
		}
		if vols, ok := s["volumes"]; ok {
			for _, v := range stringList(t, vols) {
				src, _, _ := strings.Cut(v, ":")
				if strings.HasPrefix(src, ".") || strings.HasPrefix(src, "/") {
					checkReferenced(t, what+" volume", src, copies)
				} else {
					assert.Contains(t, c.section("volumes"), src, "%s: volume %s is not declared", what, src)
				}
			}
		}
		if secrets, ok := s["secrets"].([]any); ok {
			for _, sec := range secrets {
				src, ok := sec.(string)
				if m, isMap := sec.(map[string]any); isMap {
					src, ok = m["source"].(string)
				}
				require.True(t, ok, "%s: a secret without source", what)
				assert.Contains(t, c.section("secrets"), src, "%s: secret %s is not declared", what, src)
			}
		}
		if deps, ok := s["depends_on"].(map[string]any); ok {
			for dep := range deps {
				assert.Contains(t, services, dep, "%s depends on an unknown service", what)
			}
		}
		_, hasEnvFile := s["env_file"]
		assert.False(t, hasEnvFile, "%s: use ${VARIABLE}s from .env, which the variable check covers", what)
	}
	for name, raw := range c.section("secrets") {
		file, _ := raw.(map[string]any)["file"].(string)
		require.NotEmpty(t, file, "secret %s must come from a file", name)
		checkReferenced(t, "secret "+name, file, copies)
	}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// composeVariable matches ${NAME...} and $NAME, not $$ (a literal $).
var composeVariable = regexp.MustCompile(`\$(\$|\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|([A-Za-z_][A-Za-z0-9_]*))`)

// envExample returns the variables .env.example names.
func envExample(t *testing.T) map[string]string {
	t.Helper()
	vars := map[string]string{}
	s := bufio.NewScanner(strings.NewReader(readRepo(t, ".env.example")))
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		require.True(t, ok, ".env.example: %q is not NAME=value", line)
		require.NotContains(t, vars, name, ".env.example names %s twice", name)
		vars[name] = value
	}
	return vars
}

// TestComposeVariablesAreInEnvExample: every ${VARIABLE} docker-compose.yml
// reads is named in .env.example, with its meaning, and every variable
// there is used; required ones are left empty, so that compose refuses to
// start until the operator sets them.
func TestComposeVariablesAreInEnvExample(t *testing.T) {
	var lines []string
	for line := range strings.Lines(readRepo(t, composeFile)) {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			lines = append(lines, line) // compose reads no variable in a comment
		}
	}
	text := strings.Join(lines, "")
	example := envExample(t)
	used := map[string]bool{}
	for _, m := range composeVariable.FindAllStringSubmatch(text, -1) {
		if m[1] == "$" {
			continue
		}
		name := m[2] + m[3]
		used[name] = true
		assert.Contains(t, example, name, "%s reads ${%s}: name it in .env.example", composeFile, name)
		if strings.Contains(m[0], ":?") {
			assert.Empty(t, example[name], ".env.example: the required %s must be left empty, never a usable default", name)
		}
	}
	require.NotEmpty(t, used, "no variable found: the pattern is broken")
	for name := range example {
		assert.True(t, used[name], ".env.example names %s, which %s does not read", name, composeFile)
	}
	doc := readRepo(t, ".env.example")
	for name := range example {
		i := strings.Index(doc, "\n"+name+"=")
		require.GreaterOrEqual(t, i, 0)
		before := strings.TrimRight(doc[:i], "\n")
		assert.True(t, strings.HasPrefix(before[strings.LastIndex(before, "\n")+1:], "#"),
			".env.example: %s needs a comment line saying what it is", name)
	}
}

// TestComposeServicesAreRunnable: every service restarts on its own, has a
// real health check (svc's own services probe HTTP with `svc healthcheck`,
// the image having no curl), publishes on loopback only, and the connector
// is not published at all; plain HTTP is allowed explicitly where a
// service listens on the compose network.
func TestComposeServicesAreRunnable(t *testing.T) {
	c := loadCompose(t)
	services := c.section("services")
	for _, name := range []string{"opa", "svc", "connector", "litellm", "litellm-inprocess"} {
		require.Contains(t, services, name)
	}
	for name, raw := range services {
		s := raw.(map[string]any)
		assert.Contains(t, []any{"unless-stopped", "always", "on-failure"}, s["restart"], "service %s: restart policy", name)
		hc, ok := s["healthcheck"].(map[string]any)
		if assert.True(t, ok, "service %s has no health check", name) {
			assert.NotEmpty(t, hc["test"], "service %s: health check test", name)
		}
		if ports, ok := s["ports"]; ok {
			for _, p := range stringList(t, ports) {
				assert.True(t, strings.HasPrefix(p, "127.0.0.1:"), "service %s publishes %s beyond loopback", name, p)
			}
		}
		env, _ := s["environment"].(map[string]any)
		if env["SVC_HOST"] == "0.0.0.0" || env["SVC_CONNECTOR_HOST"] == "0.0.0.0" {
			assert.Equal(t, "1", env["SVC_ALLOW_PLAINTEXT"], "service %s listens on the compose network in plain HTTP", name)
		}
	}
	for _, name := range []string{"svc", "connector"} {
		test := stringList(t, c.service(t, name)["healthcheck"].(map[string]any)["test"])
		assert.Equal(t, []string{"CMD", "/usr/local/bin/svc", "healthcheck", "http://127.0.0.1:8080/healthz"}, test, name)
	}
	assert.NotContains(t, c.service(t, "connector"), "ports", "the connector is reached from the compose network only")
	assert.Equal(t, []any{"inprocess"}, c.service(t, "litellm-inprocess")["profiles"])
	assert.Equal(t, "http://opa:8181", c.service(t, "svc")["environment"].(map[string]any)["SVC_OPA_URL"])
	assert.Equal(t, c.service(t, "opa")["environment"].(map[string]any)["SVC_OPA_TOKEN"],
		c.service(t, "svc")["environment"].(map[string]any)["SVC_OPA_TOKEN"], "svc sends the token OPA expects")
	assert.Contains(t, c.service(t, "opa")["volumes"], "./"+authzPolicy+":/authz/authz.rego:ro")
	assert.Contains(t, stringList(t, c.service(t, "opa")["command"]), "/authz/authz.rego")
}

// TestComposeLiteLLMConfigsRouteThroughTheConnector: each proxy mounts its
// configuration, whose svc guardrail calls the compose connector (path 1)
// or loads the in-process module (path 2) with the fail-closed settings.
func TestComposeLiteLLMConfigsRouteThroughTheConnector(t *testing.T) {
	c := loadCompose(t)
	connector := c.service(t, "connector")["environment"].(map[string]any)
	connectorURL := "http://connector:" + connector["SVC_CONNECTOR_PORT"].(string)
	for service, tt := range map[string]struct {
		config string
		want   map[string]any
	}{
		"litellm": {"deploy/litellm/path1.yaml", map[string]any{"guardrail": "generic_guardrail_api", "mode": "post_call",
			"api_base": connectorURL, "api_key": "os.environ/SVC_CONNECTOR_TOKEN", "unreachable_fallback": "fail_closed",
			"fail_on_error": true, "default_on": true}},
		"litellm-inprocess": {"deploy/litellm/path2.yaml", map[string]any{
			"guardrail": "svc_gateway.guardrail.ActionGuardrail", "mode": "post_call", "default_on": true}},
	} {
		s := c.service(t, service)
		assert.Contains(t, s["volumes"], "./"+tt.config+":/app/config.yaml:ro", service)
		assert.Equal(t, []string{"--config", "/app/config.yaml", "--port", "4000"}, stringList(t, s["command"]), service)
		var cfg struct {
			Guardrails []struct {
				Params map[string]any `yaml:"litellm_params"`
			} `yaml:"guardrails"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(readRepo(t, tt.config)), &cfg))
		require.Len(t, cfg.Guardrails, 1, tt.config)
		for k, v := range tt.want {
			assert.Equal(t, v, cfg.Guardrails[0].Params[k], "%s: %s", tt.config, k)
		}
	}
	env := c.service(t, "litellm-inprocess")["environment"].(map[string]any)
	assert.Equal(t, connectorURL, env["SVC_CONNECTOR_URL"])
	assert.Equal(t, "ghcr.io/berriai/litellm:main-v1.101.0", c.service(t, "litellm")["image"], "the pinned LiteLLM release")
}

// composeEnv is an environment file giving every variable of .env.example
// a placeholder value, for `docker compose config`.
func composeEnv(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(envExample(t))) {
		fmt.Fprintf(&b, "%s=placeholder-%s\n", name, strings.ToLower(name))
	}
	path := filepath.Join(t.TempDir(), "compose.env")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	return path
}

// TestComposeConfig runs the real `docker compose config` on the compose
// file, each profile. scripts/install-test-deps builds the compose plugin
// (SVC_COMPOSE_PLUGIN, default ~/.docker/cli-plugins/docker-compose); it
// runs as `docker compose` where a docker client is installed, else as the
// standalone docker-compose, which takes the same arguments. Without the
// plugin the test fails: the check is not skipped.
func TestComposeConfig(t *testing.T) {
	compose := composeCommand(t)
	for _, profile := range []string{"", "inprocess", "postgres"} {
		args := []string{"--project-directory", root, "-f", repoFile(composeFile), "--env-file", composeEnv(t)}
		if profile != "" {
			args = append(args, "--profile", profile)
		}
		out, err := exec.Command(compose[0], append(append(compose[1:], args...), "config", "--quiet")...).CombinedOutput()
		assert.NoError(t, err, "docker compose config (profile %q):\n%s", profile, out)
	}
	t.Log("docker compose config: passed")
}

// composeCommand is the command line of docker compose: the docker
// client's plugin, or the plugin binary run standalone.
func composeCommand(t *testing.T) []string {
	t.Helper()
	if docker, err := exec.LookPath("docker"); err == nil {
		if exec.Command(docker, "compose", "version").Run() == nil {
			return []string{docker, "compose"}
		}
	}
	plugin := os.Getenv("SVC_COMPOSE_PLUGIN")
	if plugin == "" {
		home, err := os.UserHomeDir()
		require.NoError(t, err)
		plugin = filepath.Join(home, ".docker", "cli-plugins", "docker-compose")
	}
	out, err := exec.Command(plugin, "version").CombinedOutput()
	require.NoError(t, err, "no docker compose plugin (%s: %s): run scripts/install-test-deps, which builds it", plugin, out)
	return []string{plugin}
}
