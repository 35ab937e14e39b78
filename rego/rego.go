// Package rego holds the bundled svc policy pack (package svc.policy, entry
// point data.svc.policy.decision) embedded in the binary, and writes it to a
// private directory that `opa eval --data` can load. Budget thresholds live
// in the pack's data.json under data.svc.thresholds.
package rego

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

//go:embed policy
var pack embed.FS

// Files returns the pack as embedded, rooted at the policy directory,
// including its *_test.rego files.
func Files() fs.FS {
	// fs.Sub fails only on an invalid path name, and "policy" is valid.
	sub, _ := fs.Sub(pack, "policy")
	return sub
}

// Materialize writes the pack's policy and data files (not its tests) into a
// fresh directory readable only by the current user, for `opa eval --data
// dir`. The caller removes it with cleanup, which is safe to call twice.
func Materialize() (dir string, cleanup func() error, err error) {
	return materialize(shipped)
}

// MaterializeWithTests is Materialize with the pack's *_test.rego files,
// for `opa test` (svc policy test).
func MaterializeWithTests() (dir string, cleanup func() error, err error) {
	return materialize(func(name string) bool { return shipped(name) || strings.HasSuffix(name, "_test.rego") })
}

func materialize(keep func(name string) bool) (dir string, cleanup func() error, err error) {
	dir, err = os.MkdirTemp("", "svc-policy-")
	if err != nil {
		return "", nil, fmt.Errorf("create policy dir: %w", err)
	}
	cleanup = func() error { return os.RemoveAll(dir) }
	if err := writePack(dir, keep); err != nil {
		_ = cleanup()
		return "", nil, err
	}
	return dir, cleanup, nil
}

func writePack(dir string, keep func(name string) bool) error {
	files := Files()
	return fs.WalkDir(files, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walk policy pack: %w", err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(name))
		if d.IsDir() {
			if name == "." {
				return nil
			}
			return mkdir(dst)
		}
		if !keep(name) {
			return nil
		}
		body, err := fs.ReadFile(files, name)
		if err != nil {
			return fmt.Errorf("read policy file %s: %w", name, err)
		}
		if err := os.WriteFile(dst, body, 0o600); err != nil {
			return fmt.Errorf("write policy file %s: %w", dst, err)
		}
		return nil
	})
}

func mkdir(dst string) error {
	if err := os.Mkdir(dst, 0o700); err != nil {
		return fmt.Errorf("create policy dir %s: %w", dst, err)
	}
	return nil
}

// shipped reports whether a pack file is loaded by `opa eval`: policy
// modules and data documents, never the tests.
func shipped(name string) bool {
	base := path.Base(name)
	switch path.Ext(base) {
	case ".rego":
		return !strings.HasSuffix(base, "_test.rego")
	case ".json", ".yaml", ".yml":
		return true
	}
	return false
}
