package idempotency

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// windowFixture is a fixture with the dedupe window on, a JSON log in a
// buffer and metrics on a registry of its own.
type windowFixture struct {
	*fixture
	reg *prometheus.Registry
	mu  sync.Mutex
	log bytes.Buffer
}

func newWindowFixture(t testing.TB, opts Options, window time.Duration, scope DedupeScope) *windowFixture {
	t.Helper()
	wf := &windowFixture{reg: prometheus.NewRegistry()}
	f := newFixture(t, opts)
	logger := slog.New(slog.NewJSONHandler(lockedWriter{&wf.mu, &wf.log}, nil))
	mw, err := New(f.mw.opts, WithDedupeWindow(window, scope), WithLogger(logger), WithMetrics(wf.reg))
	if err != nil {
		t.Fatal(err)
	}
	f.mw = mw
	wf.fixture = f
	return wf
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// writes are the "write" log lines, decoded.
func (wf *windowFixture) writes(t testing.TB) []map[string]any {
	t.Helper()
	wf.mu.Lock()
	defer wf.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(wf.log.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == "write" {
			out = append(out, m)
		}
	}
	return out
}

func (wf *windowFixture) outcomes(t testing.TB) []string {
	var out []string
	for _, w := range wf.writes(t) {
		out = append(out, w["outcome"].(string))
	}
	return out
}

func metaString(res *mcp.CallToolResult, key string) string {
	if res.Meta == nil {
		return ""
	}
	s, _ := res.Meta.AdditionalFields[key].(string)
	return s
}

func withArgs(base map[string]any, extra ...any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(extra); i += 2 {
		out[extra[i].(string)] = extra[i+1]
	}
	return out
}

var windowOrder = map[string]any{"item": "widget", "quantity": 2, "buyer": "alice"}

func TestWindow(t *testing.T) {
	bypassMeta := request("", windowOrder)
	bypassMeta.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{MetaIntentionalRepeat: true}}
	tests := []struct {
		name         string
		first        mcp.CallToolRequest
		advance      time.Duration // clock moves between the two calls
		second       mcp.CallToolRequest
		wantRuns     int64
		wantDeduped  bool // second answer replayed and deduplicated-by window
		wantOutcomes []string
	}{
		{
			name: "keyless resend inside the window is deduplicated", first: request("", windowOrder), advance: 59 * time.Second, second: request("", windowOrder),
			wantRuns: 1, wantDeduped: true, wantOutcomes: []string{"executed", "deduplicated_window"},
		},
		{
			name:  "numbers in another spelling are the same call",
			first: request("", windowOrder), second: mustRawRequest(t, `{"buyer":"alice","quantity":2.0,"item":"widget"}`),
			wantRuns: 1, wantDeduped: true, wantOutcomes: []string{"executed", "deduplicated_window"},
		},
		{
			name: "resend at the window's end runs again", first: request("", windowOrder), advance: time.Minute, second: request("", windowOrder),
			wantRuns: 2, wantOutcomes: []string{"executed", "executed"},
		},
		{
			name: "other arguments are another call", first: request("", windowOrder), second: request("", withArgs(windowOrder, "quantity", 3)),
			wantRuns: 2, wantOutcomes: []string{"executed", "executed"},
		},
		{
			name: "bypass argument runs again", first: request("", windowOrder), second: request("", withArgs(windowOrder, IntentionalRepeatArg, true)),
			wantRuns: 2, wantOutcomes: []string{"executed", "bypassed"},
		},
		{
			name: "bypass meta runs again", first: request("", windowOrder), second: bypassMeta,
			wantRuns: 2, wantOutcomes: []string{"executed", "bypassed"},
		},
		{
			name:  "a false bypass argument is no bypass and not part of the fingerprint",
			first: request("", windowOrder), second: request("", withArgs(windowOrder, IntentionalRepeatArg, false)),
			wantRuns: 1, wantDeduped: true, wantOutcomes: []string{"executed", "deduplicated_window"},
		},
		{
			name: "two keys with identical arguments both run", first: request("k-1", windowOrder), second: request("k-2", windowOrder),
			wantRuns: 2, wantOutcomes: []string{"executed", "executed"},
		},
		{
			name: "a keyless call after a keyed one runs", first: request("k-1", windowOrder), second: request("", windowOrder),
			wantRuns: 2, wantOutcomes: []string{"executed", "executed"},
		},
		{
			name: "a keyed call after a keyless one runs", first: request("", windowOrder), second: request("k-1", windowOrder),
			wantRuns: 2, wantOutcomes: []string{"executed", "executed"},
		},
		{
			name: "a keyed repeat is the key's replay, not the window's", first: request("k-1", windowOrder), second: request("k-1", windowOrder),
			wantRuns: 1, wantOutcomes: []string{"executed", "replayed"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wf := newWindowFixture(t, Options{}, time.Minute, ScopeNone)
			var runs atomic.Int64
			h := wf.mw.Wrap(counting(&runs))
			first := do(t, h, tt.first)
			wf.clock.Advance(tt.advance)
			second := do(t, h, tt.second)
			if got := runs.Load(); got != tt.wantRuns {
				t.Errorf("handler ran %d times, want %d", got, tt.wantRuns)
			}
			replayed, _ := metaBool(second, MetaReplayed)
			by := metaString(second, MetaDeduplicatedBy)
			if tt.wantDeduped != (by == "window") || (tt.wantDeduped && !replayed) {
				t.Errorf("second answer replayed=%v deduplicated-by=%q, want deduplicated %v", replayed, by, tt.wantDeduped)
			}
			if tt.wantDeduped {
				a, _ := json.Marshal(first.StructuredContent)
				b, _ := json.Marshal(second.StructuredContent)
				if string(a) != string(b) {
					t.Errorf("deduplicated answer %s differs from the first %s", b, a)
				}
			}
			if got := wf.outcomes(t); !reflect.DeepEqual(got, tt.wantOutcomes) {
				t.Errorf("logged outcomes %v, want %v", got, tt.wantOutcomes)
			}
		})
	}
}

