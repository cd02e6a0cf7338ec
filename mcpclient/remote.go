package mcpclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Remote is a client for one MCP server over Streamable HTTP: the same
// promises as Client (an honest Delivery for every call), with the failure
// rules of HTTP (SPEC §9, decideHTTP). mcp-go's transport speaks the
// protocol, in the era the server offers; the tap under it (httpTap) sees
// what left and what came back. Safe for concurrent use.
//
// An answer to a call's request is taken from whichever of its streams it
// comes on (streams.go): the POST's, or one resumed with Last-Event-ID. A
// second answer to it reaches Options.OnLateResult as on stdio
// (LateResult.Second). Not yet: an answer that comes after a call ended
// unknown (the call's streams are closed when it ends).
type Remote struct {
	spec  ServerSpec
	opts  Options
	tap   *httpTap
	httpc *http.Client

	tokenPrefix string
	tokenSeq    atomic.Uint64

	startSem chan struct{} // one connect at a time

	mu       sync.Mutex // guards following
	cur      *remoteSession
	n        int // number of the last session that completed its handshake
	starting bool
	tried    bool
	closed   bool
	progress map[string]func(Progress) // running calls' progress, by token
	calls    int                       // Calls running: DeclareCapabilities replaces only an idle session
	declared *declaration              // what each new session's handshake declares (remote_relay.go); nil: nothing

	lateDone chan struct{} // closed when the late queue's runner has delivered all and returned
}

// remoteSession is one MCP session over HTTP: one initialize (or discover).
type remoteSession struct {
	n    int
	mc   *client.Client
	tr   *transport.StreamableHTTP
	info ServerInfo
	dead atomic.Bool // the server said the session is gone (404), or it is being replaced
	// sid is the session id the handshake was given ("" on a 2026-07-28
	// connection, which has none). mcp-go forgets it when the server
	// answers 404, on a request of its own too (the GET stream's).
	sid string
	// ctx ends when the session is replaced or closed; the server's
	// requests to the host on it end with it (remote_relay.go).
	ctx  context.Context
	stop context.CancelFunc
	// ready is closed once the handshake has set info and sid: a server
	// request may come before connect has returned.
	ready chan struct{}
	// connFields are the _meta members every relayed request carries on a
	// 2026-07-28 connection (none on a legacy one).
	connFields map[string]json.RawMessage
}

