package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"runtime"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// The host's side: each line the host writes is read here and routed to
// the proxy's own handlers (tools/call, relayed requests, cancels, answers
// to the server's requests) or to mcp-go's server (the rest).

// readUpstream reads the host's messages: requests and notifications that
// are relayed go to the downstream server; the rest (handshake, ping,
// tools/list, tools/call, cancellations) go to mcp-go's server through w.
// The first line, or the end of in before one, is first given to start,
// which starts the server; when it fails, nothing more is read.
func (p *Proxy) readUpstream(ctx context.Context, in io.Reader, w io.Writer, start func(first []byte) bool) error {
	r := bufio.NewReaderSize(in, 64<<10)
	started := false
	for {
		line, err := r.ReadBytes('\n')
		if !started {
			started = true
			if !start(line) {
				return nil // Run reports why
			}
		}
		if len(line) > 0 {
			if p.route(ctx, line) {
				if len(line) == 0 || line[len(line)-1] != '\n' {
					line = append(line, '\n')
				}
				if _, werr := w.Write(line); werr != nil {
					return werr
				}
			}
		}
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// message is the envelope of one upstream line.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	// toolCall is Params already decoded, for a tools/call read in one
	// pass (decodeToolCall); nil otherwise.
	toolCall *toolCallParams
}

// relayed are the methods answered by the downstream server as they are.
var relayed = map[string]bool{
	string(mcp.MethodResourcesList):                true,
	string(mcp.MethodResourcesTemplatesList):       true,
	string(mcp.MethodResourcesRead):                true,
	string(mcp.MethodResourcesSubscribe):           true,
	string(mcp.MethodResourcesUnsubscribe):         true,
	string(mcp.MethodPromptsList):                  true,
	string(mcp.MethodPromptsGet):                   true,
	string(mcp.MethodCompletionComplete):           true,
	string(mcp.MethodSetLogLevel):                  true,
	string(mcp.MethodNotificationRootsListChanged): true,
}

// route handles one upstream line itself, or returns true to pass it to
// mcp-go's server (handshake, ping, tools/list, anything unknown).
//
// Two fast paths: decodeToolCall reads a tools/call line, with
// json.Unmarshal as its fallback (envelope.go says what keeps them equal);
// and once a request's handler is handed to a worker, runtime.Gosched lets
// it run now, on this thread, rather than leave it for another thread to
// be woken and steal it while this goroutine blocks reading the host: that
// wake-up was on the critical path of every call. Without the Gosched (the
// fallback) the handler runs all the same, when the scheduler gets to it:
// the yield changes which goroutine runs first, never what runs, so no
// test can tell the two apart, and none tries: with it or without, the
// handler may run before or after route returns, and the tests hold for
// both. Whether it still pays is BenchmarkReadThroughProxy's to show
// (proxy/relay-throughput).
func (p *Proxy) route(ctx context.Context, line []byte) bool {
	m, ok := decodeToolCall(line)
	if !ok && json.Unmarshal(line, &m) != nil {
		return true // garbage: mcp-go answers it
	}
	hasID := len(m.ID) > 0 && string(m.ID) != "null"
	switch {
	case m.Method == "":
		// A response: to a server's request the host was asked, or to
		// mcp-go's server.
		return !hasID || !p.host.answered(m.ID, line)
	case m.Method == string(mcp.MethodInitialize) && hasID:
		p.declareHost(ctx, m.Params)
		return true
	case m.Method == string(mcp.MethodServerDiscover) && hasID && !mcp.IsModernProtocol(p.client.ServerInfo().Protocol):
		// In front of a legacy server the host gets the legacy protocol, as
		// it would from the server itself: a 2026-07-28 host then falls back
		// to initialize, whose capabilities the server can be shown
		// (declareHost), and spends on each call what it would directly.
		p.write(response{JSONRPC: mcp.JSONRPC_VERSION, ID: m.ID, Error: &mcpclient.RPCError{
			Code: mcp.METHOD_NOT_FOUND, Message: "Method not found"}})
		return false
	case m.Method == string(mcp.MethodNotificationCancelled):
		p.cancelRequest(m.Params)
		return false
	case m.Method == "notifications/initialized":
		p.host.markReady()
		return true
	case !hasID:
		if relayed[m.Method] {
			p.notifyDown(ctx, m.Method, m.Params)
			return false
		}
		return true
	}
	// 2026-07-28 has no initialize: the first other request means the host
	// is ready for notifications.
	p.host.markReady()
	var handle func(context.Context, message)
	switch {
	case m.Method == string(mcp.MethodToolsCall):
		// Answered here rather than by an mcp-go tool handler: the
		// server's result goes back byte for byte, its JSON-RPC errors
		// keep their codes, and a read costs one hop less.
		handle = p.toolCall
	case relayed[m.Method]:
		handle = p.relay
	default:
		return true
	}
	if !p.calls.start(ctx, m.ID, func(ctx context.Context) { handle(ctx, m) }) {
		return false // shutting down: the host is gone
	}
	runtime.Gosched() // let the handler run now (see above)
	return false
}

// cancelRequest ends the request a host's notifications/cancelled names.
func (p *Proxy) cancelRequest(params json.RawMessage) {
	var c struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason"`
	}
	if json.Unmarshal(params, &c) != nil || len(c.RequestID) == 0 {
		return
	}
	if cancel := p.calls.cancelOf(string(c.RequestID)); cancel != nil {
		p.log.Info("the host cancelled a request", "id", string(c.RequestID), "reason", c.Reason)
		cancel()
	}
}