func mustRawRequest(t *testing.T, raw string) mcp.CallToolRequest {
	t.Helper()
	var args map[string]any
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		t.Fatal(err)
	}
	req := request("", args)
	req.Params.RawArguments = json.RawMessage(raw)
	return req
}

func TestWindowOffByDefault(t *testing.T) {
	f := newFixture(t, Options{})
	var runs atomic.Int64
	h := f.mw.Wrap(counting(&runs))
	do(t, h, request("", windowOrder))
	if res := do(t, h, request("", windowOrder)); runs.Load() != 2 || metaString(res, MetaDeduplicatedBy) != "" {
		t.Errorf("without WithDedupeWindow: runs=%d meta=%v, want 2 runs and no deduplication", runs.Load(), res.Meta)
	}
}

func TestWindowOptionsRefused(t *testing.T) {
	store := openStore(t)
	for _, o := range []Option{WithDedupeWindow(0, ScopeNone), WithDedupeWindow(-time.Second, ScopeNone), WithDedupeWindow(time.Second, ScopeArg("")), WithMetrics(nil)} {
		if _, err := New(Options{Store: store}, o); err == nil {
			t.Errorf("New accepted a bad option")
		}
	}
	reg := prometheus.NewRegistry()
	if _, err := New(Options{Store: store}, WithMetrics(reg)); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Store: store}, WithMetrics(reg)); err == nil {
		t.Errorf("a second middleware's metrics on one registry were accepted")
	}
}