// NewRemote returns a client for spec.URL; nothing is sent until Start,
// Call or Tools. Headers that would let Go's HTTP client resend a POST by
// itself are refused.
func NewRemote(spec ServerSpec, opts Options) (*Remote, error) {
	if spec.URL == "" {
		return nil, errors.New("no server URL")
	}
	if err := checkHeaders(spec.Headers); err != nil {
		return nil, err
	}
	if plainRemote(spec.URL) {
		if what := remoteCredentials(spec, opts.OAuth); what != "" {
			return nil, CheckCredentialsURL(spec.URL, what)
		}
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	tap := newHTTPTap(http.DefaultTransport.(*http.Transport).Clone())
	r := &Remote{
		spec: spec, opts: opts.withDefaults(), tap: tap,
		// Redirects are not followed: a POST sent on to another place is a
		// second send the journal never saw (and our headers with it).
		httpc: &http.Client{Transport: discoverCheck{tap}, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
		tokenPrefix: "mcp-confirm-" + hex.EncodeToString(b[:]) + "-",
		startSem:    make(chan struct{}, 1),
		progress:    map[string]func(Progress){},
		lateDone:    make(chan struct{}),
	}
	// What a stream carries after its answer goes where a resumed
	// stream's messages go; second answers to OnLateResult, as on stdio.
	tap.drained = r.resumedMessage
	go func() {
		defer close(r.lateDone)
		tap.late.run(r.opts.OnLateResult)
	}()
	return r, nil
}

// Start connects and completes the handshake.
func (r *Remote) Start(ctx context.Context) error {
	_, err := r.session(ctx)
	return err
}

func (r *Remote) live() (*remoteSession, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	if r.cur != nil && r.cur.usable() {
		return r.cur, nil
	}
	return nil, nil
}

// usable: requests may go out on s. Not once the server has said it no
// longer knows the session, to any request: mcp-go would then refuse to
// send them (ErrSessionTerminated), and every call would end not sent.
func (s *remoteSession) usable() bool {
	return !s.dead.Load() && (s.sid == "" || s.tr.GetSessionId() == s.sid)
}

// close ends s: its requests to the host, its GET stream, its session at
// the server (mcp-go sends DELETE).
func (s *remoteSession) close() {
	s.stop()
	_ = s.mc.Close()
}

func (r *Remote) session(ctx context.Context) (*remoteSession, error) {
	if s, err := r.live(); s != nil || err != nil {
		return s, err
	}
	select {
	case r.startSem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("connect to %s: %w", MaskURL(r.spec.URL), ctx.Err())
	}
	defer func() { <-r.startSem }()
	if s, err := r.live(); s != nil || err != nil {
		return s, err
	}
	r.mu.Lock()
	n := r.n + 1
	r.starting, r.tried = true, true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.starting = false
		r.mu.Unlock()
	}()
	s, err := r.connect(ctx, n)
	var refused *loginRefusedError
	if errors.As(err, &refused) && r.opts.OAuth.expireToken(r.spec.URL) {
		// The server refused a token that had not expired by its own
		// account (revoked, or the server forgot it): refresh it and shake
		// hands once more. A handshake runs nothing.
		s, err = r.connect(ctx, n)
	}
	if err != nil {
		return nil, &StartError{Server: MaskURL(r.spec.URL), Session: n, Err: err,
			NeedsLogin: errors.Is(err, ErrAuthorization) && r.usesLogins()}
	}
	r.mu.Lock()
	old := r.cur
	r.cur, r.n = s, n
	r.mu.Unlock()
	if old != nil {
		old.close()
	}
	r.opts.Logger.Info("mcp session started", "session", n, "url", MaskURL(r.spec.URL), "server", s.info.Name,
		"protocol", s.info.Protocol)
	if r.opts.OnSession != nil {
		r.opts.OnSession(n)
	}
	return s, nil
}

func (r *Remote) connect(ctx context.Context, n int) (*remoteSession, error) {
	topts := []transport.StreamableHTTPCOption{transport.WithHTTPBasicClient(r.httpc),
		transport.WithHTTPHeaders(r.spec.Headers), transport.WithHTTPLogger(slog.New(debugOnly{r.opts.Logger.Handler()}))}
	r.mu.Lock()
	decl := r.declared
	r.mu.Unlock()
	if decl != nil {
		// A legacy server sends the requests that belong to no call of ours
		// (roots/list once initialized, say) on the GET stream, and drops
		// them when none is open.
		topts = append(topts, transport.WithContinuousListening())
	}
	oauth, tokens, err := r.oauthOption()
	if err != nil {
		return nil, err
	}
	if oauth != nil {
		topts = append(topts, oauth)
	}
	tr, err := transport.NewStreamableHTTP(r.spec.URL, topts...)
	if err != nil {
		return nil, err
	}
	if tokens != nil {
		tokens.handler = tr.GetOAuthHandler() // it refreshes through it, under the login's lock
	}
	mc := client.NewClient(tr, client.WithDiscoverTimeout(r.opts.ProbeTimeout))
	s := &remoteSession{n: n, mc: mc, tr: tr, ready: make(chan struct{})}
	// The transport keeps this context for its GET stream; it lives as
	// long as the session.
	s.ctx, s.stop = context.WithCancel(context.Background())
	if err := mc.Start(s.ctx); err != nil {
		s.stop()
		return nil, err
	}
	if r.opts.OnServerRequest != nil {
		// Replaces mcp-go's own handler, which Start installed; before the
		// handshake, after which the server may ask at once.
		tr.SetRequestHandler(r.serverRequestHandler(s))
	}
	mc.OnNotification(func(m mcp.JSONRPCNotification) { r.onNotification(n, m) })
	ctx, cancel := context.WithTimeout(ctx, r.opts.StartTimeout)
	defer cancel()
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: r.opts.ClientName, Version: r.opts.ClientVersion}
	if decl != nil {
		// The host's capabilities, in an initialize at its (legacy)
		// protocol version: no server/discover first.
		req.Params.Capabilities, req.Params.ProtocolVersion = decl.caps, decl.version
	}
	res, err := mc.Initialize(ctx, req)
	if err != nil {
		s.close()
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("no answer to the handshake in time (start timeout %s): %w", r.opts.StartTimeout, err)
		}
		if errors.Is(err, transport.ErrOAuthAuthorizationRequired) && oauth != nil {
			// The stored login's token expired and could not be refreshed,
			// or the server refused it.
			return nil, &loginRefusedError{fmt.Errorf("handshake: %w (the stored login's token was refused or could not be refreshed)", ErrAuthorization)}
		}
		if errors.Is(err, transport.ErrAuthorizationRequired) || errors.Is(err, transport.ErrOAuthAuthorizationRequired) {
			// One sentinel for a 401, at the handshake or on a call.
			return nil, fmt.Errorf("handshake: %w (the server answered 401)", ErrAuthorization)
		}
		return nil, fmt.Errorf("handshake: %w", err)
	}
	s.info = ServerInfo{Name: res.ServerInfo.Name, Version: res.ServerInfo.Version,
		Protocol: mc.ProtocolVersion(), Title: res.ServerInfo.Title, Instructions: res.Instructions}
	if !mcp.IsModernProtocol(s.info.Protocol) {
		s.sid = tr.GetSessionId()
	}
	if v := mc.ProtocolVersion(); mcp.IsModernProtocol(v) {
		s.connFields = map[string]json.RawMessage{}
		for k, f := range map[string]any{
			mcp.MetaKeyProtocolVersion:    v,
			mcp.MetaKeyClientCapabilities: mc.GetClientCapabilities(),
			mcp.MetaKeyClientInfo:         mcp.Implementation{Name: r.opts.ClientName, Version: r.opts.ClientVersion},
		} {
			if raw, err := json.Marshal(f); err == nil {
				s.connFields[k] = raw
			}
		}
	}
	close(s.ready)
	return s, nil
}

