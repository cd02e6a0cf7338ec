package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/internal/npmfixture"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// upstreamProxy is a Proxy with only what serverRequest needs, writing to
// the host through a pipe whose lines the test reads off a channel.
func upstreamProxy(t *testing.T, caps mcp.ClientCapabilities) (*Proxy, chan []byte) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r, w := io.Pipe()
	t.Cleanup(func() { _ = r.Close() })
	p := &Proxy{log: slog.New(slog.DiscardHandler), out: &lineWriter{w: w}, bg: group{ctx: ctx}}
	p.host = newHostLink(p.write)
	p.host.caps.Store(&caps)
	lines := make(chan []byte, 16)
	go func() {
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			lines <- line
		}
	}()
	return p, lines
}

type answered struct {
	result json.RawMessage
	err    *mcpclient.RPCError
}

func ask(p *Proxy, ctx context.Context, r mcpclient.ServerRequest) chan answered {
	ch := make(chan answered, 1)
	go func() {
		res, err := p.serverRequest(ctx, r)
		ch <- answered{res, err}
	}()
	return ch
}

func readLine(t *testing.T, lines chan []byte) map[string]json.RawMessage {
	t.Helper()
	var line []byte
	select {
	case line = <-lines:
	case <-time.After(10 * time.Second):
		t.Fatal("nothing written to the host")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return m
}

func waitAnswer(t *testing.T, ch chan answered) answered {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("serverRequest never returned")
	}
	return answered{}
}

// The host is asked only once it is ready, under the proxy's own id; its
// answer goes back as it wrote it. A request the server cancels before then
// is never put to the host. Once answered, an id is not pending any more,
// and a second answer to it is dropped rather than handed to mcp-go.
func TestServerRequestGoesUpAndTakesTheHostsAnswer(t *testing.T) {
	p, host := upstreamProxy(t, mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}})
	early := ask(p, context.Background(), mcpclient.ServerRequest{Session: 1, ID: `"early"`, Method: "sampling/createMessage"})
	waitPending(t, p, 1)
	p.host.serverCancelled(1, json.RawMessage(`{"requestId":"early"}`))
	if a := waitAnswer(t, early); a.err == nil {
		t.Fatalf("a request cancelled before the host was ready was answered %s", a.result)
	}
	ch := ask(p, context.Background(), mcpclient.ServerRequest{Session: 1, ID: "0", Method: "sampling/createMessage", Params: json.RawMessage(`{"maxTokens":5}`)})
	waitPending(t, p, 1)
	p.host.markReady()
	// The first line the host gets is the second request: the cancelled
	// one was never written, nor its cancel.
	req := readLine(t, host)
	if string(req["method"]) != `"sampling/createMessage"` || string(req["params"]) != `{"maxTokens":5}` || string(req["id"]) == "0" {
		t.Fatalf("request to the host: %v", req)
	}
	answer := []byte(`{"jsonrpc":"2.0","id":` + string(req["id"]) + `,"result":{"model":"m","role":"assistant","content":{"type":"text","text":"hi"}}}`)
	if !p.host.answered(req["id"], answer) {
		t.Fatal("the host's answer was not taken")
	}
	a := waitAnswer(t, ch)
	if a.err != nil || string(a.result) != `{"model":"m","role":"assistant","content":{"type":"text","text":"hi"}}` {
		t.Fatalf("answer to the server: %s %v", a.result, a.err)
	}
	waitPending(t, p, 0)
	if !p.host.answered(req["id"], answer) {
		t.Error("a late answer to the proxy's id was handed to mcp-go, which would answer it as a request")
	}
	if p.host.answered(json.RawMessage(`"host-own-1"`), answer) {
		t.Error("an answer to an id not the proxy's was kept from mcp-go")
	}
}

// A host's error answer reaches the server as an error, data and all; a
// null result is not an answer.
func TestServerRequestHostErrors(t *testing.T) {
	p, host := upstreamProxy(t, mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}})
	p.host.markReady()
	for _, c := range []struct {
		answer string
		code   int
		data   string
	}{
		{`"error":{"code":-1,"message":"user declined","data":{"why":"busy"}}`, -1, `{"why":"busy"}`},
		{`"result":null`, mcp.INTERNAL_ERROR, ""},
	} {
		ch := ask(p, context.Background(), mcpclient.ServerRequest{Session: 1, ID: "3", Method: "elicitation/create"})
		req := readLine(t, host)
		p.host.answered(req["id"], []byte(`{"jsonrpc":"2.0","id":`+string(req["id"])+`,`+c.answer+`}`))
		a := waitAnswer(t, ch)
		if a.err == nil || a.err.Code != c.code || string(a.err.Data) != c.data || a.result != nil {
			t.Errorf("host answer %s reached the server as %s %+v", c.answer, a.result, a.err)
		}
	}
}

func waitPending(t *testing.T, p *Proxy, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.host.mu.Lock()
		got := len(p.host.wait)
		p.host.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests pending, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// The server's cancel of its request goes up under the proxy's id and ends
// the wait; a cancel naming another request is not passed up.
func TestServerCancelGoesUpUnderTheProxysID(t *testing.T) {
	p, host := upstreamProxy(t, mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}})
	p.host.markReady()
	ch := ask(p, context.Background(), mcpclient.ServerRequest{Session: 2, ID: "7", Method: "elicitation/create", Params: json.RawMessage(`{}`)})
	req := readLine(t, host)
	p.host.serverCancelled(1, json.RawMessage(`{"requestId":7}`)) // another session's request 7
	p.host.serverCancelled(2, json.RawMessage(`{"requestId":8}`)) // not asked
	p.host.serverCancelled(2, json.RawMessage(`{"requestId":7,"reason":"timed out"}`))
	cancel := readLine(t, host)
	var params struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason"`
	}
	_ = json.Unmarshal(cancel["params"], &params)
	if string(cancel["method"]) != `"notifications/cancelled"` || string(params.RequestID) != string(req["id"]) || params.Reason != "timed out" {
		t.Fatalf("cancel to the host: %v (params %s)", cancel, cancel["params"])
	}
	if a := waitAnswer(t, ch); a.err == nil {
		t.Fatalf("a cancelled request was answered %s", a.result)
	}
}

