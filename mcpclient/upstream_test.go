package mcpclient_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// serverRequests records what the server asked this client, and answers
// sampling and roots as a host would.
type serverRequests struct {
	mu   sync.Mutex
	got  []mcpclient.ServerRequest
	seen chan string // each method, as it comes
}

func (s *serverRequests) answer(_ context.Context, r mcpclient.ServerRequest) (json.RawMessage, *mcpclient.RPCError) {
	s.mu.Lock()
	s.got = append(s.got, r)
	s.mu.Unlock()
	select {
	case s.seen <- r.Method:
	default:
	}
	switch r.Method {
	case string(mcp.MethodSamplingCreateMessage):
		return json.RawMessage(`{"model":"test-model","role":"assistant","content":{"type":"text","text":"sampled by the test"}}`), nil
	case string(mcp.MethodListRoots):
		return json.RawMessage(`{"roots":[{"uri":"file:///test-root","name":"test root"}]}`), nil
	}
	return nil, &mcpclient.RPCError{Code: mcp.METHOD_NOT_FOUND, Message: "not in this test"}
}

func toolNames(t *testing.T, c *mcpclient.Client) map[string]bool {
	t.Helper()
	tools, err := c.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range tools {
		names[tl.Name] = true
	}
	return names
}

// A legacy server learns the capabilities a client declares from the
// handshake alone: server-everything lists its sampling and roots tools only
// to a client that declared them, and asks it for roots once initialized.
// DeclareCapabilities restarts the session to declare them, and the server's
// requests reach OnServerRequest, whose answers reach the server.
func TestDeclareCapabilitiesAndAnswerServerRequests(t *testing.T) {
	noLeak(t)
	spec := everythingSpec(t)
	reqs := &serverRequests{seen: make(chan string, 16)}
	opts := testOptions()
	opts.OnServerRequest = reqs.answer
	c := started(t, spec, opts)

	before := toolNames(t, c)
	if before["trigger-sampling-request"] || before["get-roots-list"] {
		t.Fatalf("tools before any declaration include the capability tools: %v", before)
	}

	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	caps := mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}}
	caps.Roots = &struct {
		ListChanged bool `json:"listChanged,omitempty"`
	}{ListChanged: true}
	restarted, err := c.DeclareCapabilities(ctx, caps)
	if err != nil || !restarted {
		t.Fatalf("DeclareCapabilities = %v, %v; want a restart", restarted, err)
	}
	if c.Session() != 2 {
		t.Errorf("session %d after the restart, want 2", c.Session())
	}
	if again, err := c.DeclareCapabilities(ctx, caps); again || err != nil || c.Session() != 2 {
		t.Errorf("declaring the same again = %v, %v (session %d); want nothing done", again, err, c.Session())
	}
	after := toolNames(t, c)
	if !after["trigger-sampling-request"] || !after["get-roots-list"] {
		t.Fatalf("tools after declaring sampling and roots: %v", after)
	}

	// The server asks for roots on its own, shortly after the handshake.
	select {
	case m := <-reqs.seen:
		if m != string(mcp.MethodListRoots) {
			t.Fatalf("first server request %q, want roots/list", m)
		}
	case <-time.After(hangGuard):
		t.Fatal("the server never asked for roots")
	}
	out := call(t, c, "get-roots-list", map[string]any{}, mcpclient.CallOptions{})
	if out.Kind != mcpclient.DeliveryResult || !strings.Contains(string(out.ResultJSON), "file:///test-root") {
		t.Fatalf("get-roots-list = %+v %s", out, out.ResultJSON)
	}

	out = call(t, c, "trigger-sampling-request", map[string]any{"prompt": "a haiku", "maxTokens": 7}, mcpclient.CallOptions{Key: "k-sampling-000001"})
	if out.Kind != mcpclient.DeliveryResult || !strings.Contains(string(out.ResultJSON), "sampled by the test") {
		t.Fatalf("trigger-sampling-request = %+v %s", out, out.ResultJSON)
	}
	reqs.mu.Lock()
	defer reqs.mu.Unlock()
	var sampling *mcpclient.ServerRequest
	for i, r := range reqs.got {
		if r.Method == string(mcp.MethodSamplingCreateMessage) {
			sampling = &reqs.got[i]
		}
	}
	if sampling == nil {
		t.Fatalf("no sampling request reached OnServerRequest: %+v", reqs.got)
	}
	var p struct {
		MaxTokens int `json:"maxTokens"`
		Messages  []struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(sampling.Params, &p); err != nil || p.MaxTokens != 7 || len(p.Messages) != 1 ||
		!strings.Contains(p.Messages[0].Content.Text, "a haiku") {
		t.Errorf("sampling params %s (%v)", sampling.Params, err)
	}
	if sampling.Session != 2 || sampling.ID == "" {
		t.Errorf("sampling request session %d id %q", sampling.Session, sampling.ID)
	}
}

