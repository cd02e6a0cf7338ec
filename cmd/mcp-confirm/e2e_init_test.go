package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// init on a Claude Code project whose server is remote: the url entry,
// with a bearer token in its headers, becomes an mcp-confirm proxy --url
// entry; started exactly as the host starts it (its command, args and env,
// over stdio), it reaches the server through the token's gateway and its
// create_order is journaled under the URL; the token is not on the command
// line; uninstall gives back the file byte for byte.
func TestInitWrapsARemoteEntry(t *testing.T) {
	w := newWorld(t, t.TempDir())
	endpoint := bearerGateway(t, startHTTPDemo(t, w), "t0ken-5678")
	config := filepath.Join(w.dir, ".mcp.json")
	original := `{
  "mcpServers": {
    "shop": {
      "type": "http",
      "url": "` + endpoint + `",
      "headers": {
        "Authorization": "Bearer ${SHOP_TOKEN}"
      }
    }
  }
}
`
	if err := os.WriteFile(config, []byte(original), 0o644); err != nil {
		t.Fatal(err)
	}
	r := w.run("init", "--host", "claude-code")
	wantExit(t, r, exitOK, "init")
	if !strings.Contains(r.stdout, "shop: wrapped: remote "+endpoint+" through proxy --url") {
		t.Errorf("init did not say the remote entry was wrapped:\n%s", r)
	}

	var file struct {
		MCPServers map[string]struct {
			Type    string            `json:"type"`
			URL     string            `json:"url"`
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	b, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatalf("the rewritten file is not JSON: %v\n%s", err, b)
	}
	shop := file.MCPServers["shop"]
	if shop.Type != "stdio" || shop.URL != "" || shop.Command == "" {
		t.Fatalf("rewritten entry %+v, want a stdio entry without a url", shop)
	}
	if strings.Contains(strings.Join(shop.Args, " "), "Bearer") {
		t.Errorf("the token's header is on the command line: %q", shop.Args)
	}

	// The host: its environment, the entry's env on top, and a token the
	// host would expand (here the proxy does).
	env := childEnv(w.dir)
	for k, v := range shop.Env {
		env = append(env, k+"="+v)
	}
	env = append(env, "SHOP_TOKEN=t0ken-5678")
	host := startHost(t, env, shop.Command, shop.Args...)
	if res := hostCall(t, host, "create_order", map[string]any{"item": "widget", "quantity": 1, "buyer": "bob"}); res.IsError {
		t.Fatalf("create_order through the wrapped entry: %+v", res)
	}
	host.Close()

	calls := w.list()
	if len(calls) != 1 || calls[0].Tool != "create_order" || calls[0].State != "succeeded" {
		t.Fatalf("journal %+v, want one succeeded create_order", calls)
	}
	if r := w.run("show", strconv.FormatInt(calls[0].ID, 10)); !strings.Contains(r.stdout, endpoint) {
		t.Errorf("show does not name the URL the call went to:\n%s", r.stdout)
	}
	if n := totalOrders(t, w.db()); n != 1 {
		t.Errorf("%d orders on the server, want 1", n)
	}

	wantExit(t, w.run("init", "--host", "claude-code"), exitOK, "init again")
	if again, _ := os.ReadFile(config); string(again) != string(b) {
		t.Errorf("a second init changed the file:\n%s", again)
	}
	wantExit(t, cliIn(t, w.bin, w.dir, "", "uninstall", "--host", "claude-code"), exitOK, "uninstall")
	if back, _ := os.ReadFile(config); string(back) != original {
		t.Errorf("uninstall did not restore the file byte for byte:\n%s", back)
	}
}

// startHost starts command over stdio as an MCP host does (the host's
// environment env) and initializes it as Claude Code would; it is closed at
// the end of the test.
func startHost(t *testing.T, env []string, command string, args ...string) *client.Client {
	t.Helper()
	host, err := client.NewStdioMCPClient(command, env, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	initReq := mcp.InitializeRequest{}
	initReq.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	initReq.Params.ClientInfo = mcp.Implementation{Name: "claude-code", Version: "2.0.0"}
	if _, err := host.Initialize(ctx, initReq); err != nil {
		t.Fatalf("initialize %s: %v", command, err)
	}
	return host
}

// hostCall is one tools/call from the host; an error of the session fails
// the test, a tool's error result is returned.
func hostCall(t *testing.T, host *client.Client, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := mcp.CallToolRequest{}
	call.Params.Name = tool
	call.Params.Arguments = args
	res, err := host.CallTool(ctx, call)
	if err != nil {
		t.Fatalf("%s from the host: %v", tool, err)
	}
	return res
}
