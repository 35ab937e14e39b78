package deploy_test

import (
	"bufio"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// imageUID is the image user's uid and gid: the owner a compose secret's
// host file is chowned to (docs/deploy.md).
const imageUID = "10001"

// exactTag matches a tag naming one release: three version numbers
// (1.26.8-bookworm, 1.22.0-static, main-v1.101.0).
var exactTag = regexp.MustCompile(`(^|[^0-9.])v?\d+\.\d+\.\d+($|[^0-9.])`)

// debianPoint matches a Debian point release tag (12.12-slim): Debian
// versions have two numbers.
var debianPoint = regexp.MustCompile(`^\d+\.\d+(-slim)?$`)

// pinned reports whether an image reference names one build: by digest,
// or by a release tag.
func pinned(ref string) bool {
	if strings.Contains(ref, "@sha256:") {
		return true
	}
	slash := strings.LastIndex(ref, "/")
	name, tag, ok := strings.Cut(ref[slash+1:], ":")
	if !ok {
		return false
	}
	return exactTag.MatchString(tag) || (ref[:slash+1]+name == "debian" && debianPoint.MatchString(tag))
}

func TestPinned(t *testing.T) {
	for ref, want := range map[string]bool{
		"golang:1.26.8-bookworm": true, "openpolicyagent/opa:1.22.0-static": true, "debian:12.12-slim": true,
		"ghcr.io/berriai/litellm:main-v1.101.0": true, "debian:bookworm-slim@sha256:0123": true,
		"golang:1.26-bookworm": false, "debian:bookworm-slim": false, "debian:latest": false, "debian": false,
		"ghcr.io/berriai/litellm:main-latest": false, "openpolicyagent/opa:latest-static": false, "alpine:3.20": false,
	} {
		assert.Equal(t, want, pinned(ref), ref)
	}
}

// stage is one FROM of a Dockerfile and its instructions.
type stage struct {
	image, name string
	lines       []string
}

// parseDockerfile splits a Dockerfile into stages, joining continued lines.
func parseDockerfile(t *testing.T, rel string) []stage {
	t.Helper()
	var stages []stage
	var cur strings.Builder
	s := bufio.NewScanner(strings.NewReader(readRepo(t, rel)))
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if body, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(line)
		instr := cur.String()
		cur.Reset()
		if f := strings.Fields(instr); len(f) > 1 && strings.EqualFold(f[0], "FROM") {
			st := stage{image: f[1]}
			if len(f) == 4 && strings.EqualFold(f[2], "AS") {
				st.name = f[3]
			}
			stages = append(stages, st)
			continue
		}
		require.NotEmpty(t, stages, "%s: an instruction before FROM", rel)
		stages[len(stages)-1].lines = append(stages[len(stages)-1].lines, instr)
	}
	require.NotEmpty(t, stages, rel)
	return stages
}

// checkBaseImages checks that every image a Dockerfile starts from that is
// not one of its own stages is pinned.
func checkBaseImages(t *testing.T, rel string, stages []stage) {
	t.Helper()
	names := map[string]bool{}
	for _, st := range stages {
		if !names[st.image] {
			assert.True(t, pinned(st.image), "%s: FROM %s is not pinned to a release tag or digest", rel, st.image)
		}
		names[st.name] = true
	}
}

// TestDockerfile: pinned bases; OPA copied from its release image at the
// version scripts/install-opa pins, never compiled; version and commit set
// with -ldflags; a non-root user with the uid compose's secret expects.
func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t, "Dockerfile")
	checkBaseImages(t, "Dockerfile", stages)
	text := readRepo(t, "Dockerfile")

	pin := regexp.MustCompile(`(?m)^OPA_VERSION=v(\S+)$`).FindStringSubmatch(readRepo(t, "scripts/install-opa"))
	require.NotNil(t, pin, "scripts/install-opa pins OPA_VERSION")
	opaStage := ""
	for _, st := range stages {
		if st.image == "openpolicyagent/opa:"+pin[1]+"-static" {
			opaStage = st.name
		}
	}
	require.NotEmpty(t, opaStage, "Dockerfile: a stage FROM openpolicyagent/opa:%s-static", pin[1])
	final := stages[len(stages)-1]
	assert.Contains(t, final.lines, "COPY --from="+opaStage+" /opa /usr/local/bin/opa", "OPA is copied from its release image")
	assert.NotContains(t, text, "open-policy-agent/opa@", "OPA is not compiled in the build")

	assert.Contains(t, text, "-X github.com/svc-dev/svc/cmd.Version=${VERSION}")
	assert.Contains(t, text, "-X github.com/svc-dev/svc/cmd.Commit=${COMMIT}")

	var user string
	for _, l := range final.lines {
		if u, ok := strings.CutPrefix(l, "USER "); ok {
			user = strings.TrimSpace(u)
		}
	}
	assert.Equal(t, imageUID+":"+imageUID, user, "the final stage runs as the non-root svc user, by number")
	assert.Contains(t, text, "--uid "+imageUID)
	assert.Contains(t, text, "--gid "+imageUID)

	secret := loadCompose(t).service(t, "svc")["secrets"].([]any)[0].(map[string]any)
	assert.Equal(t, imageUID, secret["uid"])
	assert.Equal(t, imageUID, secret["gid"])
	assert.Contains(t, readRepo(t, "docs/deploy.md"), "chown "+imageUID+":"+imageUID+" resolvers.json",
		"docs/deploy.md says how the mode-600 host file becomes readable by the image's user")
}

// TestLiteLLMDockerfile: the path-2 image is the pinned LiteLLM release
// with the module copied from the repository.
func TestLiteLLMDockerfile(t *testing.T) {
	const rel = "deploy/litellm/Dockerfile"
	stages := parseDockerfile(t, rel)
	checkBaseImages(t, rel, stages)
	assert.Equal(t, "ghcr.io/berriai/litellm:main-v1.101.0", stages[0].image)
	assert.Contains(t, stages[0].lines, "COPY connector/python/svc_gateway /opt/svc/svc_gateway")
	assert.Contains(t, stages[0].lines, "ENV PYTHONPATH=/opt/svc")
	for name, raw := range loadCompose(t).section("services") {
		s := raw.(map[string]any)
		if _, built := s["build"]; !built {
			assert.True(t, pinned(s["image"].(string)), "service %s: image %v is not pinned", name, s["image"])
		}
	}
}
