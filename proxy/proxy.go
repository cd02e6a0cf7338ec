// Package proxy puts the guard between an MCP host that cannot be changed
// (Claude Desktop, Cursor, VS Code, an agent framework) and the MCP server
// it was configured to run. It is an MCP server on its own stdin/stdout
// whose tools are the downstream server's tools, schemas and annotations
// included; every tools/call goes through guard.Call and so is journaled
// like any other call, and a write whose outcome is unknown is answered
// with words the model can act on (SPEC §5a) instead of an error it would
// retry.
//
// What is not a tool call (resources, prompts, completions, logging, and
// the server's notifications) is relayed as it is, in both directions,
// without touching the journal.
package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// DefaultTimeout is the proxy's write timeout: hosts give up on their own
// at about 40-60 s, and the proxy must answer first.
const DefaultTimeout = 50 * time.Second

// Options configure a Proxy.
type Options struct {
	Server mcpclient.ServerSpec
	// Identity is how the server was reached, stored with every call (SPEC
	// §9); zero when the caller knows none.
	Identity guard.ServerIdentity
	Journal  *pending.Journal
	Policy   *guard.Policy // nil: annotations decide, writes by default
	// Timeout is the write timeout (--timeout): it overrides the policy's
	// per-tool timeouts. Zero: the policy's write_timeout, else
	// DefaultTimeout. When the policy sets no max_total, the absolute clock
	// is DefaultMaxTotal, so that progress cannot keep a call open past the
	// host's own deadline.
	Timeout time.Duration
	Version string       // mcp-confirm's version, for clientInfo
	Logger  *slog.Logger // the proxy's log (stderr or --log); never stdout
	// ServerStderr receives the downstream server's stderr; it must not
	// block. Nil: only its last lines are kept, for error messages.
	ServerStderr io.Writer
	Keys         guard.KeySource // nil: ULIDs
}

// Proxy is one upstream connection in front of one downstream server.
//
// Its state is in four parts, each with its own lock and invariant: host
// (the server's requests to the host), calls (the host's requests the
// proxy answers), tools (what the host is offered) and bg (goroutines of
// its own). Lock order: hostLink.mu and toolSet.mu are each taken before
// lineWriter.mu (a message to the host is written under them); never the
// reverse, and never one under the other. inflight.mu and group.mu are
// innermost: nothing is locked under them.
type Proxy struct {
	opts   Options
	log    *slog.Logger
	client *mcpclient.Client
	guard  *guard.Guard
	out    *lineWriter // the host's stdout; set by Run

	host  *hostLink // the host as the client the server asks things of
	calls *inflight // the host's requests the proxy answers itself
	tools toolSet   // the downstream's tools, as offered to the host
	bg    group     // background work: tool listings, watchServer
}

// New prepares a proxy; nothing runs until Run.
func New(opts Options) *Proxy {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{opts: opts, log: log, calls: newInflight()}
	p.host = newHostLink(p.write)
	policy := proxyPolicy(opts.Policy, opts.Timeout)
	var gd *guard.Guard
	p.client = mcpclient.New(opts.Server, mcpclient.Options{
		ClientVersion: opts.Version,
		ListTimeout:   policy.Defaults.ListTimeout.Duration,
		OnLateResult: func(lr mcpclient.LateResult) {
			log.Info("late answer from the MCP server", "tool", lr.Tool, "key", lr.Key, "session", lr.Session, "after_cancel", lr.AfterCancel)
			gd.HandleLateResult(lr)
		},
		OnSession:       p.onSession,
		OnNotification:  p.fromDownstream,
		OnServerRequest: p.serverRequest,
		Stderr:          opts.ServerStderr,
		Logger:          log,
	})
	gd = guard.New(opts.Journal, p.client, guard.Options{
		Policy: policy, ServerAlias: opts.Server.Name, Server: opts.Identity, WriteTimeout: opts.Timeout, Keys: opts.Keys, Logger: log,
		// A read with its retries answers within the write's absolute clock,
		// under the hosts' own limit, as a write does.
		ReadBudget: policy.Defaults.MaxTotal.Duration,
	})
	p.guard = gd
	return p
}

// DefaultMaxTotal caps a write that keeps sending progress: still under the
// hosts' own limit of about 60 s, which progress does not reset by default.
const DefaultMaxTotal = 55 * time.Second

