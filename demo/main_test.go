package demo_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/idempotency"
	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
)

// bin is the mcp-confirm binary, built once for the package. The tests drive
// `mcp-confirm demo-server` over real pipes in a subprocess: mcp-go's stdio
// server keeps a process-global session, so it cannot run twice in one test
// process, and a subprocess is what a host really talks to.
var bin string

var bins testbin.Binaries

func TestMain(m *testing.M) {
	var err error
	if bin, err = bins.Build("mcp-confirm", testbin.MCPConfirm); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(bins.Run(m))
}

// demoProc is one demo-server process and an initialised client on its pipes.
type demoProc struct {
	t        *testing.T
	client   *client.Client
	cmd      *exec.Cmd
	exited   chan error
	stderr   *testbin.Buffer
	stopOnce sync.Once
	mu       sync.Mutex
	progress []mcp.JSONRPCNotification
}

func startDemo(t *testing.T, db string, flags ...string) *demoProc {
	t.Helper()
	return startDemoAs(t, "demo-test", "", db, flags...)
}

// startDemoAs is startDemo with the client declaring the name clientName
// and asking for protocol version protocol ("": the newest, 2026-07-28,
// without a handshake; "2025-11-25": the initialize handshake).
func startDemoAs(t *testing.T, clientName, protocol, db string, flags ...string) *demoProc {
	t.Helper()
	p := &demoProc{t: t, stderr: &testbin.Buffer{}, exited: make(chan error, 1)}
	p.cmd = exec.Command(bin, append([]string{"demo-server", "--db", db}, flags...)...)
	p.cmd.Stderr = p.stderr
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	p.client = client.NewClient(transport.NewIO(stdout, stdin, nil))
	t.Cleanup(p.stop)
	if err := p.client.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.client.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" {
			p.mu.Lock()
			p.progress = append(p.progress, n)
			p.mu.Unlock()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var init mcp.InitializeRequest
	init.Params.ClientInfo = mcp.Implementation{Name: clientName, Version: "0"}
	init.Params.ProtocolVersion = protocol
	res, err := p.client.Initialize(ctx, init)
	if err != nil {
		t.Fatalf("initialize: %v\nserver stderr:\n%s", err, p.stderr.String())
	}
	if res.ServerInfo.Name != "mcp-confirm-demo" {
		t.Fatalf("server declares name %q, want mcp-confirm-demo", res.ServerInfo.Name)
	}
	return p
}

// stop closes stdin, as a host does, and expects the server to exit by
// itself. It runs once: tests may stop early, and Cleanup calls it again.
func (p *demoProc) stop() { p.stopOnce.Do(p.doStop) }

// kill ends the server with SIGKILL, as a crash would: no clean-up of its
// own runs.
func (p *demoProc) kill() {
	p.stopOnce.Do(func() {
		p.cmd.Process.Kill()
		<-p.exited
		p.client.Close()
	})
}

func (p *demoProc) doStop() {
	p.client.Close()
	select {
	case err := <-p.exited:
		if err != nil {
			p.t.Errorf("demo-server exited with %v\nstderr:\n%s", err, p.stderr.String())
		}
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
		p.t.Errorf("demo-server did not exit after stdin closed\nstderr:\n%s", p.stderr.String())
	}
	if p.t.Failed() {
		p.t.Logf("server stderr:\n%s", p.stderr.String())
	}
}

// call sends one tools/call with the key (if any) in _meta and waits at most
// timeout for its answer.
func (p *demoProc) call(timeout time.Duration, tool string, args map[string]any, key string, progressToken any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name = tool
	req.Params.Arguments = args
	if key != "" || progressToken != nil {
		req.Params.Meta = &mcp.Meta{ProgressToken: progressToken}
		if key != "" {
			req.Params.Meta.SetMetaField(idempotency.MetaKey, key)
		}
	}
	return p.client.CallTool(ctx, req)
}

func (p *demoProc) mustCall(tool string, args map[string]any, key string) *mcp.CallToolResult {
	p.t.Helper()
	res, err := p.call(10*time.Second, tool, args, key, nil)
	if err != nil {
		p.t.Fatalf("%s: %v", tool, err)
	}
	return res
}

func (p *demoProc) progressFor(token string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, e := range p.progress {
		if e.Params.AdditionalFields["progressToken"] == token {
			n++
		}
	}
	return n
}
