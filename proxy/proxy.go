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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/notify"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// DefaultTimeout is the proxy's write timeout for a host it does not know
// (hosts.go fits it to those it does): most give up on their own at 60 s,
// and the proxy must answer first.
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
	// per-tool timeouts. Zero: the policy's write_timeout, else the clock
	// fitted to the host (hosts.go). When the policy sets no max_total, the
	// absolute clock is fitted to the host too, so that progress cannot
	// keep a call open past the host's own deadline.
	Timeout time.Duration
	// HostTimeout is the host's own deadline for a tools/call
	// (--host-timeout), when the table of known hosts is wrong for it or
	// does not know it; zero: the policy's host_timeout, else the table.
	HostTimeout time.Duration
	// Version is mcp-confirm's version, for clientInfo, and for the
	// description in the serverInfo the host is given (whose name, version
	// and title stay the server's own: calls are remembered by its name).
	Version string
	Logger  *slog.Logger // the proxy's log (stderr or --log); never stdout
	// ServerStderr receives the downstream server's stderr; it must not
	// block. Nil: only its last lines are kept, for error messages.
	ServerStderr io.Writer
	Keys         guard.KeySource // nil: ULIDs
	// Observe, when set, is told of every tools/call the guard ran
	// (metrics.Metrics.ObserveCall); it must not block.
	Observe func(guard.Observation)
	// OAuth is where 'mcp-confirm login' keeps its logins: a remote server
	// with one gets its token (mcpclient.Options.OAuth). The proxy cannot
	// open a browser for its host: without a usable login it answers the
	// host's first request with an error naming mcp-confirm login.
	OAuth *mcpclient.Logins
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
	client downstream   // a process over stdio, or a URL
	guard  *guard.Guard // made once, by fitted
	fit    hostFit
	// notifier tells the policy's [notify] of unknown calls, in the
	// background; made with the guard.
	notifier *notify.Notifier
	out      *lineWriter // the host's stdout; set by Run

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
	var listTimeout time.Duration
	if opts.Policy != nil {
		listTimeout = opts.Policy.Defaults.ListTimeout.Duration
	}
	copts := mcpclient.Options{
		ClientVersion: opts.Version,
		ListTimeout:   listTimeout,
		OnLateResult: func(lr mcpclient.LateResult) {
			log.Info("late answer from the MCP server", "tool", lr.Tool, "key", lr.Key, "session", lr.Session, "after_cancel", lr.AfterCancel)
			p.fitted().HandleLateResult(lr)
		},
		OnSession:       p.onSession,
		OnNotification:  p.fromDownstream,
		OnServerRequest: p.serverRequest,
		Stderr:          opts.ServerStderr,
		Logger:          log,
		OAuth:           opts.OAuth,
	}
	if opts.Server.URL == "" {
		p.client = mcpclient.New(opts.Server, copts)
	} else if r, err := mcpclient.NewRemote(opts.Server, copts); err != nil {
		p.client = unusable{err}
	} else {
		p.client = r
	}
	return p
}

// fitHost makes the guard with the clocks fitted to the host named client
// (clientInfo.name), once: the first of the host's naming itself and the
// first call decides, and nothing changes them afterwards.
func (p *Proxy) fitHost(client string) {
	p.fit.once.Do(func() {
		given, from := p.opts.HostTimeout, "--host-timeout"
		if given == 0 && p.opts.Policy != nil {
			given, from = p.opts.Policy.Defaults.HostTimeout.Duration, "the policy's host_timeout"
		}
		hc := clockFor(client, given, from)
		p.fit.clock = hc
		policy := proxyPolicy(p.opts.Policy, p.opts.Timeout, hc)
		p.notifier = notify.New(policy.Notify, p.log)
		var notice func(string, pending.Call)
		if p.notifier.Enabled() {
			notice = p.notifier.Func(p.opts.Journal.Path())
			p.notifier.Recovered(context.Background(), p.opts.Journal, p.opts.Journal.Recovered())
		}
		p.guard = guard.New(p.opts.Journal, p.client, guard.Options{
			Notify: notice, Observe: p.opts.Observe,
			Policy: policy, ServerAlias: p.opts.Server.Name, Server: p.opts.Identity, WriteTimeout: p.opts.Timeout,
			Keys: p.opts.Keys, Logger: p.log,
			// A read with its retries answers within the write's absolute
			// clock, under the host's own limit, as a write does.
			ReadBudget: policy.Defaults.MaxTotal.Duration,
			// The proxy reads a write's state, reason and key only (answer):
			// no read-back of the call it has just recorded.
			RecordedResult: true,
		})
		p.logClock(hc, policy)
	})
}

// ServerName is the name the server declared (serverInfo.name; "" before
// its first session), as the journal records it with each call.
func (p *Proxy) ServerName() string { return p.client.ServerInfo().Name }

// Sessions is how many sessions the proxy has started with its server.
func (p *Proxy) Sessions() int { return p.client.Session() }