// proxyPolicy applies the proxy's clocks to a copy of the policy: the write
// timeout defaults to DefaultTimeout and the absolute clock to
// DefaultMaxTotal, where the policy says nothing.
func proxyPolicy(in *guard.Policy, timeout time.Duration) *guard.Policy {
	p := &guard.Policy{}
	if in != nil {
		cp := *in
		p = &cp
	}
	if timeout == 0 && p.Defaults.WriteTimeout.Duration == 0 {
		p.Defaults.WriteTimeout.Duration = DefaultTimeout
	}
	if p.Defaults.MaxTotal.Duration == 0 {
		p.Defaults.MaxTotal.Duration = max(DefaultMaxTotal, timeout, p.Defaults.WriteTimeout.Duration)
	}
	return p
}

// Run serves the upstream host on in/out until in ends or ctx is
// cancelled. The downstream server is started when the host's first line
// comes (or in ends first, so that a server that cannot start is still
// reported), with the host's capabilities when that line is its
// initialize; its tools are listed before the line is answered. Only MCP
// messages are written to out. Calls still running when in ends are
// cancelled, and become unknown in the journal (a cancel is not proof that
// nothing happened).
func (p *Proxy) Run(ctx context.Context, in io.Reader, out io.Writer) error {
	defer p.client.Close()
	defer p.bg.Wait() // after cancel, which ends them
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.bg.ctx = ctx
	p.out = &lineWriter{w: out}

	pr, pw := io.Pipe()
	st := &startup{done: make(chan struct{})}
	start := func(first []byte) bool {
		st.begun.Store(true)
		defer close(st.done)
		srv, err := p.start(ctx, first)
		if err != nil {
			st.err = err
			p.refuseFirst(first, err)
			return false
		}
		stdio := server.NewStdioServer(srv)
		stdio.SetErrorLogger(log.New(slogWriter{p.log}, "", 0))
		st.listenDone = make(chan error, 1)
		go func() { st.listenDone <- stdio.Listen(ctx, pr, p.out) }()
		return true
	}

	// The host's stdin cannot be interrupted; when ctx ends first, the
	// reader is left to end with the process.
	readDone := make(chan error, 1)
	go func() { readDone <- p.readUpstream(ctx, in, pw, start) }()
	var readErr error
	select {
	case readErr = <-readDone:
	case <-ctx.Done():
	}
	_ = pw.Close()
	p.calls.cancelAll()
	if !st.begun.Load() {
		return nil // ctx ended before the host wrote a line
	}
	<-st.done // a start under way ends with ctx
	if st.err != nil {
		return st.err
	}
	err := <-st.listenDone
	p.calls.wait() // after cancelAll, so no request can follow
	if readErr != nil && !errors.Is(readErr, io.EOF) {
		return fmt.Errorf("read from the host: %w", readErr)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// startup is Run's start of the downstream server, done once by the
// goroutine that reads the host.
type startup struct {
	begun      atomic.Bool
	done       chan struct{} // closed when the start ended; then err and listenDone are set
	err        error
	listenDone chan error // mcp-go's server's end; nil unless the start succeeded
}

// start starts the downstream server, declaring the host's capabilities
// when first is its initialize, and makes the upstream server in its image
// with its tools.
func (p *Proxy) start(ctx context.Context, first []byte) (*server.MCPServer, error) {
	p.declareFirst(first)
	if err := p.client.Start(ctx); err != nil {
		return nil, err
	}
	info := p.client.ServerInfo()
	p.log.Info("MCP server started", "server", info.Name, "version", info.Version, "protocol", info.Protocol)

	opts := p.serverOptions()
	if info.Title != "" {
		opts = append(opts, server.WithTitle(info.Title))
	}
	if info.Instructions != "" {
		opts = append(opts, server.WithInstructions(info.Instructions))
	}
	srv := server.NewMCPServer(info.Name, info.Version, opts...)
	p.tools.srv.Store(srv)
	if err := p.listToolsBeforeAnswering(ctx); err != nil {
		return nil, err
	}
	p.bg.Go(p.watchServer)
	return srv, nil
}

// refuseFirst answers the host's first request when the server could not
// be started, so that the host shows why rather than wait.
func (p *Proxy) refuseFirst(first []byte, err error) {
	var m message
	if json.Unmarshal(first, &m) != nil || m.Method == "" || len(m.ID) == 0 || string(m.ID) == "null" {
		return
	}
	p.write(response{JSONRPC: mcp.JSONRPC_VERSION, ID: m.ID, Error: &mcpclient.RPCError{
		Code: mcp.INTERNAL_ERROR, Message: "mcp-confirm proxy: the MCP server did not start: " + err.Error()}})
}

// serverOptions mirror the downstream's capabilities, so the host sees the
// same server it was configured with.
func (p *Proxy) serverOptions() []server.ServerOption {
	caps := p.client.Capabilities()
	opts := []server.ServerOption{
		server.WithToolCapabilities(true),
		server.WithRecovery(),
		server.WithHooks(p.hooks()),
	}
	if r := caps.Resources; r != nil {
		opts = append(opts, server.WithResourceCapabilities(r.Subscribe, r.ListChanged))
	}
	if pr := caps.Prompts; pr != nil {
		opts = append(opts, server.WithPromptCapabilities(pr.ListChanged))
	}
	if caps.Logging != nil {
		opts = append(opts, server.WithLogging())
	}
	if caps.Completions != nil {
		opts = append(opts, server.WithCompletions())
	}
	return opts
}

func (p *Proxy) hooks() *server.Hooks {
	h := &server.Hooks{}
	h.AddAfterInitialize(func(ctx context.Context, id any, req *mcp.InitializeRequest, res *mcp.InitializeResult) {
		p.log.Info("host connected", "client", req.Params.ClientInfo.Name, "client_version", req.Params.ClientInfo.Version,
			"protocol", res.ProtocolVersion)
	})
	return h
}

func (p *Proxy) onSession(n int) {
	if n > 1 && !p.host.declaring.Load() {
		p.log.Warn("restarted the MCP server", "session", n)
		// Its tools may have changed; listing them is not this call's job.
		p.bg.Go(func(ctx context.Context) {
			if err := p.refreshTools(ctx); err != nil {
				p.log.Warn("list tools after restart", "err", err)
			}
		})
	}
}

// watchServer says on the log when the server process goes away, even
// between calls; the next call starts it again.
func (p *Proxy) watchServer(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	last := p.client.State()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st := p.client.State()
		if st == last {
			continue
		}
		if st == mcpclient.StateExited {
			attrs := []any{"session", p.client.Session()}
			if lines := p.client.Stderr(); len(lines) > 0 {
				attrs = append(attrs, "last_stderr", lines[len(lines)-1])
			}
			p.log.Warn("the MCP server exited; calls in flight are answered unknown, and the next call starts it again", attrs...)
		}
		last = st
	}
}

// lineWriter serialises whole messages onto the host's stdout: mcp-go's
// responses and the proxy's own relayed ones.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// writeMessage writes one JSON-RPC message and a newline in one Write.
func (l *lineWriter) writeMessage(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = l.Write(append(b, '\n'))
	return err
}

// slogWriter turns mcp-go's log.Logger lines into the proxy's log.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(b []byte) (int, error) {
	msg := string(b)
	for len(msg) > 0 && msg[len(msg)-1] == '\n' {
		msg = msg[:len(msg)-1]
	}
	w.l.Warn("mcp-go: " + msg)
	return len(b), nil
}

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
	// Run the handler now, on this thread, rather than leave it for another
	// to be woken and steal it while this goroutine blocks reading the host:
	// that wake-up was on the critical path of every call (measured with
	// BenchmarkReadThroughProxy, proxy/relay 0.80 -> 0.86 on 2 cores).
	runtime.Gosched()
	return false
}

