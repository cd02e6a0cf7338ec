package mcpclient_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// The server's own requests to the client over Streamable HTTP (issue 19):
// an mcp-go server whose tools ask the client for sampling, elicitation
// and roots, on the tool call's SSE stream, and answer with what they got.

// askingServer is an mcp-go Streamable HTTP server on loopback; it keeps
// the capabilities each initialize declared, and the roots/list_changed
// notifications it was sent.
type askingServer struct {
	url         string
	mu          sync.Mutex
	inits       []mcp.ClientCapabilities
	rootsChange atomic.Int32
	holding     chan struct{} // hold_open has begun
	release     chan struct{} // closed by a test: hold_open returns
}

func newAskingServer(t *testing.T, wrap func(http.Handler) http.Handler) *askingServer {
	t.Helper()
	a := &askingServer{holding: make(chan struct{}, 1), release: make(chan struct{})}
	hooks := &server.Hooks{}
	hooks.AddAfterInitialize(func(_ context.Context, _ any, req *mcp.InitializeRequest, _ *mcp.InitializeResult) {
		a.mu.Lock()
		a.inits = append(a.inits, req.Params.Capabilities)
		a.mu.Unlock()
	})
	s := server.NewMCPServer("asking-http", "1.0.0", server.WithHooks(hooks))
	s.EnableSampling()
	s.AddNotificationHandler(string(mcp.MethodNotificationRootsListChanged), func(context.Context, mcp.JSONRPCNotification) {
		a.rootsChange.Add(1)
	})
	// Each tool reports what the client answered, or the error it got:
	// what the server saw is what the test checks.
	s.AddTool(mcp.NewTool("ask_sampling"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		req := mcp.CreateMessageRequest{}
		req.CreateMessageParams.Messages = []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent("a haiku about journals")}}
		req.CreateMessageParams.MaxTokens = 20
		res, err := server.ServerFromContext(ctx).RequestSampling(ctx, req)
		if err != nil {
			return mcp.NewToolResultError("sampling failed: " + err.Error()), nil
		}
		b, _ := json.Marshal(res)
		return mcp.NewToolResultText("sampled: " + string(b)), nil
	})
	s.AddTool(mcp.NewTool("ask_elicitation"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		req := mcp.ElicitationRequest{}
		req.Params.Message = "your name?"
		req.Params.RequestedSchema = map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}
		res, err := server.ServerFromContext(ctx).RequestElicitation(ctx, req)
		if err != nil {
			return mcp.NewToolResultError("elicitation failed: " + err.Error()), nil
		}
		b, _ := json.Marshal(res)
		return mcp.NewToolResultText("elicited: " + string(b)), nil
	})
	s.AddTool(mcp.NewTool("ask_roots"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := server.ServerFromContext(ctx).RequestRoots(ctx, mcp.ListRootsRequest{})
		if err != nil {
			return mcp.NewToolResultError("roots failed: " + err.Error()), nil
		}
		b, _ := json.Marshal(res)
		return mcp.NewToolResultText("roots: " + string(b)), nil
	})
	s.AddTool(mcp.NewTool("hold_open"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		a.holding <- struct{}{}
		select {
		case <-a.release:
		case <-ctx.Done():
		}
		return mcp.NewToolResultText("held"), nil
	})
	var h http.Handler = server.NewStreamableHTTPServer(s)
	if wrap != nil {
		h = wrap(h)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	a.url = ts.URL + "/mcp"
	return a
}

func (a *askingServer) initializes() []mcp.ClientCapabilities {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]mcp.ClientCapabilities(nil), a.inits...)
}

// hostCaps: a host that samples, elicits and lists roots.
func hostCaps() mcp.ClientCapabilities {
	caps := mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}, Elicitation: &mcp.ElicitationCapability{}}
	caps.Roots = &struct {
		ListChanged bool `json:"listChanged,omitempty"`
	}{ListChanged: true}
	return caps
}

func declaresAll(c mcp.ClientCapabilities) bool {
	return c.Sampling != nil && c.Elicitation != nil && c.Roots != nil
}

