package tui

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
)

// Binaries the process tests run, built once per test binary into one
// temporary folder (removed by TestMain).
var (
	binDir   string
	binMu    sync.Mutex
	binPaths = map[string]string{}
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// buildBinary builds a main package (a path relative to tui/) once.
func buildBinary(t *testing.T, pkg, name string) string {
	t.Helper()
	binMu.Lock()
	defer binMu.Unlock()
	if p, ok := binPaths[pkg]; ok {
		return p
	}
	if binDir == "" {
		d, err := os.MkdirTemp("", "mcp-confirm-tui-bin-")
		if err != nil {
			t.Fatal(err)
		}
		binDir = d
	}
	out := filepath.Join(binDir, name)
	if err := testbin.Build(out, pkg); err != nil {
		t.Fatal(err)
	}
	binPaths[pkg] = out
	return out
}
