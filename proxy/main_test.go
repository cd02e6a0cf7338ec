package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/proxy"
)

// bin is mcp-confirm itself, built once: the demo server for in-process
// proxies, and the proxy for hosts that spawn it (the TypeScript SDK).
var bin string

var bins testbin.Binaries

func TestMain(m *testing.M) {
	if os.Getenv(relayEnv) == "1" {
		os.Exit(relayMain(os.Args[1:]))
	}
	var flags []string
	if raceEnabled {
		// The proxy run by node is this package's code too.
		flags = append(flags, "-race")
	}
	var err error
	if bin, err = bins.Build("mcp-confirm", testbin.MCPConfirm, flags...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(bins.Run(m))
}

// host is an in-process proxy with an mcp-go client as its upstream host,
// joined by pipes. mcp-go's stdio server keeps one global session per
// process, so in-process proxies must not run in parallel tests.
type host struct {
	c       *client.Client
	journal *pending.Journal
	logs    *testbin.Buffer
	notes   chan mcp.JSONRPCNotification
}

func startProxy(t testing.TB, spec mcpclient.ServerSpec, set func(*proxy.Options)) *host {
	t.Helper()
	return startProxyFor(t, spec, set)
}

// startProxyFor is startProxy with options for the host's mcp-go client.
func startProxyFor(t testing.TB, spec mcpclient.ServerSpec, set func(*proxy.Options), hostOpts ...client.ClientOption) *host {
	t.Helper()
	return startProxyAs(t, "go-host", spec, set, hostOpts...)
}

// startProxyAs is startProxyFor with the host's clientInfo.name.
func startProxyAs(t testing.TB, name string, spec mcpclient.ServerSpec, set func(*proxy.Options), hostOpts ...client.ClientOption) *host {
	t.Helper()
	ctx := context.Background()
	j, err := pending.Open(ctx, filepath.Join(t.TempDir(), "journal.db"), pending.Options{})
	if err != nil {
		t.Fatal(err)
	}
	logs := &testbin.Buffer{}
	opts := proxy.Options{
		Server: spec, Journal: j, Version: "test",
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), ServerStderr: logs,
	}
	if set != nil {
		set(&opts)
	}
	p := proxy.New(opts)
	upR, upW := io.Pipe()
	downR, downW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		// Labelled so a CPU profile can show the proxy's own goroutines
		// apart from the host's (pprof -tagfocus side=proxy).
		pprof.Do(ctx, pprof.Labels("side", "proxy"), func(ctx context.Context) {
			err := p.Run(ctx, upR, downW)
			_ = downW.Close()
			done <- err
		})
	}()
	h := &host{journal: j, logs: logs, notes: make(chan mcp.JSONRPCNotification, 1000)}
	h.c = client.NewClient(transport.NewIO(downR, upW, nil), hostOpts...)
	t.Cleanup(func() {
		_ = h.c.Close() // closes the proxy's stdin
		if err := <-done; err != nil {
			t.Errorf("proxy Run: %v", err)
		}
		_ = j.Close()
		if t.Failed() {
			t.Logf("proxy log:\n%s", logs.String())
		}
	})
	if err := h.c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h.c.OnNotification(func(n mcp.JSONRPCNotification) {
		select {
		case h.notes <- n:
		default:
		}
	})
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: name, Version: "0"}
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := h.c.Initialize(ictx, init); err != nil {
		t.Fatalf("initialize through the proxy: %v\nlog:\n%s", err, logs.String())
	}
	return h
}

func demoSpec(t testing.TB, args ...string) mcpclient.ServerSpec {
	t.Helper()
	return mcpclient.ServerSpec{Command: bin, Args: append([]string{"demo-server", "--db", filepath.Join(t.TempDir(), "demo.db")}, args...)}
}

// call makes one tools/call as a host does, with a progress token.
func (h *host) call(ctx context.Context, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	req.Params.Meta = &mcp.Meta{ProgressToken: "host-token-" + tool}
	return h.c.CallTool(ctx, req)
}

// status reads the proxy's own structured answer ({"mcp-confirm": ...}).
func status(t *testing.T, r *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, err := json.Marshal(r.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func text(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// waitFor polls cond until it holds; the bound only turns a hang into a
// failure, it asserts nothing about speed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func calls(t *testing.T, j *pending.Journal) []pending.Call {
	t.Helper()
	cs, err := j.List(context.Background(), pending.Filter{OldestFirst: true})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func getCall(t *testing.T, j *pending.Journal, id int64) pending.Call {
	t.Helper()
	c, err := j.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
