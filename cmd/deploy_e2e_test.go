package cmd_test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The load balancer configs of docs/deploy.md are valid for Debian's
// HAProxy.
func TestDeployHAProxyConfigsAreValid(t *testing.T) {
	bin, err := exec.LookPath("haproxy")
	require.NoError(t, err, "haproxy is missing: run scripts/install-test-deps")
	for _, name := range []string{"haproxy.cfg", "haproxy-compose.cfg"} {
		out, err := exec.Command(bin, "-c", "-f", filepath.Join("..", "deploy", name)).CombinedOutput()
		assert.NoError(t, err, "%s: %s", name, out)
		assert.Contains(t, string(out), "Configuration file is valid", name)
	}
}