// A session with a call open is not restarted to declare capabilities: the
// call would end unknown for nothing.
func TestDeclareCapabilitiesKeepsASessionWithACallOpen(t *testing.T) {
	noLeak(t)
	spec := everythingSpec(t)
	c, _ := startedWithLate(t, spec)
	sent := make(chan struct{})
	done := make(chan mcpclient.Delivery, 1)
	go func() {
		done <- c.Call(context.Background(), "trigger-long-running-operation", map[string]any{"duration": 2, "steps": 2},
			mcpclient.CallOptions{Key: "k-open-call-000001", OnSent: func(int, string) { close(sent) }})
	}()
	select {
	case <-sent:
	case <-time.After(hangGuard):
		t.Fatal("the call was never sent")
	}
	restarted, err := c.DeclareCapabilities(context.Background(), mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}})
	if restarted || err == nil || !strings.Contains(err.Error(), "still open") {
		t.Fatalf("DeclareCapabilities with a call open = %v, %v; want a refusal", restarted, err)
	}
	if out := <-done; out.Kind != mcpclient.DeliveryResult {
		t.Fatalf("the open call ended %+v, want its result", out)
	}
	if c.Session() != 1 {
		t.Errorf("session %d, want the first one kept", c.Session())
	}
}

// A 2026-07-28 server is not told: it would ask inside a call's answer
// (input_required), which this client cannot supply.
func TestDeclareCapabilitiesLeavesAModernServerAlone(t *testing.T) {
	bin := buildDemo(t)
	noLeak(t)
	c := started(t, mcpclient.ServerSpec{Command: bin, Args: []string{"demo-server", "--db", filepath.Join(t.TempDir(), "demo.db")}}, testOptions())
	restarted, err := c.DeclareCapabilities(context.Background(), mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}})
	if restarted || err != nil || c.Session() != 1 {
		t.Fatalf("DeclareCapabilities on a 2026-07-28 server = %v, %v, session %d; want nothing done", restarted, err, c.Session())
	}
}

// Calls keep coming while the session is replaced to declare capabilities:
// each is answered, on one session or the next; none is cut short (unknown)
// or refused (not sent).
func TestDeclareCapabilitiesWhileCallsComeAndGo(t *testing.T) {
	noLeak(t)
	spec := everythingSpec(t)
	c := started(t, spec, testOptions())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []mcpclient.Delivery
	calls := 0
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				out := c.Call(context.Background(), "echo", map[string]any{"message": "x"}, mcpclient.CallOptions{MaxTotal: hangGuard})
				mu.Lock()
				calls++
				if out.Kind != mcpclient.DeliveryResult {
					bad = append(bad, out)
				}
				mu.Unlock()
				time.Sleep(time.Duration(i%3) * time.Millisecond) // gaps, so the session is idle now and then
			}
		}()
	}
	sampling := mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}}
	elicitation := mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}}
	restarts, refusals := 0, 0
	deadline := time.Now().Add(hangGuard)
	for restarts < 3 && time.Now().Before(deadline) {
		caps := sampling
		if restarts%2 == 1 {
			caps = elicitation
		}
		restarted, err := c.DeclareCapabilities(context.Background(), caps)
		switch {
		case restarted && err == nil:
			restarts++
		case err != nil && strings.Contains(err.Error(), "still open"):
			refusals++
		default:
			t.Fatalf("DeclareCapabilities = %v, %v", restarted, err)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d calls, %d restarts, %d refusals (a call was open)", calls, restarts, refusals)
	if restarts < 3 {
		t.Fatalf("only %d restarts in %v", restarts, hangGuard)
	}
	for _, out := range bad {
		t.Errorf("a call during the restarts ended %v: %v", out.Kind, out.Err)
	}
}