// onNotification takes a notification that came on session sn.
func (r *Remote) onNotification(sn int, n mcp.JSONRPCNotification) {
	f := n.Params.AdditionalFields
	token, _ := f["progressToken"].(string)
	r.mu.Lock()
	deliver := r.progress[token]
	r.mu.Unlock()
	if n.Method != "notifications/progress" || (deliver == nil && !strings.HasPrefix(token, r.tokenPrefix)) {
		// Not progress of a call of ours: the proxy relays it to its host.
		if r.opts.OnNotification != nil {
			if params, err := json.Marshal(n.Params); err == nil {
				r.opts.OnNotification(sn, n.Method, params)
			}
		}
		return
	}
	if deliver == nil {
		return
	}
	p := Progress{At: time.Now()}
	p.Progress, _ = f["progress"].(float64)
	p.Total, _ = f["total"].(float64)
	p.Message, _ = f["message"].(string)
	deliver(p)
}

// Close ends the current session. Calls still running end as unknown.
func (r *Remote) Close() error {
	r.mu.Lock()
	r.closed = true
	s := r.cur
	r.mu.Unlock()
	if s != nil {
		s.close()
	}
	r.startSem <- struct{}{}
	<-r.startSem
	// Second answers still being read or queued are delivered before
	// Close returns, as Client's Close waits for OnLateResult.
	r.tap.close()
	<-r.lateDone
	return nil
}

// ServerInfo is what the server of the current (or last) session declared.
func (r *Remote) ServerInfo() ServerInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil {
		return ServerInfo{}
	}
	return r.cur.info
}

// Session is the number of the current (or last) session.
func (r *Remote) Session() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// State reports the connection's life, in Client's terms.
func (r *Remote) State() SessionState {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return StateClosed
	case r.starting && r.n > 0:
		return StateRestarting
	case r.starting:
		return StateStarting
	case r.cur != nil && r.cur.usable():
		return StateRunning
	case r.tried:
		return StateExited
	}
	return StateNew
}

// Stderr is empty: a remote server's stderr is not ours to read.
func (r *Remote) Stderr() []string { return nil }

// Tools lists the server's tools (all pages).
func (r *Remote) Tools(ctx context.Context) ([]mcp.Tool, error) {
	s, err := r.session(ctx)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeoutCause(ctx, r.opts.ListTimeout, errListClock)
	res, err := s.mc.ListTools(lctx, mcp.ListToolsRequest{})
	expired := context.Cause(lctx) == errListClock
	cancel()
	if err != nil {
		if expired {
			return nil, &ListTimeoutError{Within: r.opts.ListTimeout}
		}
		if errors.Is(err, transport.ErrSessionTerminated) {
			s.dead.Store(true)
		}
		return nil, fmt.Errorf("list tools (session %d): %w", s.n, err)
	}
	return res.Tools, nil
}

