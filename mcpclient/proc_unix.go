//go:build unix

package mcpclient

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup puts the server in a process group of its own, so that a
// launcher (npx, uvx, a shell script) and the server it starts are stopped
// together, and a Ctrl-C meant for the console does not reach the server.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func terminate(cmd *exec.Cmd) { signalGroup(cmd, syscall.SIGTERM) }
func kill(cmd *exec.Cmd)      { signalGroup(cmd, syscall.SIGKILL) }

func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process == nil {
		return
	}
	// The group id is the leader's pid; it stays valid while any member lives,
	// even after the leader has been reaped.
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
		_ = cmd.Process.Signal(sig)
	}
}
