package cmd

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBuildVersion: -ldflags win; else a release tag of the module and the
// VCS revision Go stamped; else the default version and "unknown".
func TestBuildVersion(t *testing.T) {
	stamped := func(version, rev, modified string) *debug.BuildInfo {
		info := &debug.BuildInfo{Main: debug.Module{Version: version}}
		if rev != "" {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: "vcs.revision", Value: rev},
				debug.BuildSetting{Key: "vcs.modified", Value: modified})
		}
		return info
	}
	for _, tt := range []struct {
		name            string
		version, commit string
		info            *debug.BuildInfo
		wantV, wantC    string
	}{
		{"no build info", "0.3.0", "", nil, "0.3.0", "unknown"},
		{"devel build without VCS", "0.3.0", "", stamped("(devel)", "", ""), "0.3.0", "unknown"},
		{"clean checkout", "0.3.0", "", stamped("(devel)", "abc123", "false"), "0.3.0", "abc123"},
		{"modified checkout", "0.3.0", "", stamped("(devel)", "abc123", "true"), "0.3.0", "abc123-dirty"},
		{"go install of a release", "0.3.0", "", stamped("v0.4.1", "", ""), "0.4.1", "unknown"},
		{"pseudo-version is not a release", "0.3.0", "", stamped("v0.0.0-20261126-abcdef123456", "", ""), "0.3.0", "unknown"},
		{"ldflags commit wins", "0.3.0", "f00d", stamped("(devel)", "abc123", "true"), "0.3.0", "f00d"},
	} {
		v, c := buildVersion(tt.version, tt.commit, tt.info)
		assert.Equal(t, tt.wantV, v, tt.name)
		assert.Equal(t, tt.wantC, c, tt.name)
	}
}