// A keyless twin of a call still running gets the in-progress answer, also
// once the window has passed while it runs: its lease still holds.
func TestWindowInProgress(t *testing.T) {
	for _, advance := range []time.Duration{0, 2 * time.Minute} {
		t.Run(fmt.Sprintf("after %v", advance), func(t *testing.T) {
			wf := newWindowFixture(t, Options{Lease: 5 * time.Minute}, time.Minute, ScopeNone)
			var runs atomic.Int64
			started, release := make(chan struct{}, 2), make(chan struct{})
			h := wf.mw.Wrap(blocking(&runs, started, release))
			done := make(chan *mcp.CallToolResult, 1)
			go func() { res, _ := h(context.Background(), request("", windowOrder)); done <- res }()
			<-started
			wf.clock.Advance(advance)
			res := do(t, h, request("", windowOrder))
			close(release)
			if first := <-done; first.IsError {
				t.Fatalf("first call: %v", first.Content)
			}
			sc, _ := res.StructuredContent.(map[string]any)
			if !res.IsError || sc["idempotency"] != "in_progress" || metaString(res, MetaDeduplicatedBy) != "window" {
				t.Errorf("twin of a running call: isError=%v %v meta=%v, want in_progress deduplicated by window", res.IsError, sc, res.Meta)
			}
			if retry, _ := metaBool(res, MetaShouldRetry); !retry {
				t.Errorf("in-progress answer should say should-retry true")
			}
			if runs.Load() != 1 {
				t.Errorf("handler ran %d times, want 1", runs.Load())
			}
			w := wf.writes(t)
			if len(w) != 2 || w[0]["outcome"] != "deduplicated_window" || w[0]["answer"] != "in_progress" {
				t.Errorf("log %v, want the twin logged deduplicated_window answer in_progress first", w)
			}
		})
	}
}

// fakeSession is an MCP session with a declared client name.
type fakeSession struct {
	id, client string
}

func (s fakeSession) Initialize()                                         {}
func (s fakeSession) Initialized() bool                                   { return true }
func (s fakeSession) NotificationChannel() chan<- mcp.JSONRPCNotification { return nil }
func (s fakeSession) SessionID() string                                   { return s.id }
func (s fakeSession) GetClientInfo() mcp.Implementation                   { return mcp.Implementation{Name: s.client} }
func (s fakeSession) SetClientInfo(mcp.Implementation)                    {}
func (s fakeSession) GetClientCapabilities() mcp.ClientCapabilities       { return mcp.ClientCapabilities{} }
func (s fakeSession) SetClientCapabilities(mcp.ClientCapabilities)        {}

func sessionCtx(id, client string) context.Context {
	return server.NewMCPServer("t", "0").WithContext(context.Background(), fakeSession{id: id, client: client})
}

func TestWindowScope(t *testing.T) {
	type send struct {
		session, client string
		args            map[string]any
	}
	tests := []struct {
		scope    DedupeScope
		second   send
		wantRuns int64
	}{
		{ScopeNone, send{"s2", "other-client", windowOrder}, 1},
		{ScopeClient, send{"s2", "client-a", windowOrder}, 1}, // the same client on a new session
		{ScopeClient, send{"s1", "client-b", windowOrder}, 2},
		{ScopeArg("buyer"), send{"s2", "other-client", windowOrder}, 1},
		{ScopeArg("buyer"), send{"s1", "client-a", withArgs(windowOrder, "buyer", "bob")}, 2},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v %+v", tt.scope, tt.second), func(t *testing.T) {
			wf := newWindowFixture(t, Options{}, time.Minute, tt.scope)
			var runs atomic.Int64
			h := wf.mw.Wrap(counting(&runs))
			if _, err := h(sessionCtx("s1", "client-a"), request("", windowOrder)); err != nil {
				t.Fatal(err)
			}
			if _, err := h(sessionCtx(tt.second.session, tt.second.client), request("", tt.second.args)); err != nil {
				t.Fatal(err)
			}
			if runs.Load() != tt.wantRuns {
				t.Errorf("runs %d, want %d", runs.Load(), tt.wantRuns)
			}
			w := wf.writes(t)
			if w[1]["session"] != tt.second.session || w[1]["client"] != tt.second.client {
				t.Errorf("second write logged session %v client %v", w[1]["session"], w[1]["client"])
			}
		})
	}
}

