package mcpclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Options configure a Client. Zero values take the defaults noted.
type Options struct {
	ClientName    string // clientInfo.name; default "mcp-confirm"
	ClientVersion string // default "dev"

	// ProbeTimeout bounds the server/discover probe that mcp-go sends first;
	// a legacy server that ignores unknown methods would otherwise stall the
	// handshake. Default 2s.
	ProbeTimeout time.Duration
	// StartTimeout bounds one whole handshake (probe included). Default 30s.
	StartTimeout time.Duration
	// ListTimeout bounds each tools/list page the client asks for itself
	// (Tools, and Request for tools/list). Default 30s. On expiry the error
	// is a *ListTimeoutError.
	ListTimeout time.Duration
	// StopGrace is how long Close (and a lost session) waits after closing
	// stdin before SIGTERM, and after SIGTERM before SIGKILL. Default 2s.
	StopGrace time.Duration

	// OnLateResult receives answers to calls that had already ended as
	// unknown. It runs on a goroutine of the session, one result at a time.
	OnLateResult func(LateResult)
	// OnSession is called with the session number each time a session has
	// completed its handshake (1 for the first, n+1 after each restart).
	OnSession func(n int)
	// OnNotification receives the server's notifications (raw params), all
	// but progress for this client's own calls. It runs on the session's
	// read loop and must not block.
	OnNotification func(session int, method string, params json.RawMessage)
	// OnServerRequest answers the server's sampling/createMessage,
	// elicitation/create and roots/list (which it sends only once
	// DeclareCapabilities has declared them). Each runs on a goroutine of its
	// own; ctx ends when the session does, or over HTTP when
	// ServerRequestTimeout passes (its cause then says so). Nil: mcp-go
	// refuses them.
	OnServerRequest func(ctx context.Context, r ServerRequest) (json.RawMessage, *RPCError)
	// ServerRequestTimeout bounds, over HTTP (Remote), the wait for
	// OnServerRequest's answer to one of the server's requests: when it
	// passes, ctx ends and the server is answered a JSON-RPC error saying
	// so. Default 60s (the TypeScript SDK's own request timeout: most
	// servers give up then anyway). Over stdio the server's own timeout
	// and its notifications/cancelled bound the wait.
	ServerRequestTimeout time.Duration

	// OAuth is where logins are kept (mcp-confirm login): a Remote whose
	// URL has one sends its token, refreshed when it expires, unless its
	// headers carry an Authorization of their own. Nil: none are used.
	OAuth *Logins

	StderrLines int       // stderr lines kept for error messages; default 20
	Stderr      io.Writer // if set, receives the server's whole stderr; must not block
	Logger      *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.ClientName == "" {
		o.ClientName = "mcp-confirm"
	}
	if o.ClientVersion == "" {
		o.ClientVersion = "dev"
	}
	if o.ProbeTimeout == 0 {
		o.ProbeTimeout = 2 * time.Second
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 30 * time.Second
	}
	if o.ListTimeout == 0 {
		o.ListTimeout = 30 * time.Second
	}
	if o.ServerRequestTimeout == 0 {
		o.ServerRequestTimeout = 60 * time.Second
	}
	if o.StopGrace == 0 {
		o.StopGrace = 2 * time.Second
	}
	if o.StderrLines == 0 {
		o.StderrLines = 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Client owns one MCP server: at most one live process (session) at a time,
// restarted lazily by the next Call or Tools after it dies. Safe for
// concurrent use.
type Client struct {
	spec  ServerSpec
	opts  Options
	label string // for error messages

	tokenPrefix string
	tokenSeq    atomic.Uint64

	// startSem is a lock held across a whole session start (spawn and
	// handshake), so that one start runs at a time; it is taken before mu
	// (lock order: see tap).
	startSem chan struct{}

	mu       sync.Mutex // guards following
	cur      *session
	n        int  // number of the last session that completed its handshake
	starting bool // a session is being spawned
	everRan  bool
	tried    bool // a start was attempted
	closed   bool
	sessions map[*session]struct{} // not yet reaped
	declared *declaration          // nil: declare nothing (DeclareCapabilities)
}

// New returns a client for spec; nothing runs until Start, Call or Tools.
func New(spec ServerSpec, opts Options) *Client {
	var b [6]byte
	_, _ = rand.Read(b[:])
	label := spec.Name
	if label == "" {
		label = strings.Join(append([]string{spec.Command}, spec.Args...), " ")
	}
	return &Client{
		spec:        spec,
		opts:        opts.withDefaults(),
		label:       fmt.Sprintf("%q", label),
		tokenPrefix: "mcp-confirm-" + hex.EncodeToString(b[:]) + "-",
		startSem:    make(chan struct{}, 1),
		sessions:    map[*session]struct{}{},
	}
}

// Start spawns session 1 and completes the handshake. A start error is a
// *StartError with the server's last stderr lines.
func (c *Client) Start(ctx context.Context) error {
	_, err := c.session(ctx)
	return err
}

// session returns the live session, starting a new one if there is none.
func (c *Client) session(ctx context.Context) (*session, error) {
	if s, err := c.live(); s != nil || err != nil {
		return s, err
	}
	select {
	case c.startSem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("start MCP server %s: %w", c.label, ctx.Err())
	}
	defer func() { <-c.startSem }()
	if s, err := c.live(); s != nil || err != nil {
		return s, err
	}

	c.mu.Lock()
	n := c.n + 1
	c.starting, c.tried = true, true
	decl := c.declared
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.starting = false
		c.mu.Unlock()
	}()

	c.opts.Logger.Debug("starting mcp server", "session", n, "command", c.spec.Command)
	s, err := spawn(c.spec, n, c.tokenPrefix, &c.opts, decl)
	if err != nil {
		return nil, &StartError{Server: c.label, Session: n, Err: err}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		s.requestStop()
		<-s.done
		return nil, ErrClosed
	}
	c.sessions[s] = struct{}{}
	c.mu.Unlock()
	go func() {
		<-s.done
		c.mu.Lock()
		delete(c.sessions, s)
		c.mu.Unlock()
	}()

	if err := s.handshake(ctx); err != nil {
		s.requestStop()
		<-s.done
		if c.isClosed() {
			return nil, ErrClosed
		}
		switch {
		case errors.Is(err, transport.ErrTransportClosed), !s.alive() && ctx.Err() == nil:
			err = fmt.Errorf("the connection closed during the handshake: %w", err)
		case errors.Is(err, context.DeadlineExceeded):
			err = fmt.Errorf("no answer to the handshake in time (start timeout %s): %w", c.opts.StartTimeout, err)
		default:
			err = fmt.Errorf("handshake: %w", err)
		}
		return nil, s.startError(c.label, err)
	}
	c.mu.Lock()
	c.cur, c.n, c.everRan = s, n, true
	c.mu.Unlock()
	c.opts.Logger.Info("mcp session started", "session", n, "server", s.info.Name,
		"version", s.info.Version, "protocol", s.info.Protocol)
	if c.opts.OnSession != nil {
		c.opts.OnSession(n)
	}
	return s, nil
}

func (c *Client) live() (*session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.cur != nil && c.cur.alive() {
		return c.cur, nil
	}
	return nil, nil
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Close stops the server: stdin closed, then SIGTERM, then SIGKILL, each
// after StopGrace; the process is always reaped. Calls still running end as
// unknown (connection lost). Close waits for OnLateResult to return.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	sessions := make([]*session, 0, len(c.sessions))
	for s := range c.sessions {
		sessions = append(sessions, s)
	}
	c.mu.Unlock()
	for _, s := range sessions {
		s.requestStop()
	}
	for _, s := range sessions {
		<-s.done
	}
	// A start racing with Close sees closed and reaps its own process; wait
	// for it so nothing outlives Close.
	c.startSem <- struct{}{}
	<-c.startSem
	return nil
}

// ServerInfo is what the server of the current (or last) session declared.
func (c *Client) ServerInfo() ServerInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		return ServerInfo{}
	}
	return c.cur.info
}

