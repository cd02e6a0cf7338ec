// Package testbin is what tests need to run this module's commands as
// real subprocesses (a server over stdio, the CLI as a user runs it):
// build each once per test binary (Binaries), collect what the processes
// write from several goroutines at once (Buffer), and run the demo server
// over HTTP until it says its URL (HTTPDemo).
package testbin

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"
)

// MCPConfirm is the import path of the mcp-confirm command.
const MCPConfirm = "github.com/mcp-confirm/mcp-confirm/cmd/mcp-confirm"

// Build compiles pkg (an import path, or a directory relative to the
// calling test's package) to out with the go command of the toolchain that
// runs the tests (go test puts its GOROOT/bin first on the PATH of the test
// binary), creating out's folder. flags go to `go build` (e.g.
// "-race"). The error carries the compiler's output.
func Build(out, pkg string, flags ...string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
		return err
	}
	args := append(append([]string{"build", "-o", out}, flags...), pkg)
	cmd := exec.Command("go", args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s %v: %v\n%s", pkg, flags, err, b)
	}
	return nil
}

// Binaries are the commands one test binary builds, each once, into one
// temporary folder. The zero value is ready; a package keeps one in a
// variable and its TestMain ends with os.Exit(bins.Run(m)), which removes
// the folder after the tests.
type Binaries struct {
	mu    sync.Mutex // guards following
	dir   string
	built map[string]error // by name; nil: built
}

// Build builds pkg with flags to the file name (which may include a
// subfolder) in the folder, unless it was built already, and returns its
// path. For a TestMain that builds before any test runs.
func (b *Binaries) Build(name, pkg string, flags ...string) (string, error) {
	dir, err := b.Dir()
	if err != nil {
		return "", err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := filepath.Join(dir, name)
	err, done := b.built[name]
	if !done {
		err = Build(out, pkg, flags...)
		if b.built == nil {
			b.built = map[string]error{}
		}
		b.built[name] = err
	}
	return out, err
}

// Path is Build for a test or benchmark that needs the binary: a failed
// build fails it.
func (b *Binaries) Path(tb testing.TB, name, pkg string, flags ...string) string {
	tb.Helper()
	p, err := b.Build(name, pkg, flags...)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// Dir is the folder the binaries are built in (made on first use); a
// TestMain may keep other files of the run there.
func (b *Binaries) Dir() (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dir == "" {
		d, err := os.MkdirTemp("", "mcp-confirm-test-")
		if err != nil {
			return "", err
		}
		b.dir = d
	}
	return b.dir, nil
}

// Run runs the tests and removes the folder; its result is the exit code.
func (b *Binaries) Run(m interface{ Run() int }) int {
	code := m.Run()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
	return code
}

// Buffer collects what a process (its stderr, a log) writes while tests
// read it from other goroutines.
type Buffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// listening is the demo server's log line that gives its URL, once it
// accepts connections.
var listening = regexp.MustCompile(`msg="demo server listening" url=(\S+)`)

// HTTPDemo runs `bin demo-server --http 127.0.0.1:0 --db db flags...`, the
// demo server over Streamable HTTP on a loopback port of its own choosing,
// as a real process, and returns its URL. The server is stopped at the end
// of the test; one that has not said its URL within 30 s fails it.
func HTTPDemo(tb testing.TB, bin, db string, flags ...string) string {
	tb.Helper()
	return HTTPDemoCmd(tb, func(ctx context.Context, args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, bin, args...)
	}, db, flags...)
}

// HTTPDemoCmd is HTTPDemo with the process made by command (with the
// arguments above), for a caller that gives it an environment or a folder
// of its own. The process's stderr is read for the URL.
func HTTPDemoCmd(tb testing.TB, command func(ctx context.Context, args ...string) *exec.Cmd, db string, flags ...string) string {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := command(ctx, append([]string{"demo-server", "--http", "127.0.0.1:0", "--db", db}, flags...)...)
	var stderr Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m := listening.FindStringSubmatch(stderr.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the HTTP demo server did not start:\n%s", stderr.String())
		}
	}
}