// A request the host did not declare it answers is refused without asking
// it; one whose session ends while the host thinks is cancelled up.
func TestServerRequestRefusedOrCancelledWithItsSession(t *testing.T) {
	p, host := upstreamProxy(t, mcp.ClientCapabilities{Roots: &struct {
		ListChanged bool `json:"listChanged,omitempty"`
	}{}})
	p.host.markReady()
	res, err := p.serverRequest(context.Background(), mcpclient.ServerRequest{Session: 1, ID: "1", Method: "sampling/createMessage"})
	if err == nil || err.Code != mcp.METHOD_NOT_FOUND {
		t.Fatalf("sampling from a host that cannot: %s %v", res, err)
	}
	ctx, endSession := context.WithCancel(context.Background())
	ch := ask(p, ctx, mcpclient.ServerRequest{Session: 1, ID: "2", Method: "roots/list"})
	req := readLine(t, host)
	if string(req["method"]) != `"roots/list"` {
		t.Fatalf("request to the host: %v", req)
	}
	endSession()
	cancel := readLine(t, host)
	if string(cancel["method"]) != `"notifications/cancelled"` {
		t.Fatalf("after the session ended the host got %v", cancel)
	}
	if a := waitAnswer(t, ch); a.err == nil {
		t.Fatalf("answer after the session ended: %s", a.result)
	}
}

// A wait that mcpclient's bound ends (over HTTP: the ctx's cause says so)
// is cancelled up with that reason, not "session ended"; a plain cancel
// still says the session ended.
func TestServerRequestCancelledUpWithItsCause(t *testing.T) {
	p, host := upstreamProxy(t, mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}})
	p.host.markReady()
	for _, c := range []struct {
		end  func(context.CancelCauseFunc)
		want string
	}{
		{func(cancel context.CancelCauseFunc) { cancel(errors.New("the host did not answer within 1m0s")) }, "the host did not answer within 1m0s"},
		{func(cancel context.CancelCauseFunc) { cancel(nil) }, "the MCP server's session ended"},
	} {
		ctx, cancel := context.WithCancelCause(context.Background())
		ch := ask(p, ctx, mcpclient.ServerRequest{Session: 1, ID: "3", Method: "sampling/createMessage", Params: json.RawMessage(`{}`)})
		readLine(t, host)
		c.end(cancel)
		up := readLine(t, host)
		var params struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(up["params"], &params)
		if string(up["method"]) != `"notifications/cancelled"` || params.Reason != c.want {
			t.Errorf("cancel to the host: %v (params %s), want reason %q", up, up["params"], c.want)
		}
		if a := waitAnswer(t, ch); a.err == nil {
			t.Fatalf("answered %s", a.result)
		}
	}
}

// mcp-go hands the server's request over on a goroutine and its cancel on
// the read loop, so the cancel can come first: the host is then not asked.
// The id is matched as mcp-go writes it, whatever the server's spelling.
func TestServerCancelBeforeItsRequest(t *testing.T) {
	p, host := upstreamProxy(t, mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}})
	p.host.markReady()
	p.host.serverCancelled(1, json.RawMessage(`{"requestId":"a<b"}`))
	// mcpclient's ServerRequest.ID for that id, as encoding/json writes it.
	if a := waitAnswer(t, ask(p, context.Background(), mcpclient.ServerRequest{Session: 1, ID: `"a\u003cb"`, Method: "elicitation/create"})); a.err == nil {
		t.Fatalf("a request cancelled before it came was answered %s", a.result)
	}
	// The next request is the first line the host gets.
	ch := ask(p, context.Background(), mcpclient.ServerRequest{Session: 1, ID: "9", Method: "elicitation/create", Params: json.RawMessage(`{"n":9}`)})
	if req := readLine(t, host); string(req["params"]) != `{"n":9}` {
		t.Fatalf("the host got %v", req)
	}
	p.host.serverCancelled(1, json.RawMessage(`{"requestId":9}`))
	waitAnswer(t, ch)
}

// The host's capabilities are declared at its initialize, even after a ping
// (allowed before initialize), and only once: a second initialize restarts
// nothing.
func TestHostCapabilitiesDeclaredOnceAtInitialize(t *testing.T) {
	everything := npmfixture.Bin(t, "mcp-server-everything")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := New(Options{Server: mcpclient.ServerSpec{Command: "node", Args: []string{everything}}})
	p.bg.ctx = ctx
	defer p.bg.Wait()
	defer p.client.Close()
	if err := p.client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	initialize := []byte(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{}},"clientInfo":{"name":"h","version":"1"}}}`)
	for i, line := range [][]byte{[]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), initialize, initialize} {
		if !p.route(ctx, line) {
			t.Fatalf("line %d was not passed on to mcp-go", i)
		}
	}
	if n := p.client.Session(); n != 2 {
		t.Fatalf("session %d after a ping and two initializes, want 2 (one restart)", n)
	}
	if caps := p.host.caps.Load(); caps == nil || caps.Roots == nil {
		t.Fatalf("host capabilities %+v", caps)
	}
}