// Call sends one tools/call, once, and reports what is known about it
// (decideHTTP). It never resends. When the server answered 404 to the
// session (Delivery.SessionExpired: it says it no longer knows it, and did
// not run the request), the next call starts a new session; a write whose
// tool takes the idempotency key may then be sent once more with the same
// key, as its next attempt, which the caller journals first (SPEC §9:
// guard.Guard does).
func (r *Remote) Call(ctx context.Context, tool string, args map[string]any, o CallOptions) Delivery {
	if o.KeyArg != "" && o.Key == "" {
		return Delivery{Kind: DeliveryNotSent, EndedAt: time.Now(),
			Err: fmt.Errorf("call %s: key argument %q set without a key", tool, o.KeyArg)}
	}
	return r.callOnce(ctx, tool, args, o)
}

func (r *Remote) callOnce(ctx context.Context, tool string, args map[string]any, o CallOptions) Delivery {
	r.mu.Lock()
	r.calls++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.calls--
		r.mu.Unlock()
	}()
	s, err := r.session(ctx)
	if err != nil {
		return Delivery{Kind: DeliveryNotSent, EndedAt: time.Now(), Err: fmt.Errorf("call %s: %w", tool, err)}
	}
	token := string(strconv.AppendUint([]byte(r.tokenPrefix), r.tokenSeq.Add(1), 10))
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// A stream that mcp-go resumes for this request is opened under this
	// context: the tap knows it by the token (httpTap.resumeOf).
	callCtx = withCallToken(callCtx, token)

	clocks := newCallClocks(o, cancel)
	events := newCallEvents()
	eventsDone := make(chan struct{})
	if o.OnSent != nil || o.OnProgress != nil {
		// A goroutine only for a caller that listens: a read made without
		// callbacks (`call --url`, a proxy host's read without a progress
		// token) has nothing to be handed, and the start and the wait for
		// the goroutine's end cost it a handoff each way.
		go func() {
			defer close(eventsDone)
			events.run(s.n, o.OnSent, o.OnProgress)
		}()
	} else {
		close(eventsDone)
	}
	r.mu.Lock()
	r.progress[token] = func(p Progress) {
		clocks.progress()
		events.progress(p)
	}
	r.mu.Unlock()
	r.tap.watch(token, o.Key, tool, s.n)

	began := time.Now()
	_, err = s.mc.CallTool(callCtx, toolsCallRequest(tool, args, token, o))
	x := r.tap.done(token)
	if canResume(s, x) && callCtx.Err() == nil {
		// The stream broke after the server gave it event ids: ask for the
		// rest, within the call's clocks (progress on it resets the idle one).
		var why error
		if x, why = r.resume(callCtx, x); why != nil {
			r.opts.Logger.Debug("stream not resumed", "tool", tool, "id", x.id, "err", why)
		}
	}
	clocks.stop()
	r.mu.Lock()
	delete(r.progress, token)
	r.mu.Unlock()

	reason, reasonErr := unknownReason(err, ctx, callCtx, false)
	out := decideHTTP(x, err, reason, reasonErr)
	if out.Kind == DeliveryNotSent && !x.connected && errors.Is(err, transport.ErrOAuthAuthorizationRequired) {
		// The stored token expired and could not be refreshed: the request
		// never left (mcp-go asks for the token before it sends).
		out.Err = fmt.Errorf("%w: the stored login's token expired and could not be refreshed; nothing was sent", ErrAuthorization)
	}
	out.Session, out.EndedAt = s.n, time.Now()
	out.Resumed = x.resumed && out.Kind != DeliveryUnknown
	if out.Kind != DeliveryNotSent {
		out.SentAt, out.RPCID = began, x.id
		events.sent(x.id)
	}
	var refused *RefusedError
	if errors.As(out.Err, &refused) && refused.SessionExpired {
		s.dead.Store(true)
	}
	if out.Kind == DeliveryUnknown && x.id != "" && context.Cause(callCtx) != nil {
		// A disconnect is not a cancel before 2026-07-28: say it.
		r.sendCancel(s, x.id, context.Cause(callCtx))
	}
	if out.Err != nil && out.Kind != DeliveryRPCError {
		out.Err = fmt.Errorf("call %s (session %d): %w", tool, s.n, out.Err)
	}
	events.close()
	<-eventsDone
	// OnSent has had every id: second answers to them may go out now.
	r.tap.release(x.call)
	return out
}

