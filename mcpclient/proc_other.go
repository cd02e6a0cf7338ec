//go:build !unix

package mcpclient

import "os/exec"

func ownProcessGroup(*exec.Cmd) {}

// terminate has no gentle form here: there is no SIGTERM.
func terminate(cmd *exec.Cmd) { kill(cmd) }

func kill(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
