//go:build linux

package engine

import "syscall"

// opaServerProcAttr puts a supervised opa in its own process group, so that
// Close kills it and anything it started, and has the kernel kill it should
// svc die without closing it.
func opaServerProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
