//go:build !linux

package engine

import "syscall"

// opaServerProcAttr puts a supervised opa in its own process group, so that
// Close kills it and anything it started.
func opaServerProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
