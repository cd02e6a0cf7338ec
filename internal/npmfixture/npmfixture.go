// Package npmfixture installs the pinned MCP servers from npm that tests run
// against: the TypeScript SDK's own servers are what most hosts meet in the
// field, and they speak the legacy (2025-11-25) protocol era, which an mcp-go
// fixture cannot stand in for. It also installs the MCP conformance suite
// (@modelcontextprotocol/conformance), whose client scenarios run the
// built binary against the suite's own test servers.
//
// The versions are pinned by the package.json and package-lock.json committed
// beside this file; node_modules is installed next to them on first use and
// kept out of git.
package npmfixture

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// stampName is written into node_modules after a successful install. It holds
// the hash of the lock file the install came from, so a later test run (or a
// parallel test package) can tell the tree is current without reinstalling.
const stampName = ".mcp-confirm-installed"

var (
	once    sync.Once
	onceDir string
	onceErr error
	// missing is set when node or npm is not on PATH: the only reason to skip.
	missing string
)

// Dir returns the folder holding package.json and an installed node_modules.
// The install (npm ci) runs at most once per process, and under an exclusive
// file lock so that test packages running in parallel do not race on the same
// node_modules. It skips the test only when node or npm is absent; a failed
// install fails the test, since a silently skipped interop test proves
// nothing.
func Dir(t testing.TB) string {
	t.Helper()
	once.Do(func() { onceDir, onceErr = install() })
	if missing != "" {
		t.Skipf("npmfixture: %s not found on PATH; install Node.js 20+ and npm to run the tests against the TypeScript SDK servers", missing)
	}
	if onceErr != nil {
		t.Fatalf("npmfixture: %v", onceErr)
	}
	return onceDir
}

// Bin returns the path of an installed package's executable script, such as
// "mcp-server-everything", to be run with node.
func Bin(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(Dir(t), "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("npmfixture: %s is not installed: %v", name, err)
	}
	return p
}

func sourceDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot locate the npmfixture source folder")
	}
	return filepath.Dir(file), nil
}

func install() (string, error) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = tool
			return "", nil
		}
	}
	dir, err := sourceDir()
	if err != nil {
		return "", err
	}
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return "", fmt.Errorf("read lock file: %w", err)
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	stamp := filepath.Join(dir, "node_modules", stampName)

	unlock, err := lockFile(filepath.Join(dir, ".install.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()

	// Checked under the lock: another process may have just finished.
	if got, err := os.ReadFile(stamp); err == nil && bytes.Equal(bytes.TrimSpace(got), []byte(want)) {
		return dir, nil
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("npm ci in %s failed: %w\n%s", dir, err, out)
	}
	if err := os.WriteFile(stamp, []byte(want+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("write install stamp: %w", err)
	}
	return dir, nil
}
