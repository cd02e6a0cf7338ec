package tui

import (
	"os"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/internal/pgtest"
	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
)

// bins are the binaries the process tests run, built once per test binary
// into one temporary folder (removed by TestMain).
var bins testbin.Binaries

// The PostgreSQL cluster of the tests that use one (pgtest) is stopped
// after them.
func TestMain(m *testing.M) { os.Exit(pgtest.Finish(bins.Run(m))) }

// buildBinary builds a main package (a path relative to tui/) once.
func buildBinary(t *testing.T, pkg, name string) string {
	t.Helper()
	return bins.Path(t, name, pkg)
}