// Session is the number of the current (or last) session; 0 before the first
// handshake completes.
func (c *Client) Session() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// State reports the life of the server process.
func (c *Client) State() SessionState {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return StateClosed
	case c.starting && c.everRan:
		return StateRestarting
	case c.starting:
		return StateStarting
	case c.cur != nil && c.cur.alive():
		return StateRunning
	case c.tried:
		return StateExited
	}
	return StateNew
}

// Stderr returns the last stderr lines of the current (or last) session.
func (c *Client) Stderr() []string {
	c.mu.Lock()
	s := c.cur
	c.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.tail.Lines()
}

// Tools lists the server's tools (all pages), with annotations and input
// schemas as the server sent them. It starts a session if none is running.
func (c *Client) Tools(ctx context.Context) ([]mcp.Tool, error) {
	s, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeoutCause(ctx, c.opts.ListTimeout, errListClock)
	res, err := s.mc.ListTools(lctx, mcp.ListToolsRequest{})
	expired := context.Cause(lctx) == errListClock
	cancel()
	if err != nil {
		if expired {
			return nil, &ListTimeoutError{Within: c.opts.ListTimeout}
		}
		if !s.alive() {
			return nil, fmt.Errorf("list tools: %w", s.lostError())
		}
		return nil, fmt.Errorf("list tools (session %d): %w", s.n, err)
	}
	return res.Tools, nil
}

func (c *Client) newToken() string {
	return string(strconv.AppendUint([]byte(c.tokenPrefix), uint64(c.tokenSeq.Add(1)), 10))
}

// errorsIsAny reports whether err is any of targets.
func errorsIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// errListClock is the cause of a tools/list context ended by ListTimeout.
var errListClock = errors.New("list clock")

// ListTimeoutError: the server did not answer tools/list within
// ListTimeout. tools/list is not a write: nothing was sent that matters.
type ListTimeoutError struct{ Within time.Duration }

func (e *ListTimeoutError) Error() string {
	return fmt.Sprintf("the server did not list its tools within %s; nothing was sent", e.Within)
}

// Is makes errors.Is(err, ErrListTimeout) true.
func (e *ListTimeoutError) Is(target error) bool { return target == ErrListTimeout }
