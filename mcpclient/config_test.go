package mcpclient_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

func TestParseConfig(t *testing.T) {
	t.Setenv("MCPC_TEST_TOKEN", "tok-123")
	wd, _ := os.Getwd()
	tests := []struct {
		name    string
		json    string
		server  string
		want    mcpclient.ServerSpec
		wantErr string // substring; "" means success
	}{
		{
			name: "claude desktop",
			json: `{"mcpServers": {
				"orders": {"command": "npx", "args": ["-y", "orders-mcp", 8080], "env": {"API_KEY": "k", "DEBUG": true}, "disabled": false, "autoApprove": []},
				"other": {"command": "other"}
			}, "globalShortcut": "x"}`,
			server: "orders",
			want:   mcpclient.ServerSpec{Name: "orders", Command: "npx", Args: []string{"-y", "orders-mcp", "8080"}, Env: []string{"API_KEY=k", "DEBUG=true"}},
		},
		{
			name: "vs code with type, cwd, inputs and unknown keys",
			json: `{"inputs": [{"type": "promptString", "id": "unused"}],
				"servers": {"fs": {"type": "stdio", "command": "node", "args": ["srv.js"], "env": {"T": "${env:MCPC_TEST_TOKEN}"}, "cwd": "${workspaceFolder}/sub", "dev": {"watch": "x"}}}}`,
			server: "fs",
			want:   mcpclient.ServerSpec{Name: "fs", Command: "node", Args: []string{"srv.js"}, Env: []string{"T=tok-123"}, Dir: filepath.Join(wd, "sub")},
		},
		{
			name:   "single server, no name given",
			json:   `{"servers": {"only": {"command": "x"}}}`,
			server: "",
			want:   mcpclient.ServerSpec{Name: "only", Command: "x"},
		},
		{name: "input variable refused", json: `{"servers": {"s": {"command": "x", "env": {"KEY": "${input:api-key}"}}}}`, server: "s", wantErr: "${input:api-key}"},
		{name: "input variable in args refused", json: `{"mcpServers": {"s": {"command": "x", "args": ["--token=${input:tok}"]}}}`, server: "s", wantErr: "args[0]"},
		{name: "unknown variable refused", json: `{"servers": {"s": {"command": "${command:pick}"}}}`, server: "s", wantErr: "does not resolve"},
		{name: "unknown name lists names", json: `{"mcpServers": {"b": {"command": "x"}, "a": {"command": "y"}}}`, server: "c", wantErr: `no server named "c" (available: a, b)`},
		{name: "several, no name", json: `{"mcpServers": {"b": {"command": "x"}, "a": {"command": "y"}}}`, server: "", wantErr: "available: a, b"},
		{
			name:   "http entry with a header from the environment (Claude Code, VS Code)",
			json:   `{"servers": {"r": {"type": "http", "url": "https://example.invalid/mcp", "headers": {"Authorization": "Bearer ${MCPCLIENT_TEST_TOKEN}"}}}}`,
			server: "r",
			want: mcpclient.ServerSpec{Name: "r", URL: "https://example.invalid/mcp",
				Headers: map[string]string{"Authorization": "Bearer s3cret"}},
		},
		{name: "url entry (Cursor)", json: `{"mcpServers": {"r": {"url": "https://example.invalid/mcp"}}}`, server: "r",
			want: mcpclient.ServerSpec{Name: "r", URL: "https://example.invalid/mcp"}},
		{name: "unset header variable refused", json: `{"mcpServers": {"r": {"url": "https://x.invalid/mcp", "headers": {"X-Key": "${MCPCLIENT_TEST_UNSET}"}}}}`, server: "r", wantErr: "not set in the environment"},
		{name: "old sse transport refused", json: `{"mcpServers": {"r": {"type": "sse", "url": "https://example.invalid/sse"}}}`, server: "r", wantErr: "HTTP+SSE"},
		{name: "http type without url refused", json: `{"servers": {"r": {"type": "http"}}}`, server: "r", wantErr: `without a "url"`},
		{name: "no command", json: `{"mcpServers": {"r": {"args": ["x"]}}}`, server: "r", wantErr: `no "command"`},
		{name: "envFile refused", json: `{"servers": {"r": {"command": "x", "envFile": ".env"}}}`, server: "r", wantErr: "envFile"},
		{name: "neither shape", json: `{"mcp": {"servers": {}}}`, server: "r", wantErr: `no "mcpServers"`},
		{name: "not json", json: `{"servers": {,}}`, server: "r", wantErr: "not valid JSON"},
		{name: "object arg refused", json: `{"servers": {"r": {"command": "x", "args": [{"a": 1}]}}}`, server: "r", wantErr: "want a string"},
	}
	t.Setenv("MCPCLIENT_TEST_TOKEN", "s3cret")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mcpclient.ParseConfig([]byte(tt.json), tt.server)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("got %+v, want error containing %q", got, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %q does not contain %q", err, tt.wantErr)
				}
				if !errors.Is(err, mcpclient.ErrConfig) {
					t.Errorf("error %v is not ErrConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestLoadConfigWorkspaceFolder(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, ".vscode"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, ".vscode", "mcp.json")
	data := `{"servers": {"s": {"type": "stdio", "command": "${workspaceFolder}/bin/server", "cwd": "data"}}}`
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := mcpclient.LoadConfig(path, "s")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "bin", "server"); got.Command != want {
		t.Errorf("command = %q, want %q", got.Command, want)
	}
	if want := filepath.Join(root, "data"); got.Dir != want {
		t.Errorf("dir = %q, want %q", got.Dir, want)
	}
	if _, err := mcpclient.LoadConfig(filepath.Join(root, "missing.json"), "s"); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: err = %v", err)
	}
}