func (p *Proxy) notifyDown(ctx context.Context, method string, params json.RawMessage) {
	if err := p.client.Notify(ctx, method, params); err != nil {
		p.log.Warn("forward notification to the MCP server", "method", method, "err", err)
	}
}

// relay sends one request to the downstream server and writes its answer,
// with the host's own id, as the server wrote it.
func (p *Proxy) relay(ctx context.Context, m message) {
	res, err := p.client.Request(ctx, m.Method, m.Params)
	if err != nil && ctx.Err() != nil {
		// Cancelled by the host (or the proxy is stopping): no answer.
		return
	}
	var rpcErr *mcpclient.RPCError
	switch {
	case err == nil:
		if modernRequest(m.Params) {
			res = withResultType(res)
		}
		p.writeResult(m.ID, res)
	case errors.As(err, &rpcErr):
		p.write(response{JSONRPC: mcp.JSONRPC_VERSION, ID: m.ID, Error: rpcErr})
	default:
		p.log.Warn("relay to the MCP server failed", "method", m.Method, "err", err)
		p.write(response{JSONRPC: mcp.JSONRPC_VERSION, ID: m.ID, Error: &mcpclient.RPCError{
			Code: mcp.INTERNAL_ERROR, Message: "mcp-confirm proxy: the MCP server gave no answer: " + err.Error(),
		}})
	}
}

