// Package testbin builds a Go command of this module for tests that run it
// as a real subprocess (a server over stdio, the CLI as a user runs it).
// Test packages call it from TestMain or a sync.Once, once per test binary.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