// waitNotified gives notifications under way a bounded time to be
// delivered before the proxy exits.
func (p *Proxy) waitNotified() {
	p.fit.once.Do(func() {}) // the guard's making, if any, happened before
	if p.notifier == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	p.notifier.Wait(ctx)
}

// fitted is the guard, made for a host that has not named itself if
// none has yet.
func (p *Proxy) fitted() *guard.Guard {
	p.fitHost("")
	return p.guard
}

// logClock says which host was recognised and which clocks apply; and
// warns when the host would give up first.
func (p *Proxy) logClock(hc hostClock, policy *guard.Policy) {
	write := p.opts.Timeout
	if write == 0 {
		write = policy.Defaults.WriteTimeout.Duration
	}
	total := policy.Defaults.MaxTotal.Duration
	host, deadline := hc.Host, "none"
	if host == "" {
		host = "not recognised"
	}
	if hc.Limit {
		deadline = hc.Deadline.String()
	}
	p.log.Info("write clock", "host", host, "client", hc.Client, "host_deadline", deadline, "set_by", hc.From,
		"write_timeout", write, "max_total", total)
	if hc.Limit && (write >= hc.Deadline || total > hc.Deadline) {
		p.log.Warn("the host gives up before the proxy answers an unknown write: its model sees a bare timeout and may ask again; "+
			"lower --timeout or the policy's write_timeout and max_total, or give the host's deadline with --host-timeout",
			"host_deadline", hc.Deadline, "write_timeout", write, "max_total", total)
	}
}

// DefaultMaxTotal caps a write that keeps sending progress, for a host
// the proxy does not know: still under the usual 60 s, which progress does
// not reset by default.
const DefaultMaxTotal = 55 * time.Second

// proxyPolicy applies the host's clocks to a copy of the policy: the write
// timeout and the absolute clock are hc's where the policy says nothing
// (and the write timeout also where --timeout says nothing).
func proxyPolicy(in *guard.Policy, timeout time.Duration, hc hostClock) *guard.Policy {
	p := &guard.Policy{}
	if in != nil {
		cp := *in
		p = &cp
	}
	if timeout == 0 && p.Defaults.WriteTimeout.Duration == 0 {
		p.Defaults.WriteTimeout.Duration = hc.Write
	}
	if p.Defaults.MaxTotal.Duration == 0 {
		p.Defaults.MaxTotal.Duration = max(hc.Total, timeout, p.Defaults.WriteTimeout.Duration)
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
	p.waitNotified()
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
	if name := clientName(first); name != "" {
		p.fitHost(name)
	}
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
	if p.opts.Version != "" {
		opts = append(opts, server.WithDescription(Description(p.opts.Version)))
	}
	srv := server.NewMCPServer(info.Name, info.Version, opts...)
	p.tools.srv.Store(srv)
	if err := p.listToolsBeforeAnswering(ctx); err != nil {
		return nil, err
	}
	p.bg.Go(p.watchServer)
	return srv, nil
}

// Description is the serverInfo description a host is given: which
// mcp-confirm stands between it and the server.
func Description(version string) string {
	return "through mcp-confirm " + version + ": write calls are journaled and never resent"
}

// refuseFirst answers the host's first request when the server could not
// be started, so that the host shows why rather than wait.
func (p *Proxy) refuseFirst(first []byte, err error) {
	var m message
	if json.Unmarshal(first, &m) != nil || m.Method == "" || len(m.ID) == 0 || string(m.ID) == "null" {
		return
	}
	msg := "mcp-confirm proxy: the MCP server did not start: " + mcpclient.MaskURLsIn(err.Error())
	if errors.Is(err, mcpclient.ErrAuthorization) {
		msg = "mcp-confirm proxy: authorization needed: run 'mcp-confirm login --url " + mcpclient.MaskURL(p.opts.Server.URL) +
			"' in a terminal, then restart this server (" + mcpclient.MaskURLsIn(err.Error()) + ")"
	}
	p.write(response{JSONRPC: mcp.JSONRPC_VERSION, ID: m.ID, Error: &mcpclient.RPCError{
		Code: mcp.INTERNAL_ERROR, Message: msg}})
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
		p.log.Warn(p.newSessionSaid(), "session", n)
		// Its tools may have changed; listing them is not this call's job.
		p.bg.Go(func(ctx context.Context) {
			if err := p.refreshTools(ctx); err != nil {
				p.log.Warn("list tools after restart", "err", err)
			}
		})
	}
}

// newSessionSaid is what the log calls a session after the first. Over
// stdio the server process was started again; a remote server was not
// restarted by anyone: a new HTTP session was opened with it (the old one
// expired with a 404, was lost, or was replaced to declare the host's
// capabilities), and "restarted" would send its operator looking for a
// crash.
func (p *Proxy) newSessionSaid() string {
	if u := p.opts.Server.URL; u != "" {
		return "started a new session with the MCP server at " + mcpclient.MaskURL(u)
	}
	return "restarted the MCP server"
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
