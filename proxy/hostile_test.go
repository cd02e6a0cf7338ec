package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/proxy"
)

// A server alive but silent on tools/list: the proxy, which lists the tools
// before it answers the host's first request, answers it with a JSON-RPC
// error saying so instead of leaving the host without an answer.
func TestSilentToolsListAnswersTheHost(t *testing.T) {
	dir := t.TempDir()
	hostile := filepath.Join(dir, "hostile")
	if err := testbin.Build(hostile, "../mcpclient/testdata/hostile"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	j, err := pending.Open(ctx, filepath.Join(dir, "journal.db"), pending.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	policy := &guard.Policy{}
	policy.Defaults.ListTimeout.Duration = time.Second
	p := proxy.New(proxy.Options{Server: mcpclient.ServerSpec{Command: hostile, Args: []string{"silent-list"}},
		Journal: j, Version: "test", Policy: policy, ServerStderr: io.Discard})
	upR, upW := io.Pipe()
	downR, downW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := p.Run(ctx, upR, downW)
		_ = downW.Close()
		done <- err
	}()
	defer func() {
		_ = upW.Close()
		cancel()
		<-done
	}()
	go func() {
		_, _ = io.WriteString(upW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"host","version":"0"}}}`+"\n")
	}()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(downR)
		sc.Buffer(nil, 1<<20)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, downR)
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(30 * time.Second): // liveness bound
		t.Fatal("the host got no answer")
	}
	var resp struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(line), &resp); err != nil {
		t.Fatalf("answer %q: %v", line, err)
	}
	if string(resp.ID) != "1" || resp.Error == nil ||
		!strings.Contains(resp.Error.Message, "the server did not list its tools within 1s; nothing was sent") {
		t.Fatalf("want a JSON-RPC error saying the server did not list its tools, got %s", line)
	}
	t.Logf("host got: %s", line)
	_ = os.Remove(hostile)
}
