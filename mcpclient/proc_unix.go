//go:build unix

package mcpclient

import (
	"os"
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

// sweepLimit bounds one sweep: more than a pipe can hold (pipe-max-size is
// 1 MiB by default), so it takes all a dead child left behind, yet a
// grandchild writing without pause cannot keep it going for ever.
const sweepLimit = 4 << 20

// sweep reads f without blocking until the pipe is empty ("would block"),
// at EOF, or after sweepLimit bytes, passing what it reads to write; it
// reports EOF. f must be a pipe the runtime polls (os.Pipe's are).
func sweep(f *os.File, buf []byte, write func([]byte)) (eof bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	total := 0
	_ = rc.Read(func(fd uintptr) bool {
		for total < sweepLimit {
			n, err := syscall.Read(int(fd), buf)
			switch {
			case n > 0:
				write(buf[:n])
				total += n
			case err == syscall.EINTR:
			case err == nil:
				eof = true
				return true
			default: // EAGAIN: empty; any other error: the next Read says
				return true
			}
		}
		return true
	})
	return eof
}
