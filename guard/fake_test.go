package guard

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// fakeCall is one Call the fake server received.
type fakeCall struct {
	Tool string
	Args map[string]any // a copy, as the guard passed it
	Opts mcpclient.CallOptions
	N    int // 1-based count of calls to this tool so far
}

// fakeServer is an in-process guard.Server that records every Call. Its
// answers come from respond (per tool), else a plain success.
type fakeServer struct {
	mu      sync.Mutex
	name    string
	session int
	tools   []mcp.Tool
	calls   []fakeCall
	respond map[string]func(fakeCall) mcpclient.Delivery
	arrived chan fakeCall // if set, every call is announced here before it is answered
	// restart makes the next Call find its session dead and send on a new
	// one, as mcpclient does when the server died between calls.
	restart  bool
	toolsErr error // tools/list fails (the server will not start)
}

func newFakeServer() *fakeServer {
	return &fakeServer{
		name: "demo-orders", session: 1,
		tools: []mcp.Tool{
			tool("create_order", ptr(false), "item", "quantity", "buyer", "idempotency_key"),
			tool("find_orders", ptr(true), "idempotency_key", "buyer"),
			tool("get_budget", ptr(true), "buyer"),
			tool("pay", nil, "amount", "card_number"),
		},
		respond: map[string]func(fakeCall) mcpclient.Delivery{},
	}
}

func (f *fakeServer) ServerInfo() mcpclient.ServerInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return mcpclient.ServerInfo{Name: f.name, Version: "1"}
}

func (f *fakeServer) Session() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.session
}

func (f *fakeServer) Tools(ctx context.Context) ([]mcp.Tool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.toolsErr != nil {
		return nil, f.toolsErr
	}
	return append([]mcp.Tool(nil), f.tools...), nil
}

func (f *fakeServer) Call(ctx context.Context, name string, args map[string]any, o mcpclient.CallOptions) mcpclient.Delivery {
	f.mu.Lock()
	if f.restart {
		f.session++
		f.restart = false
	}
	fc := fakeCall{Tool: name, Args: maps.Clone(args), Opts: o}
	for _, c := range f.calls {
		if c.Tool == name {
			fc.N++
		}
	}
	fc.N++
	f.calls = append(f.calls, fc)
	rpcID := fmt.Sprint(len(f.calls))
	respond, session, arrived := f.respond[name], f.session, f.arrived
	f.mu.Unlock()
	if o.OnSent != nil {
		o.OnSent(session, rpcID)
	}
	if arrived != nil {
		arrived <- fc
	}
	out := okOutcome(map[string]any{"ok": true})
	if respond != nil {
		out = respond(fc)
	}
	if out.Session == 0 && out.Kind != mcpclient.DeliveryNotSent {
		out.Session = session
	}
	return out
}

func (f *fakeServer) set(tool string, respond func(fakeCall) mcpclient.Delivery) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.respond[tool] = respond
}

func (f *fakeServer) setName(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.name = name
}

func (f *fakeServer) setReadOnly(toolName string, ro *bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.tools {
		if f.tools[i].Name == toolName {
			f.tools[i].Annotations.ReadOnlyHint = ro
		}
	}
}

// sent returns the calls received for a tool.
func (f *fakeServer) sent(tool string) []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeCall
	for _, c := range f.calls {
		if c.Tool == tool {
			out = append(out, c)
		}
	}
	return out
}

func okOutcome(structured any) mcpclient.Delivery {
	b, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": "ok"}}, "structuredContent": structured})
	return mcpclient.Delivery{Kind: mcpclient.DeliveryResult, ResultJSON: b}
}

func rawOutcome(raw string) mcpclient.Delivery {
	return mcpclient.Delivery{Kind: mcpclient.DeliveryResult, ResultJSON: json.RawMessage(raw)}
}

func lostOutcome() mcpclient.Delivery {
	return mcpclient.Delivery{Kind: mcpclient.DeliveryUnknown, Reason: mcpclient.ReasonIdleTimeout, Err: mcpclient.ErrIdleTimeout}
}

func always(out mcpclient.Delivery) func(fakeCall) mcpclient.Delivery {
	return func(fakeCall) mcpclient.Delivery { return out }
}

// harness is a guard on a real journal file and a fake server.
type harness struct {
	t    *testing.T
	path string
	j    *pending.Journal
	f    *fakeServer
	g    *Guard
}

func newHarness(t *testing.T, policy string) *harness {
	t.Helper()
	h := &harness{t: t, path: filepath.Join(t.TempDir(), "journal.db"), f: newFakeServer()}
	h.j = openJournal(t, h.path)
	h.g = New(h.j, h.f, Options{Policy: parsePolicy(t, policy), Operator: "tester",
		Keys: SeededKeys(bytes.NewReader(bytes.Repeat([]byte("seed"), 1<<12)))})
	return h
}

func parsePolicy(t *testing.T, text string) *Policy {
	t.Helper()
	if text == "" {
		return nil
	}
	p, err := ParsePolicy(text, "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func openJournal(t *testing.T, path string) *pending.Journal {
	t.Helper()
	j, err := pending.Open(context.Background(), path, pending.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// get reads a call back from the journal.
func (h *harness) get(id int64) pending.Call {
	h.t.Helper()
	c, err := h.j.Get(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

func (h *harness) calls() []pending.Call {
	h.t.Helper()
	cs, err := h.j.List(context.Background(), pending.Filter{})
	if err != nil {
		h.t.Fatal(err)
	}
	return cs
}

// writes is the number of create_order calls the server received.
func (h *harness) writes() int { return len(h.f.sent("create_order")) }

// call runs a guarded call with a hang bound far above anything a test
// does, so a bug shows up as a failure and not as a stuck test run.
func (h *harness) call(req Request) (Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return h.g.Call(ctx, req)
}

func order(quantity int) map[string]any {
	return map[string]any{"item": "widget", "quantity": quantity, "buyer": "alice"}
}

type eventRow struct{ Kind, Detail string }

// events reads a call's events straight from the file, as sqlite3 would.
func events(t *testing.T, path string, callID int64) []eventRow {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT kind, detail FROM events WHERE call_id = ? ORDER BY id", callID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []eventRow
	for rows.Next() {
		var e eventRow
		if err := rows.Scan(&e.Kind, &e.Detail); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func hasEvent(evs []eventRow, kind string) (eventRow, bool) {
	for _, e := range evs {
		if e.Kind == kind {
			return e, true
		}
	}
	return eventRow{}, false
}

func actions(c pending.Call) []pending.Action {
	var out []pending.Action
	for _, d := range c.Decisions {
		out = append(out, d.Action)
	}
	return out
}
