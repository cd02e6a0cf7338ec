//go:build unix

package pgtest

import "syscall"

// detached puts a process in a session of its own, so that it outlives
// the test binary's process group.
func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
