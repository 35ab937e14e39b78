package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// allocationCount matches the calls that count allocations or allocated
// bytes, which the race detector's own allocations make unstable.
var allocationCount = regexp.MustCompile(`testing\.AllocsPerRun|runtime\.ReadMemStats`)

// testName matches a test function's declaration.
var testName = regexp.MustCompile(`(?m)^func (Test\w+)\(`)

// TestAllocationTestsStayOutOfRaceBuilds: every test that counts
// allocations is in a file built without the race detector only
// (//go:build !race) and is named ...Allocs, so that it neither fails by
// luck under `go test -race` nor is lost: scripts/test runs
// `go test -run 'Allocs$'` without -race.
func TestAllocationTestsStayOutOfRaceBuilds(t *testing.T) {
	found := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") || path == "repo_test.go" {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		src := string(raw)
		if !allocationCount.MatchString(src) {
			return nil
		}
		found++
		assert.True(t, strings.HasPrefix(src, "//go:build !race\n"), "%s counts allocations: it must start with //go:build !race", path)
		for _, m := range testName.FindAllStringSubmatch(src, -1) {
			assert.True(t, strings.HasSuffix(m[1], "Allocs"), "%s: %s must be named ...Allocs for scripts/test's non-race run", path, m[1])
		}
		return nil
	})
	require.NoError(t, err)
	assert.NotZero(t, found, "no allocation test found: the walk is broken")
}
