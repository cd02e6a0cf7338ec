package proxy_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/proxy"
)

// In front of a remote server, a session replaced after a 404 is not a
// restart: nothing was restarted, and the log says a new session was
// started with the server at its URL. (Over stdio it still says the
// server was restarted: TestDownstreamKilledMidCall.)
func TestProxyExpiredHTTPSessionIsANewSession(t *testing.T) {
	url := testbin.HTTPDemo(t, bin, filepath.Join(t.TempDir(), "demo.db"), "--expire-sessions")
	h := startProxy(t, mcpclient.ServerSpec{URL: url}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, buyer := range []string{"alice", "bob"} {
		r, err := h.call(ctx, "create_order", map[string]any{"item": "widget", "quantity": 1, "buyer": buyer})
		if err != nil || r.IsError {
			t.Fatalf("create_order for %s: %v %q", buyer, err, text(r))
		}
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "started a new session with the MCP server at "+url) {
		t.Errorf("the log does not say a new session was started with %s:\n%s", url, logs)
	}
	if strings.Contains(logs, "restarted the MCP server") {
		t.Errorf("the log says a remote server was restarted:\n%s", logs)
	}
}

// A host whose initialize comes after a ping (which started the session
// without its capabilities) has them declared on a new HTTP session: the
// log says so, not that the server was restarted.
func TestProxyHTTPSessionReplacedToDeclareCapabilities(t *testing.T) {
	dir := t.TempDir()
	url := testbin.HTTPDemo(t, bin, filepath.Join(dir, "demo.db"), "--protocols", "2025-11-25")
	j, err := pending.Open(context.Background(), filepath.Join(dir, "journal.db"), pending.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	logs := &testbin.Buffer{}
	p := proxy.New(proxy.Options{Server: mcpclient.ServerSpec{URL: url}, Journal: j, Version: "test",
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	upR, upW := io.Pipe()
	downR, downW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- p.Run(context.Background(), upR, downW)
		_ = downW.Close()
	}()
	answers := bufio.NewScanner(downR)
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{}},"clientInfo":{"name":"h","version":"1"}}}`,
	} {
		if _, err := io.WriteString(upW, line+"\n"); err != nil {
			t.Fatal(err)
		}
		if !answers.Scan() {
			t.Fatalf("no answer to %s:\n%s", line, logs.String())
		}
	}
	upW.Close()
	go func() { _, _ = io.Copy(io.Discard, downR) }()
	if err := <-done; err != nil {
		t.Fatalf("proxy Run: %v", err)
	}
	said := logs.String()
	if !strings.Contains(said, "started a new session with the MCP server at "+url+" to declare the host's capabilities") {
		t.Errorf("the log does not say a new session was started to declare the host's capabilities:\n%s", said)
	}
	if strings.Contains(said, "restarted the MCP server") {
		t.Errorf("the log says a remote server was restarted:\n%s", said)
	}
}

// A remote server's connection cut after it ran a write: the call is
// answered unknown, and the log says the next call starts a new session,
// not that the server restarts (there is no process to restart).
func TestProxyHTTPConnectionLostSaysNewSession(t *testing.T) {
	url := testbin.HTTPDemo(t, bin, filepath.Join(t.TempDir(), "demo.db"), "--cut-after-commit", "1")
	h := startProxy(t, mcpclient.ServerSpec{URL: url}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := h.call(ctx, "create_order", map[string]any{"item": "widget", "quantity": 1, "buyer": "alice"})
	if err != nil || !strings.Contains(text(r), "UNKNOWN") {
		t.Fatalf("create_order cut after its commit: %v %q, want an unknown answer", err, text(r))
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "the next call starts a new session") {
		t.Errorf("the log does not say a new session starts:\n%s", logs)
	}
	if strings.Contains(logs, "restarts on the next call") {
		t.Errorf("the log says a remote server restarts:\n%s", logs)
	}
}