// remoteAsked is a Remote whose OnServerRequest is answer.
func remoteAsked(t *testing.T, url string, answer func(context.Context, mcpclient.ServerRequest) (json.RawMessage, *mcpclient.RPCError), tune func(*mcpclient.Options)) *mcpclient.Remote {
	t.Helper()
	opts := testOptions()
	opts.OnServerRequest = answer
	if tune != nil {
		tune(&opts)
	}
	r, err := mcpclient.NewRemote(mcpclient.ServerSpec{URL: url}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// toolText is the text of a tool result as the server sent it; it fails
// the test unless the call was answered.
func toolText(t *testing.T, out mcpclient.Delivery) (string, bool) {
	t.Helper()
	if out.Kind != mcpclient.DeliveryResult {
		t.Fatalf("delivery %s (session %d): %v", out.Kind, out.Session, out.Err)
	}
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(out.ResultJSON, &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("result %s: %v", out.ResultJSON, err)
	}
	return res.Content[0].Text, res.IsError
}

func remoteCall(t *testing.T, r *mcpclient.Remote, tool string) mcpclient.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	return r.Call(ctx, tool, map[string]any{}, mcpclient.CallOptions{Key: "key-" + tool + "-1", IdleTimeout: 10 * time.Second})
}

// The capabilities declared before the start go into the initialize (the
// host's legacy version, no server/discover); the server's sampling,
// elicitation and roots requests reach OnServerRequest, and its answers
// reach the server, whose tool results carry them. A roots/list_changed
// the client sends reaches the server.
func TestRemoteAnswersServerRequests(t *testing.T) {
	noLeak(t)
	srv := newAskingServer(t, nil)
	reqs := &serverRequests{seen: make(chan string, 16)}
	r := remoteAsked(t, srv.url, func(ctx context.Context, sr mcpclient.ServerRequest) (json.RawMessage, *mcpclient.RPCError) {
		if sr.Method == string(mcp.MethodElicitationCreate) {
			reqs.mu.Lock()
			reqs.got = append(reqs.got, sr)
			reqs.mu.Unlock()
			return json.RawMessage(`{"action":"accept","content":{"name":"Ada Lovelace"}}`), nil
		}
		return reqs.answer(ctx, sr)
	}, nil)
	if !r.DeclareBeforeStart(hostCaps(), mcp.ProtocolVersion20251125) {
		t.Fatal("DeclareBeforeStart refused before any session")
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p := r.ServerInfo().Protocol; p != mcp.ProtocolVersion20251125 {
		t.Errorf("protocol %q, want the host's %s", p, mcp.ProtocolVersion20251125)
	}
	if inits := srv.initializes(); len(inits) != 1 || !declaresAll(inits[0]) {
		t.Fatalf("the server's initializes declared %+v, want one with sampling, elicitation and roots", inits)
	}
	if r.DeclareBeforeStart(hostCaps(), mcp.ProtocolVersion20251125) {
		t.Error("DeclareBeforeStart accepted after the start")
	}

	for tool, want := range map[string]string{
		"ask_sampling":    "sampled by the test",
		"ask_elicitation": "Ada Lovelace",
		"ask_roots":       "file:///test-root",
	} {
		text, isErr := toolText(t, remoteCall(t, r, tool))
		if isErr || !strings.Contains(text, want) {
			t.Errorf("%s: the server got %q, want the client's answer %q", tool, text, want)
		}
	}
	reqs.mu.Lock()
	got := map[string]mcpclient.ServerRequest{}
	for _, sr := range reqs.got {
		got[sr.Method] = sr
	}
	reqs.mu.Unlock()
	for _, m := range []string{"sampling/createMessage", "elicitation/create", "roots/list"} {
		sr, ok := got[m]
		if !ok {
			t.Errorf("OnServerRequest was not asked %s", m)
			continue
		}
		if sr.Session != 1 || sr.ID == "" {
			t.Errorf("%s: session %d id %q", m, sr.Session, sr.ID)
		}
	}
	if p := got["sampling/createMessage"].Params; !strings.Contains(string(p), "a haiku about journals") {
		t.Errorf("sampling params %s", p)
	}

	if err := r.Notify(context.Background(), string(mcp.MethodNotificationRootsListChanged), nil); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); srv.rootsChange.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server never got notifications/roots/list_changed")
		}
	}
}

