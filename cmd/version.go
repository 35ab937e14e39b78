package cmd

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Commit is the revision svc was built from, set at build time with
// -ldflags "-X github.com/svc-dev/svc/cmd.Commit=..."; when unset, the
// revision Go stamped into the binary (vcs.revision), if any.
var Commit = ""

// opaVersionTimeout bounds `opa version` under `svc version`.
const opaVersionTimeout = 5 * time.Second

// releaseTag matches a module release version as Go stamps it into a
// binary built by `go install ...@vX.Y.Z`; pseudo-versions and "(devel)" do
// not match.
var releaseTag = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)

func init() {
	info, _ := debug.ReadBuildInfo()
	Version, Commit = buildVersion(Version, Commit, info)
}

// buildVersion returns the version and commit to report: those set by
// -ldflags, else what the build info holds (a release tag of the main
// module, the VCS revision with "-dirty" when the tree was modified), else
// the defaults: version unchanged, commit "unknown".
func buildVersion(version, commit string, info *debug.BuildInfo) (string, string) {
	if info == nil {
		info = &debug.BuildInfo{}
	}
	if releaseTag.MatchString(info.Main.Version) {
		version = strings.TrimPrefix(info.Main.Version, "v")
	}
	if commit != "" {
		return version, commit
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	switch {
	case rev == "":
		return version, "unknown"
	case dirty:
		return version, rev + "-dirty"
	}
	return version, rev
}

func newVersionCommand() *cobra.Command {
	v := newViper(serveDefaults)
	return &cobra.Command{
		Use:   "version",
		Short: "Print the versions of svc, its Go toolchain and the opa binary it would run",
		Long: "Print svc's version and commit, the Go version it was built with, and the version of the opa binary\n" +
			"svc serve would run (SVC_OPA_BIN, default opa on PATH), or why there is none.\n" +
			"Exit code: 0 printed, 64 usage error.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			bin := (&parser{v: v}).str("opa_bin")
			_, err := fmt.Fprintf(c.OutOrStdout(), "svc %s\ncommit: %s\ngo: %s\nopa: %s\n",
				Version, Commit, runtime.Version(), opaVersion(c.Context(), bin))
			return failure(err)
		},
	}
}

// opaVersion describes the opa binary bin: "1.22.0 (/path/opa)", or why
// there is none to report.
func opaVersion(ctx context.Context, bin string) string {
	path, err := exec.LookPath(bin)
	if err != nil {
		return fmt.Sprintf("not found (SVC_OPA_BIN=%s)", bin)
	}
	ctx, cancel := context.WithTimeout(ctx, opaVersionTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "version").Output()
	if err != nil {
		return fmt.Sprintf("unknown (%s version: %v)", path, err)
	}
	for line := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(line, "Version:"); ok {
			return fmt.Sprintf("%s (%s)", strings.TrimSpace(v), path)
		}
	}
	return fmt.Sprintf("unknown (%s version printed no Version line)", path)
}
