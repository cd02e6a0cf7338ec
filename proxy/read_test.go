package proxy_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/proxy"
)

// A read without a progress token is answered straight from the proxy's
// reader of the server (the fast path); with one, from the call's own
// goroutine. Either way the host gets what the server would have said to
// it directly: the same result, or the same JSON-RPC error, for each of a
// few reads made both ways on two copies of a server. Several run at once
// through the proxy, so that answers cross.
func TestReadsAnswerAsTheServerDoes(t *testing.T) {
	t.Run("demo", func(t *testing.T) {
		spec := demoSpec(t)
		sameAnswers(t, startProxy(t, spec, nil), spec, []read{
			{"get_budget", map[string]any{"buyer": "alice"}},
			{"get_budget", map[string]any{}},                     // a required argument missing
			{"get_budget", map[string]any{"buyer": []int{1, 2}}}, // of the wrong type
			{"find_orders", map[string]any{"buyer": "nobody"}},
		})
	})
	t.Run("json-rpc error", func(t *testing.T) {
		spec := mcpclient.ServerSpec{Command: fixture(t)}
		// (Not echo: the proxy sends its own progress token, which echo
		// tells.)
		policy := &guard.Policy{Tools: map[string]guard.ToolPolicy{"fail": {Kind: "read"}, "tool_error": {Kind: "read"}}}
		h := startProxy(t, spec, func(o *proxy.Options) { o.Policy = policy })
		sameAnswers(t, h, spec, []read{{"fail", nil}, {"tool_error", nil}})
	})
}

type read struct {
	tool string
	args map[string]any
}

func sameAnswers(t *testing.T, h *host, spec mcpclient.ServerSpec, reads []read) {
	direct, err := client.NewStdioMCPClient(spec.Command, nil, spec.Args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "direct-host", Version: "0"}
	if _, err := direct.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	answer := func(c *client.Client, tool string, args map[string]any, token bool) string {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = tool, args
		if token {
			req.Params.Meta = &mcp.Meta{ProgressToken: "t-" + tool}
		}
		res, err := c.CallTool(ctx, req)
		if err != nil {
			return "error: " + err.Error()
		}
		b, _ := json.Marshal(res)
		return string(b)
	}
	for _, r := range reads {
		want := answer(direct, r.tool, r.args, false)
		var wg sync.WaitGroup
		got := make([]string, 8)
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i] = answer(h.c, r.tool, r.args, i%2 == 1)
			}()
		}
		wg.Wait()
		for i, g := range got {
			if g != want {
				t.Errorf("%s %v (progress token %v):\nthrough the proxy %s\ndirect            %s", r.tool, r.args, i%2 == 1, g, want)
			}
		}
		t.Logf("%s %v: %s", r.tool, r.args, want)
	}
}

var (
	fixtureOnce sync.Once
	fixtureBin  string
	fixtureErr  error
)

// fixture is mcpclient's test server (a JSON-RPC error on demand), built
// on first use.
func fixture(t *testing.T) string {
	fixtureOnce.Do(func() {
		fixtureBin = filepath.Join(filepath.Dir(bin), "fixture")
		fixtureErr = testbin.Build(fixtureBin, "../mcpclient/testdata/fixture")
	})
	if fixtureErr != nil {
		t.Fatal(fixtureErr)
	}
	return fixtureBin
}
