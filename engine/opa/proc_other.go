//go:build !linux

package opa

import "syscall"

// opaProcAttr puts an opa process (the supervised server, or an opa eval)
// in its own process group, so that svc kills it and anything it started.
func opaProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