func TestWindowFingerprint(t *testing.T) {
	type call struct {
		scope  DedupeScope
		client string
		req    mcp.CallToolRequest
	}
	fp := func(c call) string {
		t.Helper()
		mw, err := New(Options{Store: openStore(t), KeyArg: "idempotency_key"}, WithDedupeWindow(time.Minute, c.scope))
		if err != nil {
			t.Fatal(err)
		}
		s, _, err := mw.windowFingerprint(c.req, c.client, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	plain := request("", windowOrder)
	refund := request("", windowOrder)
	refund.Params.Name = "create_refund"
	buyer := ScopeArg("buyer")
	tests := []struct {
		name string
		a, b call
		same bool
	}{
		{"none ignores the client", call{ScopeNone, "a", plain}, call{ScopeNone, "b", plain}, true},
		{"the key argument is left out", call{ScopeNone, "a", plain}, call{ScopeNone, "a", request("", withArgs(windowOrder, "idempotency_key", "k"))}, true},
		{"the bypass argument is left out", call{ScopeNone, "a", plain}, call{ScopeNone, "a", request("", withArgs(windowOrder, IntentionalRepeatArg, true))}, true},
		{"absent and empty arguments are one", call{ScopeNone, "a", request("", nil)}, call{ScopeNone, "a", request("", map[string]any{})}, true},
		{"the tool is part of it", call{ScopeNone, "a", plain}, call{ScopeNone, "a", refund}, false},
		{"an argument is part of it", call{ScopeNone, "a", plain}, call{ScopeNone, "a", request("", withArgs(windowOrder, "note", "x"))}, false},
		{"client scope: the same client", call{ScopeClient, "a", plain}, call{ScopeClient, "a", plain}, true},
		{"client scope tells clients apart", call{ScopeClient, "a", plain}, call{ScopeClient, "b", plain}, false},
		{"client scope is not none", call{ScopeClient, "a", plain}, call{ScopeNone, "a", plain}, false},
		{"arg scope ignores the client", call{buyer, "a", plain}, call{buyer, "b", plain}, true},
		{"arg scope tells values apart", call{buyer, "a", plain}, call{buyer, "a", request("", withArgs(windowOrder, "buyer", "bob"))}, false},
		{"arg scope is not none", call{buyer, "a", plain}, call{ScopeNone, "a", plain}, false},
		{"arg scopes by other arguments differ", call{buyer, "a", plain}, call{ScopeArg("item"), "a", plain}, false},
	}
	for _, tt := range tests {
		if got := fp(tt.a) == fp(tt.b); got != tt.same {
			t.Errorf("%s: fingerprints equal=%v, want %v", tt.name, got, tt.same)
		}
	}
}

func TestParseDedupeScope(t *testing.T) {
	for in, want := range map[string]DedupeScope{"none": ScopeNone, "client": ScopeClient, "arg:buyer": ScopeArg("buyer")} {
		got, err := ParseDedupeScope(in)
		if err != nil || got != want || got.String() != in {
			t.Errorf("ParseDedupeScope(%q) = %v, %v; String %q", in, got, err, got.String())
		}
	}
	for _, in := range []string{"", "arg:", "Client", "buyer", "arg"} {
		if _, err := ParseDedupeScope(in); err == nil {
			t.Errorf("ParseDedupeScope(%q) accepted", in)
		}
	}
}

func countWindowRecords(t *testing.T, s *SQLiteStore) (window, keyed int) {
	t.Helper()
	err := s.DB().QueryRow(`SELECT COUNT(*) FILTER (WHERE key LIKE 'window %'), COUNT(*) FILTER (WHERE key NOT LIKE 'window %') FROM idempotency_records`).Scan(&window, &keyed)
	if err != nil {
		t.Fatal(err)
	}
	return window, keyed
}

// Expired window records are purged on a later keyless arrival, a bounded
// batch at a time; keyed records and a window record still running are
// kept.
func TestWindowPurge(t *testing.T) {
	wf := newWindowFixture(t, Options{Lease: 10 * time.Minute}, time.Minute, ScopeNone)
	wf.mw.purgeBatch = 3
	var runs atomic.Int64
	h := wf.mw.Wrap(counting(&runs))
	for i := range 5 {
		do(t, h, request("", withArgs(windowOrder, "quantity", i+1)))
	}
	do(t, h, request("k-kept", windowOrder))
	// One call still running keeps its record past the window.
	started, release := make(chan struct{}, 1), make(chan struct{})
	hb := wf.mw.Wrap(blocking(&runs, started, release))
	done := make(chan struct{})
	go func() { hb(context.Background(), request("", withArgs(windowOrder, "quantity", 99))); close(done) }()
	<-started
	if w, k := countWindowRecords(t, wf.store); w != 6 || k != 1 {
		t.Fatalf("before: %d window and %d keyed records, want 6 and 1", w, k)
	}

	wf.clock.Advance(2 * time.Minute)
	do(t, h, request("", withArgs(windowOrder, "quantity", 100))) // purges 3, then a new record
	if w, _ := countWindowRecords(t, wf.store); w != 6-3+1 {
		t.Errorf("after one purge: %d window records, want 4 (a batch of 3 removed, 1 added)", w)
	}
	do(t, h, request("", withArgs(windowOrder, "quantity", 101))) // the batch was full: purge again at once
	if w, k := countWindowRecords(t, wf.store); w != 4-2+1 || k != 1 {
		t.Errorf("after the second purge: %d window and %d keyed records, want 3 (the running one and two new) and 1", w, k)
	}
	close(release)
	<-done

	// Once finished, the long call's record goes with the rest.
	wf.clock.Advance(2 * time.Minute)
	n, err := wf.store.PurgeWindow(context.Background(), wf.clock.Now(), 100)
	if err != nil || n != 3 {
		t.Errorf("PurgeWindow removed %d (%v), want 3", n, err)
	}
	if _, k := countWindowRecords(t, wf.store); k != 1 {
		t.Errorf("keyed records %d after window purges, want 1 (left to Purge)", k)
	}
}

func TestWriteLog(t *testing.T) {
	wf := newWindowFixture(t, Options{}, time.Minute, ScopeNone)
	var runs atomic.Int64
	h := wf.mw.Wrap(counting(&runs))
	ctx := sessionCtx("sess-1", "claude\x1b[31m")
	secret := withArgs(windowOrder, "buyer", "alice-secret-buyer")
	for _, req := range []mcp.CallToolRequest{
		request("", secret), request("", secret),
		request("k-log", secret), request("k-log", secret), request("k-log", withArgs(secret, "quantity", 7)),
		request("", withArgs(secret, IntentionalRepeatArg, true)),
	} {
		if _, err := h(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	w := wf.writes(t)
	if got, want := wf.outcomes(t), []string{"executed", "deduplicated_window", "executed", "replayed", "key_reuse_refused", "bypassed"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	wf.mu.Lock()
	all := wf.log.String()
	wf.mu.Unlock()
	if strings.Contains(all, "alice-secret-buyer") || strings.Contains(all, "widget") {
		t.Errorf("the log holds an argument's value:\n%s", all)
	}
	for i, l := range w {
		if l["session"] != "sess-1" || l["client"] != "claude__31m" || l["tool"] != "create_order" {
			t.Errorf("line %d: session %v client %v tool %v", i, l["session"], l["client"], l["tool"])
		}
		if at, err := time.Parse(time.RFC3339, fmt.Sprint(l["arrived"])); err != nil || !at.Equal(wf.clock.Now()) {
			t.Errorf("line %d: arrived %v (%v), want the clock's time", i, l["arrived"], err)
		}
		_, hasKey := l["key"]
		_, hasWindow := l["window"]
		if hasKey == hasWindow {
			t.Errorf("line %d: want exactly one of key and window: %v", i, l)
		}
	}
	if w[0]["window"] != w[1]["window"] || len(fmt.Sprint(w[0]["window"])) != 64 || w[5]["bypass"] != "argument" || w[4]["fields"] != "quantity" {
		t.Errorf("window fingerprints %v %v, bypass %v, fields %v", w[0]["window"], w[1]["window"], w[5]["bypass"], w[4]["fields"])
	}
}

func TestMetrics(t *testing.T) {
	wf := newWindowFixture(t, Options{}, time.Minute, ScopeNone)
	var runs atomic.Int64
	h := wf.mw.Wrap(counting(&runs))
	for _, req := range []mcp.CallToolRequest{
		request("", windowOrder), request("", windowOrder), request("", windowOrder), // 1 executed, 2 window replays
		request("k-m", windowOrder), request("k-m", windowOrder), // 1 executed, 1 key replay
		request("k-m", withArgs(windowOrder, "quantity", 9)), // key reuse
		request("", withArgs(windowOrder, IntentionalRepeatArg, true)),
	} {
		do(t, h, req)
	}
	hooks := &server.Hooks{}
	wf.mw.ObserveSessions(hooks)
	modern := server.WithRequestProtocolInfo(context.Background(),
		&server.RequestProtocolInfo{Modern: true, ClientInfo: &mcp.Implementation{Name: "modern client"}})
	for _, hook := range hooks.OnAfterDiscover {
		hook(modern, 1, &mcp.DiscoverRequest{}, &mcp.DiscoverResult{})
	}
	for i := range maxClientLabels + 2 { // with the modern client, 3 more than the cap
		var init mcp.InitializeRequest
		init.Params.ClientInfo.Name = fmt.Sprintf("client %d", i%(maxClientLabels+1))
		if i == 0 {
			init.Params.ClientInfo.Name = ""
		}
		for _, hook := range hooks.OnAfterInitialize {
			hook(context.Background(), 1, &init, &mcp.InitializeResult{})
		}
	}
	if n := testutil.CollectAndCount(wf.reg, "idempotency_sessions_total"); n != maxClientLabels+1 {
		t.Errorf("%d client label values, want %d (capped, plus other)", n, maxClientLabels+1)
	}
	for name, c := range map[string]struct {
		c    prometheus.Collector
		want float64
	}{
		"writes executed":      {wf.mw.metrics.writes.WithLabelValues("executed"), 2},
		"writes window":        {wf.mw.metrics.writes.WithLabelValues("deduplicated_window"), 2},
		"writes replayed":      {wf.mw.metrics.writes.WithLabelValues("replayed"), 1},
		"writes key reuse":     {wf.mw.metrics.writes.WithLabelValues("key_reuse_refused"), 1},
		"writes bypassed":      {wf.mw.metrics.writes.WithLabelValues("bypassed"), 1},
		"hits window replayed": {wf.mw.metrics.dedupeHits.WithLabelValues("window", "replayed"), 2},
		"hits key replayed":    {wf.mw.metrics.dedupeHits.WithLabelValues("key", "replayed"), 1},
		"hits key reused":      {wf.mw.metrics.dedupeHits.WithLabelValues("key", "key_reused"), 1},
		"replays window":       {wf.mw.metrics.replays.WithLabelValues("window"), 2},
		"replays key":          {wf.mw.metrics.replays.WithLabelValues("key"), 1},
		"sessions unnamed":     {wf.mw.metrics.sessions.WithLabelValues("unnamed"), 1},
		"sessions client_1":    {wf.mw.metrics.sessions.WithLabelValues("client_1"), 1},
		"sessions other":       {wf.mw.metrics.sessions.WithLabelValues("other"), 3}, // client 32, 33 and 0
	} {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
	want := `
# HELP idempotency_records Unexpired records in the store, by kind and state.
# TYPE idempotency_records gauge
idempotency_records{by="key",state="completed"} 1
idempotency_records{by="key",state="failed"} 0
idempotency_records{by="key",state="processing"} 0
idempotency_records{by="window",state="completed"} 1
idempotency_records{by="window",state="failed"} 0
idempotency_records{by="window",state="processing"} 0
`
	if err := testutil.GatherAndCompare(wf.reg, strings.NewReader(want), "idempotency_records"); err != nil {
		t.Error(err)
	}
	wf.clock.Advance(time.Hour) // the window record expires; the key's stays
	want = strings.Replace(want, `{by="window",state="completed"} 1`, `{by="window",state="completed"} 0`, 1)
	if err := testutil.GatherAndCompare(wf.reg, strings.NewReader(want), "idempotency_records"); err != nil {
		t.Error(err)
	}
}

// Under the window, Commit finishes the window record in the effect's
// transaction, and the handler sees no key.
func TestWindowCommit(t *testing.T) {
	wf := newWindowFixture(t, Options{}, time.Minute, ScopeNone)
	db := wf.store.DB()
	orderTable(t, db)
	h := wf.mw.Wrap(func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if k := KeyFromContext(ctx); k != "" {
			t.Errorf("KeyFromContext %q under the window, want none", k)
		}
		return Commit(ctx, func(tx *sql.Tx) (*mcp.CallToolResult, error) {
			if _, err := tx.Exec(`INSERT INTO orders (key) VALUES (NULL)`); err != nil {
				return nil, err
			}
			return mcp.NewToolResultText("ordered"), nil
		})
	})
	do(t, h, request("", windowOrder))
	res := do(t, h, request("", windowOrder))
	if replayed, _ := metaBool(res, MetaReplayed); !replayed || countRows(t, db) != 1 {
		t.Errorf("keyless resend under the window: replayed=%v rows=%d, want true and 1", replayed, countRows(t, db))
	}
	fp, _, err := wf.mw.windowFingerprint(request("", windowOrder), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, ok, err := wf.store.Lookup(context.Background(), windowKeyPrefix+fp)
	if err != nil || !ok || rec.State != StateCompleted || !strings.Contains(string(rec.Result), "ordered") {
		t.Errorf("window record %+v (found %v, %v), want completed with the committed result", rec, ok, err)
	}
}

// The client name comes from the request in protocol 2026-07-28, from the
// session (initialize) before it.
func TestSessionOf(t *testing.T) {
	ctx := sessionCtx("s-1", "from-session")
	if id, client := sessionOf(ctx); id != "s-1" || client != "from-session" {
		t.Errorf("legacy: %q %q", id, client)
	}
	ctx = server.WithRequestProtocolInfo(ctx, &server.RequestProtocolInfo{Modern: true, ClientInfo: &mcp.Implementation{Name: "from-request"}})
	if id, client := sessionOf(ctx); id != "s-1" || client != "from-request" {
		t.Errorf("modern: %q %q", id, client)
	}
	if id, client := sessionOf(context.Background()); id != "" || client != "" {
		t.Errorf("no session: %q %q", id, client)
	}
}

// A handler that panics (the server's recovery catches it) is still logged.
func TestWriteLoggedWhenHandlerPanics(t *testing.T) {
	wf := newWindowFixture(t, Options{}, time.Minute, ScopeNone)
	h := wf.mw.Wrap(func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) { panic("boom") })
	func() {
		defer func() { recover() }()
		h(context.Background(), request("", windowOrder))
	}()
	if got := wf.outcomes(t); !reflect.DeepEqual(got, []string{"executed"}) {
		t.Errorf("outcomes %v, want one executed", got)
	}
}
