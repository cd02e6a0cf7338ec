package npmfixture

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestInstalledVersions checks that the install matches the pins, so a lock
// file edited by hand cannot drift from what the interop tests claim to cover.
func TestInstalledVersions(t *testing.T) {
	dir := Dir(t)
	want := map[string]string{
		"@modelcontextprotocol/sdk":               "1.32.2",
		"@modelcontextprotocol/server-everything": "2026.8.31",
		"@modelcontextprotocol/server-filesystem": "2026.8.31",
		"@modelcontextprotocol/server-memory":     "2026.8.31",
	}
	for name, version := range want {
		data, err := os.ReadFile(filepath.Join(dir, "node_modules", name, "package.json"))
		if err != nil {
			t.Fatalf("%s not installed: %v", name, err)
		}
		var pkg struct{ Version string }
		if err := json.Unmarshal(data, &pkg); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if pkg.Version != version {
			t.Errorf("%s = %s, want %s", name, pkg.Version, version)
		}
	}
	for _, bin := range []string{"mcp-server-everything", "mcp-server-filesystem", "mcp-server-memory"} {
		Bin(t, bin)
	}
}
