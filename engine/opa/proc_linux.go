//go:build linux

package opa

import "syscall"

// opaProcAttr puts an opa process (the supervised server, or an opa eval)
// in its own process group, so that svc kills it and anything it started,
// and has the kernel kill it should svc die without closing it.
func opaProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