// An answer the client never gives: the wait ends at ServerRequestTimeout,
// OnServerRequest's ctx says why, and the server gets a JSON-RPC error
// saying so, in time for its tool to answer the call.
func TestRemoteHostNeverAnswers(t *testing.T) {
	noLeak(t)
	srv := newAskingServer(t, nil)
	causes := make(chan error, 1)
	r := remoteAsked(t, srv.url, func(ctx context.Context, _ mcpclient.ServerRequest) (json.RawMessage, *mcpclient.RPCError) {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, &mcpclient.RPCError{Code: mcp.INTERNAL_ERROR, Message: "gave up"}
	}, func(o *mcpclient.Options) { o.ServerRequestTimeout = 300 * time.Millisecond })
	r.DeclareBeforeStart(hostCaps(), mcp.ProtocolVersion20251125)
	began := time.Now()
	text, isErr := toolText(t, remoteCall(t, r, "ask_sampling"))
	took := time.Since(began)
	if !isErr || !strings.Contains(text, "sampling failed") || !strings.Contains(text, "the host did not answer within 300ms") {
		t.Fatalf("the server got %q (isError %v), want the bound's error", text, isErr)
	}
	if took > 5*time.Second {
		t.Errorf("the call took %s; the bound is 300ms", took)
	}
	select {
	case cause := <-causes:
		if cause == nil || !strings.Contains(cause.Error(), "did not answer within 300ms") {
			t.Errorf("OnServerRequest's ctx ended with %v, want the bound", cause)
		}
	case <-time.After(time.Second):
		t.Error("OnServerRequest's ctx never ended")
	}
}

// The client answers with an error: the server gets that error, its code
// and message as given.
func TestRemoteHostAnswersError(t *testing.T) {
	srv := newAskingServer(t, nil)
	r := remoteAsked(t, srv.url, func(context.Context, mcpclient.ServerRequest) (json.RawMessage, *mcpclient.RPCError) {
		return nil, &mcpclient.RPCError{Code: -1, Message: "the user declined to sample"}
	}, nil)
	r.DeclareBeforeStart(hostCaps(), mcp.ProtocolVersion20251125)
	text, isErr := toolText(t, remoteCall(t, r, "ask_sampling"))
	if !isErr || !strings.Contains(text, "the user declined to sample") {
		t.Fatalf("the server got %q (isError %v), want the client's error", text, isErr)
	}
}

// A session the server no longer knows (404) is followed by one whose
// initialize declares the capabilities again; the server's requests on it
// are answered.
func TestRemoteDeclaresAgainAfterExpiry(t *testing.T) {
	srv := newAskingServer(t, nil)
	p := newFaultProxy(t, srv.url, false)
	reqs := &serverRequests{seen: make(chan string, 16)}
	r := remoteAsked(t, p.url, reqs.answer, nil)
	r.DeclareBeforeStart(hostCaps(), mcp.ProtocolVersion20251125)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.set("404", true)
	if out := remoteCall(t, r, "ask_sampling"); !out.SessionExpired() {
		t.Fatalf("delivery %s, %v; want session expired", out.Kind, out.Err)
	}
	out := remoteCall(t, r, "ask_sampling")
	if text, isErr := toolText(t, out); isErr || !strings.Contains(text, "sampled by the test") || out.Session != 2 {
		t.Fatalf("on session %d the server got %q (isError %v), want the client's answer on session 2", out.Session, text, isErr)
	}
	inits := srv.initializes()
	if len(inits) != 2 {
		t.Fatalf("%d initializes, want 2 (one per session)", len(inits))
	}
	for i, c := range inits {
		if !declaresAll(c) {
			t.Errorf("session %d's initialize declared %+v, want sampling, elicitation and roots", i+1, c)
		}
	}
}

// forgetful serves h until the test makes it forget a session: from then
// on every request carrying that session id is answered 404, and the GET
// stream open on it is cut, so that only mcp-go's GET stream hears the
// 404 (no call of ours does).
type forgetful struct {
	h         http.Handler
	mu        sync.Mutex
	forgotten map[string]bool
	gets      map[string]context.CancelFunc // open GET streams, by session id
	get404    atomic.Bool                   // a GET was answered 404
}

func (f *forgetful) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get("Mcp-Session-Id")
	f.mu.Lock()
	gone := f.forgotten[sid]
	f.mu.Unlock()
	if gone {
		if r.Method == http.MethodGet {
			defer f.get404.Store(true)
		}
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	if r.Method == http.MethodGet && sid != "" {
		ctx, cancel := context.WithCancel(r.Context())
		f.mu.Lock()
		f.gets[sid] = cancel
		f.mu.Unlock()
		r = r.WithContext(ctx)
	}
	f.h.ServeHTTP(w, r)
}

func (f *forgetful) openGET() (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for sid := range f.gets {
		return sid, true
	}
	return "", false
}

