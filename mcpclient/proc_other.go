//go:build !unix

package mcpclient

import (
	"os"
	"os/exec"
)

func ownProcessGroup(*exec.Cmd) {}

// terminate has no gentle form here: there is no SIGTERM.
func terminate(cmd *exec.Cmd) { kill(cmd) }

func kill(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

// sweep reads nothing here: settleStderr, finding no read deadline on a
// pipe the runtime does not poll, waits for EOF instead.
func sweep(*os.File, []byte, func([]byte)) (eof bool) { return false }