type response struct {
	JSONRPC string              `json:"jsonrpc"`
	ID      json.RawMessage     `json:"id"`
	Result  json.RawMessage     `json:"result,omitempty"`
	Error   *mcpclient.RPCError `json:"error,omitempty"`
}

func (p *Proxy) write(v any) {
	if err := p.out.writeMessage(v); err != nil {
		p.log.Warn("write to the host", "err", err)
	}
}

// writeResult answers a request with a result as the server wrote it,
// without re-encoding it.
func (p *Proxy) writeResult(id, result json.RawMessage) {
	if bytes.ContainsAny(result, "\r\n") || !json.Valid(id) {
		p.write(response{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Result: result})
		return
	}
	b := make([]byte, 0, len(result)+len(id)+40)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	b = append(b, "}\n"...)
	if _, err := p.out.Write(b); err != nil {
		p.log.Warn("write to the host", "err", err)
	}
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

// modernRequest: the host speaks 2026-07-28 or later on this request (it
// names its protocol version in _meta, which legacy hosts never do).
func modernRequest(params json.RawMessage) bool {
	if !bytes.Contains(params, []byte(mcp.MetaKeyProtocolVersion)) {
		return false
	}
	var pm struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &pm) != nil {
		return false
	}
	var v string
	_ = json.Unmarshal(pm.Meta[mcp.MetaKeyProtocolVersion], &v)
	return mcp.IsModernProtocol(v)
}

// withResultType adds resultType "complete" to a legacy server's result for
// a 2026-07-28 host (legacy servers never set it). The member is spliced in
// before the closing brace, so the rest stays byte for byte as the server
// wrote it.
func withResultType(res json.RawMessage) json.RawMessage {
	hasName, escaped := bytes.Contains(res, []byte(`"resultType"`)), bytes.Contains(res, []byte(`\u`))
	if hasName && !escaped {
		return res // a modern server's (or a nested field of that name: left alone)
	}
	if escaped {
		// A name could be spelled with escapes: decode to know.
		var obj map[string]json.RawMessage
		if json.Unmarshal(res, &obj) != nil {
			return res
		}
		if _, ok := obj["resultType"]; ok {
			return res
		}
	}
	// res is one JSON value: validated on the way in, or made by the proxy.
	t := bytes.TrimSpace(res)
	if len(t) < 2 || t[0] != '{' || t[len(t)-1] != '}' {
		return res
	}
	member := `"resultType":"complete"`
	if len(bytes.TrimSpace(t[1:len(t)-1])) > 0 {
		member = "," + member
	}
	b := make([]byte, 0, len(t)+len(member))
	b = append(b, t[:len(t)-1]...)
	b = append(b, member...)
	return append(b, '}')
}

// fromDownstream receives the server's notifications on the session's read
// loop: it must not block for long. A tools/list_changed re-registers the
// tools (mcp-go then tells the host); a cancel of the server's own request
// goes up under the proxy's id for it, or not at all (serverCancelled);
// everything else goes up as it is.
func (p *Proxy) fromDownstream(session int, method string, params json.RawMessage) {
	if method == string(mcp.MethodNotificationCancelled) {
		p.host.serverCancelled(session, params)
		return
	}
	if method == string(mcp.MethodNotificationToolsListChanged) {
		p.bg.Go(func(ctx context.Context) {
			if err := p.refreshTools(ctx); err != nil {
				p.log.Warn("list tools after tools/list_changed", "err", err)
			}
		})
		return
	}
	if !p.host.isReady() {
		p.log.Debug("notification from the MCP server before the host was ready: dropped", "method", method)
		return
	}
	p.write(notification{JSONRPC: mcp.JSONRPC_VERSION, Method: method, Params: params})
}

type notification struct {
	JSONRPC string          `json:"jsonrpc"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}