func (f *forgetful) forget(sid string) {
	f.mu.Lock()
	f.forgotten[sid] = true
	cancel := f.gets[sid]
	delete(f.gets, sid)
	f.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// The server forgets the session and only the GET stream hears its 404:
// mcp-go then refuses to send anything more on that session, so the next
// call must go out on a new one (declaring the capabilities again), not
// end "not sent" call after call.
func TestRemoteNewSessionAfterTheGETStreamHears404(t *testing.T) {
	var f *forgetful
	srv := newAskingServer(t, func(h http.Handler) http.Handler {
		f = &forgetful{h: h, forgotten: map[string]bool{}, gets: map[string]context.CancelFunc{}}
		return f
	})
	reqs := &serverRequests{seen: make(chan string, 16)}
	r := remoteAsked(t, srv.url, reqs.answer, nil)
	r.DeclareBeforeStart(hostCaps(), mcp.ProtocolVersion20251125)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var sid string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var ok bool
		if sid, ok = f.openGET(); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no GET stream was opened for the session that declared capabilities")
		}
	}
	f.forget(sid)
	// mcp-go reopens the GET stream after a second, hears 404, and ends
	// the session.
	for deadline := time.Now().Add(10 * time.Second); !f.get404.Load(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the GET stream did not come back within 10 s")
		}
	}
	// mcp-go's reading of that 404 takes a moment; the call must work
	// however long it takes (it is not waited for past 2 s).
	for deadline := time.Now().Add(2 * time.Second); r.State() == mcpclient.StateRunning && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	out := remoteCall(t, r, "ask_sampling")
	if text, isErr := toolText(t, out); isErr || !strings.Contains(text, "sampled by the test") || out.Session != 2 {
		t.Fatalf("on session %d the server got %q (isError %v)", out.Session, text, isErr)
	}
	if inits := srv.initializes(); len(inits) != 2 || !declaresAll(inits[1]) {
		t.Errorf("initializes %+v, want a second one declaring the capabilities", inits)
	}
}

// DeclareCapabilities on a legacy session replaces it by one that declares
// them, but not while a call is open.
func TestRemoteDeclareCapabilitiesLater(t *testing.T) {
	srv := newAskingServer(t, nil)
	p := newFaultProxy(t, srv.url, true) // legacy: the server/discover probe is refused
	reqs := &serverRequests{seen: make(chan string, 16)}
	r := remoteAsked(t, p.url, reqs.answer, nil)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if inits := srv.initializes(); len(inits) != 1 || inits[0].Sampling != nil {
		t.Fatalf("initializes %+v, want one declaring nothing", inits)
	}
	held := make(chan mcpclient.Delivery, 1)
	go func() { held <- remoteCall(t, r, "hold_open") }()
	select {
	case <-srv.holding:
	case <-time.After(hangGuard):
		t.Fatal("hold_open never ran")
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	restarted, err := r.DeclareCapabilities(ctx, hostCaps())
	if restarted || err == nil || !strings.Contains(err.Error(), "still open") {
		t.Fatalf("DeclareCapabilities while hold_open ran = %v, %v; want a refusal", restarted, err)
	}
	close(srv.release)
	if out := <-held; out.Kind != mcpclient.DeliveryResult || out.Session != 1 {
		t.Fatalf("hold_open: %s on session %d, %v", out.Kind, out.Session, out.Err)
	}
	restarted, err = r.DeclareCapabilities(ctx, hostCaps())
	if err != nil || !restarted || r.Session() != 2 {
		t.Fatalf("DeclareCapabilities = %v, %v (session %d); want a new session 2", restarted, err, r.Session())
	}
	if again, err := r.DeclareCapabilities(ctx, hostCaps()); again || err != nil {
		t.Errorf("declaring the same again = %v, %v; want nothing done", again, err)
	}
	if inits := srv.initializes(); len(inits) != 2 || !declaresAll(inits[1]) {
		t.Fatalf("initializes %+v, want a second declaring the capabilities", inits)
	}
	text, isErr := toolText(t, remoteCall(t, r, "ask_sampling"))
	if isErr || !strings.Contains(text, "sampled by the test") {
		t.Fatalf("the server got %q", text)
	}
}

// A 2026-07-28 server is not told: it would ask inside a call's answer.
func TestRemoteModernServerIsNotDeclared(t *testing.T) {
	srv := newAskingServer(t, nil)
	r := remoteAsked(t, srv.url, (&serverRequests{}).answer, nil)
	if r.DeclareBeforeStart(hostCaps(), mcp.LATEST_PROTOCOL_VERSION) {
		t.Error("DeclareBeforeStart accepted a 2026-07-28 version")
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p := r.ServerInfo().Protocol; !mcp.IsModernProtocol(p) {
		t.Fatalf("protocol %q, want 2026-07-28", p)
	}
	restarted, err := r.DeclareCapabilities(context.Background(), hostCaps())
	if restarted || err != nil || r.Session() != 1 {
		t.Fatalf("DeclareCapabilities = %v, %v (session %d); want nothing done", restarted, err, r.Session())
	}
}
