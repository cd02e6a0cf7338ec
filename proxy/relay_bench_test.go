package proxy_test

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// relayEnv makes the test binary a byte relay instead of running tests:
// the cheapest possible process between a host and its server, the
// benchmarks' floor for what any stdio proxy can reach on this machine.
const relayEnv = "MCP_CONFIRM_BENCH_RELAY"

// relayMain copies stdin to the child and the child's stdout back, and
// nothing else.
func relayMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "relay: no command")
		return 2
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		return 1
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		return 1
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		return 1
	}
	go func() {
		_, _ = io.Copy(in, os.Stdin)
		_ = in.Close()
	}()
	_, _ = io.Copy(os.Stdout, out)
	_ = cmd.Wait()
	return 0
}

// cpuTime is a process's user+system CPU so far, in clock ticks (1/100 s
// on Linux), from /proc; ok is false where there is no /proc.
func cpuTime(pid int) (ticks int64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64) // utime, field 14
	k, err2 := strconv.ParseInt(f[12], 10, 64) // stime, field 15
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return u + k, true
}

// childOf is the one child process of pid (the server a relay or proxy
// started), from /proc; ok is false when there is not exactly one.
func childOf(pid int) (child int, ok bool) {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	var kids []string
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err == nil {
			kids = append(kids, strings.Fields(string(b))...)
		}
	}
	if len(kids) != 1 {
		return 0, false
	}
	n, err := strconv.Atoi(kids[0])
	return n, err == nil
}
