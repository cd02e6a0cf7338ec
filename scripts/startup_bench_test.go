package scripts

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
)

// startupBin builds mcp-confirm as scripts/release does (CGO_ENABLED=0,
// -trimpath, stripped), so the figures are the release binary's.
func startupBin(b *testing.B) string {
	b.Helper()
	b.Setenv("CGO_ENABLED", "0")
	out := filepath.Join(b.TempDir(), "mcp-confirm")
	if err := testbin.Build(out, testbin.MCPConfirm, "-trimpath", "-ldflags=-s -w -buildid="); err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkStartup times, in each iteration and the same run: exec of
// `mcp-confirm version` to its exit (the floor: loading the binary and
// Go's runtime); exec of `proxy --demo` to its answer to the host's
// initialize over stdio (the demo server started behind it, its tools
// listed); and, where tmux is installed, exec of the console (the guided
// demo) to its first frame on a terminal, and to the demo server's
// session shown in it. The metrics are the means, and each one's ratio to
// version's:
//
//	go test -run '^$' -bench Startup -benchtime 20x ./scripts/
func BenchmarkStartup(b *testing.B) {
	bin := startupBin(b)
	home := b.TempDir()
	env := []string{"HOME=" + home, "XDG_STATE_HOME=" + filepath.Join(home, "state"), "PATH=" + os.Getenv("PATH")}
	var tm *tmuxServer
	if _, err := exec.LookPath("tmux"); err == nil {
		tm = newTmux(b, env)
	} else {
		b.Log("no tmux: the console's first frame is not measured")
	}
	var version, initialize, frame, ready time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		version += timeVersion(b, bin, env)
		initialize += timeInitialize(b, bin, env, filepath.Join(home, fmt.Sprintf("j%d.db", i)))
		if tm != nil {
			f, r := tm.timeConsole(b, i, bin, filepath.Join(home, fmt.Sprintf("c%d", i)))
			frame, ready = frame+f, ready+r
		}
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / float64(b.N) / float64(time.Millisecond) }
	b.ReportMetric(ms(version), "version-ms")
	b.ReportMetric(ms(initialize), "initialize-ms")
	b.ReportMetric(float64(initialize)/float64(version), "initialize/version")
	if tm != nil {
		b.ReportMetric(ms(frame), "frame-ms")
		b.ReportMetric(float64(frame)/float64(version), "frame/version")
		b.ReportMetric(ms(ready), "ready-ms")
	}
}

func timeVersion(b *testing.B, bin string, env []string) time.Duration {
	cmd := exec.Command(bin, "version")
	cmd.Env = env
	start := time.Now()
	if out, err := cmd.Output(); err != nil || !strings.HasPrefix(string(out), "mcp-confirm ") {
		b.Fatalf("version: %v %q", err, out)
	}
	return time.Since(start)
}

func timeInitialize(b *testing.B, bin string, env []string, journal string) time.Duration {
	cmd := exec.Command(bin, "proxy", "--demo", "--db", journal, "--log", journal+".log")
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`+"\n")
	line, err := bufio.NewReader(stdout).ReadString('\n')
	d := time.Since(start)
	if err != nil || !strings.Contains(line, `"serverInfo"`) {
		b.Fatalf("initialize: %v %q", err, line)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		b.Fatalf("proxy: %v", err)
	}
	return d
}

// tmuxServer is a private tmux server (its own socket, no config), one
// window per console run.
type tmuxServer struct {
	sock string
	env  []string
}

func newTmux(b *testing.B, env []string) *tmuxServer {
	tm := &tmuxServer{sock: filepath.Join(b.TempDir(), "tmux.sock"), env: env}
	tm.run(b, "new-session", "-d", "-s", "bench", "-x", "100", "-y", "30", "sleep", "86400")
	b.Cleanup(func() { _ = exec.Command("tmux", "-S", tm.sock, "kill-server").Run() })
	return tm
}

func (tm *tmuxServer) run(b *testing.B, args ...string) string {
	out, err := exec.Command("tmux", append([]string{"-S", tm.sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
	if err != nil {
		b.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// timeConsole opens the console in a new window (its state under home)
// and polls the screen: the time to its first frame, and to the demo
// server's session shown in the status line. tmux's own exec of the
// window is counted in both, as a terminal's would be.
func (tm *tmuxServer) timeConsole(b *testing.B, i int, bin, home string) (frame, ready time.Duration) {
	w := fmt.Sprintf("bench:c%d", i)
	args := []string{"new-window", "-d", "-n", fmt.Sprintf("c%d", i), "-e", "TERM=xterm-256color",
		"-e", "HOME=" + home, "-e", "XDG_STATE_HOME=" + filepath.Join(home, "state")}
	start := time.Now()
	tm.run(b, append(args, bin)...)
	deadline := start.Add(time.Minute)
	for frame == 0 || ready == 0 {
		if time.Now().After(deadline) {
			b.Fatalf("the console showed no frame and session within a minute:\n%s", tm.run(b, "capture-pane", "-p", "-t", w))
		}
		screen := tm.run(b, "capture-pane", "-p", "-t", w)
		now := time.Since(start)
		if frame == 0 && strings.Contains(screen, "mcp-confirm · calls") {
			frame = now
		}
		if strings.Contains(screen, "mcp-confirm-demo running") {
			ready = now
		}
	}
	tm.run(b, "kill-window", "-t", w) // SIGHUP: the console ends, and its demo server
	return frame, ready
}