func toolsCallRequest(tool string, args map[string]any, token string, o CallOptions) mcp.CallToolRequest {
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Meta = &mcp.Meta{ProgressToken: token}
	if o.Key != "" {
		req.Params.Meta.AdditionalFields = map[string]any{KeyMetaField: o.Key}
	}
	switch {
	case o.KeyArg != "":
		a := make(map[string]any, len(args)+1)
		for k, v := range args {
			a[k] = v
		}
		a[o.KeyArg] = o.Key
		req.Params.Arguments = a
	case o.RawArgs != nil:
		req.Params.RawArguments = o.RawArgs
	default:
		req.Params.Arguments = args
	}
	return req
}

// sendCancel sends notifications/cancelled for request id, best effort, in
// the background.
func (r *Remote) sendCancel(s *remoteSession, id string, cause error) {
	var reqID any = id
	if n, err := strconv.ParseInt(id, 10, 64); err == nil {
		reqID = n
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION}
		n.Method = "notifications/cancelled"
		n.Params.AdditionalFields = map[string]any{"requestId": reqID, "reason": cause.Error()}
		if err := s.mc.GetTransport().SendNotification(ctx, n); err != nil {
			r.opts.Logger.Debug("cancel not delivered", "id", id, "err", err)
		}
	}()
}

// callClocks are a call's idle and absolute clocks.
type callClocks struct {
	mu   sync.Mutex // guards idle
	idle *time.Timer
	dur  time.Duration
	abs  *time.Timer
}

func newCallClocks(o CallOptions, cancel context.CancelCauseFunc) *callClocks {
	c := &callClocks{dur: o.IdleTimeout}
	if o.IdleTimeout > 0 {
		c.idle = time.AfterFunc(o.IdleTimeout, func() { cancel(errCauseIdle) })
	}
	if o.MaxTotal > 0 {
		c.abs = time.AfterFunc(o.MaxTotal, func() { cancel(errCauseAbsolute) })
	}
	return c
}

// progress resets the idle clock (when it has not fired).
func (c *callClocks) progress() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idle != nil && c.idle.Stop() {
		c.idle.Reset(c.dur)
	}
}

func (c *callClocks) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idle != nil {
		c.idle.Stop()
		c.idle = nil
	}
	if c.abs != nil {
		c.abs.Stop()
	}
}

// debugOnly passes mcp-go's transport logs on at debug level. Its errors
// ("SSE stream error" on a cut stream) are what the tap sees and Remote
// reports as an outcome: shown as errors too, they would tell the user of
// a failure twice, once without its meaning.
type debugOnly struct{ slog.Handler }

func (d debugOnly) Enabled(ctx context.Context, _ slog.Level) bool {
	return d.Handler.Enabled(ctx, slog.LevelDebug)
}

func (d debugOnly) Handle(ctx context.Context, rec slog.Record) error {
	rec.Level = slog.LevelDebug
	rec.AddAttrs(slog.String("from", "mcp-go"))
	return d.Handler.Handle(ctx, rec)
}

func (d debugOnly) WithAttrs(as []slog.Attr) slog.Handler { return debugOnly{d.Handler.WithAttrs(as)} }
func (d debugOnly) WithGroup(g string) slog.Handler       { return debugOnly{d.Handler.WithGroup(g)} }

// oauthOption is mcp-go's OAuth for this session when a login is stored
// for the URL (Options.OAuth), read afresh at each session so that a login
// made meanwhile is used; nil when there is none, or when the headers
// carry an Authorization of their own (--header wins: mcp-go would
// otherwise put the login's over it). The token store is the option's,
// for the caller to give the OAuth handler mcp-go makes.
func (r *Remote) oauthOption() (transport.StreamableHTTPCOption, *loginTokens, error) {
	if !r.usesLogins() {
		return nil, nil, nil
	}
	cfg, tokens, ok, err := r.opts.OAuth.oauthFor(r.spec.URL)
	if err != nil || !ok {
		return nil, nil, err
	}
	return transport.WithHTTPOAuth(cfg), tokens, nil
}

// usesLogins: a login stored for the URL (Options.OAuth) is what this
// client's sessions authorize with, the headers carrying no Authorization
// of their own.
func (r *Remote) usesLogins() bool {
	if r.opts.OAuth == nil {
		return false
	}
	for k := range r.spec.Headers {
		if http.CanonicalHeaderKey(k) == "Authorization" {
			return false
		}
	}
	return true
}
