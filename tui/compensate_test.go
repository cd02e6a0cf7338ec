package tui

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// Compensation (issue 21, K) on the real demo server: the binary's
// demo-server command over stdio, whose cancel_order cancels the order
// created under a key and refunds the buyer, driven through Update as the
// other decision tests are, and checked in the journal and in the demo
// server's own database.

// compensatePolicy queries create_order by key and undoes it with the demo
// server's cancel_order, by the same key.
const compensatePolicy = `
[tools.create_order]
query_tool = "find_orders"
query_args = { idempotency_key = "{key}" }
cancel_tool = "cancel_order"
cancel_args = { order_key = "{key}" }
`

// demoEnv is a real journal and a real guard on a real demo server
// process, whose first create_order commits and never answers.
type demoEnv struct {
	t      *testing.T
	j      *pending.Journal
	g      *guard.Guard
	client *mcpclient.Client
	policy *guard.Policy
	demoDB string
}

func newDemoEnv(t *testing.T, policy string) *demoEnv {
	t.Helper()
	bin := buildBinary(t, "../cmd/mcp-confirm", "mcp-confirm")
	dir := t.TempDir()
	ctx := context.Background()
	j, err := pending.Open(ctx, filepath.Join(dir, "journal.db"), pending.Options{Host: "host-a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	pol, err := guard.ParsePolicy(policy, "test policy")
	if err != nil {
		t.Fatal(err)
	}
	demoDB := filepath.Join(dir, "demo.db")
	client := mcpclient.New(mcpclient.ServerSpec{Command: bin, Args: []string{"demo-server", "--db", demoDB, "--hang-after-commit", "1"}},
		mcpclient.Options{StopGrace: 200 * time.Millisecond})
	t.Cleanup(func() { client.Close() })
	// A short idle clock: the hung create_order is unknown in a moment.
	g := guard.New(j, client, guard.Options{Policy: pol, Operator: "ops", WriteTimeout: 300 * time.Millisecond})
	return &demoEnv{t: t, j: j, g: g, client: client, policy: pol, demoDB: demoDB}
}

// order makes a guarded create_order from outside the console, as a
// script would, and returns its journal row.
func (e *demoEnv) order(buyer string, quantity int) pending.Call {
	e.t.Helper()
	res, err := e.g.Call(context.Background(), guard.Request{Tool: "create_order", Args: map[string]any{"item": "widget", "quantity": quantity, "buyer": buyer}})
	if err != nil && res.Call.ID == 0 {
		e.t.Fatalf("create_order for %s: %v", buyer, err)
	}
	return res.Call
}

func (e *demoEnv) model(w, h int) Model {
	e.t.Helper()
	m := New(Options{Journal: e.j, Engine: e.g, Server: e.client, Policy: e.policy, Tick: time.Millisecond, Grace: time.Millisecond, WriteTimeout: 5 * time.Second})
	m = step(e.t, m, tea.WindowSizeMsg{Width: w, Height: h})
	m = settle(e.t, m, m.Init())
	if !m.sh.toolsLoaded {
		e.t.Fatalf("the demo server's tools were not listed: %v", m.sh.toolsErr)
	}
	return m
}

func (e *demoEnv) get(id int64) pending.Call {
	e.t.Helper()
	c, err := e.j.Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// calls is every call in the journal, oldest first.
func (e *demoEnv) calls() []pending.Call {
	e.t.Helper()
	cs, err := e.j.List(context.Background(), pending.Filter{OldestFirst: true})
	if err != nil {
		e.t.Fatal(err)
	}
	return cs
}

// demoOrder is an order as the demo server's database holds it, and the
// buyer's budget left.
type demoOrder struct {
	Cancelled bool
	Budget    int
}

func (e *demoEnv) demoOrder(key, buyer string) demoOrder {
	e.t.Helper()
	db, err := sql.Open("sqlite", e.demoDB+"?_pragma=query_only(1)")
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	var o demoOrder
	var cancelled sql.NullString
	if err := db.QueryRow("SELECT cancelled_at FROM orders WHERE idempotency_key = ?", key).Scan(&cancelled); err != nil {
		e.t.Fatalf("the demo server's order under %s: %v", key, err)
	}
	if err := db.QueryRow("SELECT budget_left FROM budgets WHERE buyer = ?", buyer).Scan(&o.Budget); err != nil {
		e.t.Fatal(err)
	}
	o.Cancelled = cancelled.Valid
	return o
}

// openDetailOf opens the detail of call id from the All tab.
func openDetailOf(t *testing.T, m Model, id int64) Model {
	t.Helper()
	if m.active != screenList {
		m = press(t, m, m.detail.keys.Back)
	}
	for tabs[m.list.tab].State != "" {
		m = press(t, m, m.list.keys.NextTab)
	}
	m = selectCall(t, m, func(c pending.Call) bool { return c.ID == id })
	m = press(t, m, m.list.keys.Detail)
	if m.active != screenDetail || !m.detail.loaded || m.detail.call.ID != id {
		t.Fatalf("the detail of call %d is not open", id)
	}
	return m
}

// An unknown create_order is compensated from the list: K opens a dialog
// that names the call and shows the cancel it will send (cancel_order with
// the order's key), a new write with its own key; nothing is sent until y.
// Then the cancel is a call of its own, linked both ways, the demo server
// has cancelled the order and refunded alice, and the status line says so.
func TestCompensateFromTheListOnTheDemoServer(t *testing.T) {
	e := newDemoEnv(t, compensatePolicy)
	orig := e.order("alice", 4)
	if orig.State != pending.StateUnknown {
		t.Fatalf("the order is %s, want unknown (its answer is never sent)", orig.State)
	}
	before := e.demoOrder(orig.Key, "alice")
	m := e.model(100, 30)
	c, _ := m.list.Selected()
	if c.ID != orig.ID || !m.list.keys.Compensate.Enabled() || !strings.Contains(m.View(), "K compensate") {
		t.Fatalf("selected call %d, K enabled %v; want call %d with K offered:\n%s", c.ID, m.list.keys.Compensate.Enabled(), orig.ID, m.View())
	}

	// K reads the call and its cancels so far (a journal read, in a
	// command), then opens the dialog; nothing is sent.
	nm, cmd := m.Update(keyMsg(m.list.keys.Compensate.Keys()[0]))
	m = nm.(Model)
	if cmd == nil || m.dialog != nil {
		t.Fatalf("K must read the call first (cmd=%v dialog=%v)", cmd != nil, m.dialog != nil)
	}
	m = settle(t, m, cmd)
	if m.dialog == nil || len(e.calls()) != 1 {
		t.Fatalf("after the read: dialog %v, %d calls; want the dialog and nothing sent (message %q)", m.dialog != nil, len(e.calls()), m.message)
	}
	v := flat(m.dialog.View(76))
	for _, want := range []string{
		fmt.Sprintf("Compensate call %d (create_order) with cancel_order?", orig.ID),
		"This sends a new write to the server: cancel_order, with its own idempotency key",
		fmt.Sprintf("linked to call %d", orig.ID),
		fmt.Sprintf(`args {"order_key": "%s"}`, orig.Key),
		fmt.Sprintf("a new one, not call %d's; sent as idempotency_key", orig.ID),
		fmt.Sprintf("Call %d stays unknown", orig.ID),
		"note (optional)",
	} {
		if !strings.Contains(v, want) {
			t.Errorf("the dialog lacks %q:\n%s", want, m.View())
		}
	}
	m = typeText(t, m, "customer cancelled; no way to know if it went through") // y and n are letters here
	m = step(t, m, keyMsg("enter"))                                             // done with the note: the buttons, on No
	if m.dialog == nil || len(e.calls()) != 1 || e.demoOrder(orig.Key, "alice").Cancelled {
		t.Fatal("something was sent before y")
	}
	// y closes the dialog and starts the cancel as a command: the console
	// keeps drawing and taking keys while it runs.
	nm, cmd = m.Update(keyMsg(defaultDialogKeys().Yes.Keys()[0]))
	m = nm.(Model)
	if m.dialog != nil || cmd == nil {
		t.Fatalf("y: dialog open %v, command %v; want the dialog closed and the cancel started as a command", m.dialog != nil, cmd != nil)
	}
	if !m.busy || !strings.HasPrefix(m.message, fmt.Sprintf("compensating call %d (create_order key %s): sending cancel_order…", orig.ID, keyTail(orig.Key))) ||
		!m.writeInFlight() || !strings.Contains(m.View(), "compensating call") {
		t.Fatalf("while the cancel runs: busy %v, in flight %v, message %q", m.busy, m.writeInFlight(), m.message)
	}
	m = step(t, m, keyMsg("down")) // a key meanwhile is handled at once
	m = settle(t, m, cmd)

	calls := e.calls()
	if len(calls) != 2 {
		t.Fatalf("%d calls in the journal, want the order and its cancel", len(calls))
	}
	cancel := e.get(calls[1].ID)
	if cancel.Tool != "cancel_order" || cancel.Kind != pending.KindWrite || cancel.State != pending.StateSucceeded ||
		cancel.Compensates != orig.ID || cancel.Key == orig.Key || cancel.Key == "" {
		t.Fatalf("the cancel: %s %s %s, compensates %d, key %q; want a succeeded write of its own linked to %d", cancel.Tool, cancel.Kind, cancel.State, cancel.Compensates, cancel.Key, orig.ID)
	}
	got := e.get(orig.ID)
	d := got.Decisions[len(got.Decisions)-1]
	if got.State != pending.StateUnknown || len(got.CompensatedBy) != 1 || got.CompensatedBy[0] != cancel.ID ||
		d.Action != pending.ActionCompensate || d.Operator != "ops" || !strings.HasPrefix(d.Note, "customer cancelled") {
		t.Fatalf("the order after: %s, compensated by %v, last decision %+v", got.State, got.CompensatedBy, d)
	}
	after := e.demoOrder(orig.Key, "alice")
	if !after.Cancelled || after.Budget != before.Budget+4*25 {
		t.Fatalf("the demo server: cancelled %v, budget %d (was %d); want the order cancelled and 100 refunded", after.Cancelled, after.Budget, before.Budget)
	}
	if want := fmt.Sprintf("call %d (cancel_order) succeeded: call %d is compensated", cancel.ID, orig.ID); m.message != want || m.messageErr {
		t.Fatalf("message = %q, want %q", m.message, want)
	}
	if m.list.cnt[pending.StateSucceeded] != 1 || len(m.compensating) != 0 {
		t.Fatalf("the list was not refreshed (counts %v) or the cancel is still in flight (%v)", m.list.cnt, m.compensating)
	}
}

// The detail shows the link on both calls. K there on a call already
// undone (its cancel succeeded) says so and sends nothing: the guard
// refuses it too.
func TestCompensateDetailShowsTheLinksOnTheDemoServer(t *testing.T) {
	e := newDemoEnv(t, compensatePolicy)
	orig := e.order("alice", 2)
	m := e.model(110, 40)
	m = press(t, m, m.list.keys.Compensate)
	m = step(t, m, keyMsg("enter"))
	m = press(t, m, defaultDialogKeys().Yes)
	first := e.calls()[1]

	m = openDetailOf(t, m, orig.ID)
	if v := m.View(); !strings.Contains(v, fmt.Sprintf("compensated by call %d", first.ID)) {
		t.Errorf("the order's detail does not name its cancel:\n%s", v)
	}
	if m.detail.keys.Compensate.Enabled() {
		t.Errorf("K is still offered on call %d, undone by call %d", orig.ID, first.ID)
	}
	m = press(t, m, m.detail.keys.Compensate)
	want := fmt.Sprintf("call %d (create_order) was already undone by call %d; there is nothing more to compensate", orig.ID, first.ID)
	if m.dialog != nil || m.message != want || len(e.calls()) != 2 {
		t.Fatalf("K on an undone call: dialog %v, %d calls, message %q; want no dialog, nothing sent, %q", m.dialog != nil, len(e.calls()), m.message, want)
	}

	m = openDetailOf(t, m, first.ID)
	if v := m.View(); !strings.Contains(v, fmt.Sprintf("compensates call %d", orig.ID)) {
		t.Errorf("the cancel's detail does not name the call it undoes:\n%s", v)
	}
}

// A cancel that fails (here the policy sends the wrong key, so the demo
// server finds no order) says so, and the call is not compensated. K again,
// from the detail, says there was a cancel that did not take effect and
// sends one more, listed on the call with the first.
func TestCompensateAgainAfterAFailedCancelOnTheDemoServer(t *testing.T) {
	e := newDemoEnv(t, strings.Replace(compensatePolicy, `order_key = "{key}"`, `order_key = "{arg.buyer}"`, 1))
	orig := e.order("alice", 2)
	m := e.model(110, 40)
	m = press(t, m, m.list.keys.Compensate)
	m = step(t, m, keyMsg("enter"))
	m = press(t, m, defaultDialogKeys().Yes)
	first := e.get(e.calls()[1].ID)
	want := fmt.Sprintf("call %d (cancel_order) failed: no order was created under key alice; nothing was cancelled; call %d is not compensated", first.ID, orig.ID)
	if first.State != pending.StateFailed || first.Compensates != orig.ID || m.message != want || !m.messageErr {
		t.Fatalf("the cancel: %s, compensates %d; message %q, want %q", first.State, first.Compensates, m.message, want)
	}
	if e.demoOrder(orig.Key, "alice").Cancelled {
		t.Fatal("the demo server cancelled the order")
	}

	m = openDetailOf(t, m, orig.ID)
	m = press(t, m, m.detail.keys.Compensate)
	if m.dialog == nil {
		t.Fatalf("K did not open the dialog; message %q", m.message)
	}
	if v := flat(m.dialog.View(76)); !strings.Contains(v, fmt.Sprintf("Call %d has had 1 cancel, none of which took effect (call %d failed): this sends one more.", orig.ID, first.ID)) {
		t.Fatalf("the dialog does not say there was a cancel before (message %q):\n%s", m.message, m.View())
	}
	m = step(t, m, keyMsg("enter"))
	m = press(t, m, defaultDialogKeys().Yes)
	calls := e.calls()
	if len(calls) != 3 || calls[2].Tool != "cancel_order" {
		t.Fatalf("%d calls, want the order and two cancels; message %q", len(calls), m.message)
	}
	if v := m.View(); !strings.Contains(v, fmt.Sprintf("compensated by call %d, %d", first.ID, calls[2].ID)) {
		t.Errorf("the detail was not reloaded with both cancels:\n%s", v)
	}
}

// A cancel whose own outcome is unknown must be decided first: K says so,
// as the guard would hold an identical cancel.
func TestCompensateWhileTheCancelIsUnknownSaysWhy(t *testing.T) {
	e := newEnvPolicy(t, fakeCompensatePolicy)
	e.withCancelTool(func(map[string]any) mcpclient.Delivery {
		return mcpclient.Delivery{Kind: mcpclient.DeliveryUnknown, Reason: mcpclient.ReasonIdleTimeout, Session: 1, Err: mcpclient.ErrIdleTimeout}
	})
	e.seed()
	m := e.model(100, 30)
	c, _ := m.list.Selected()
	m = press(t, m, m.list.keys.Compensate)
	m = step(t, m, keyMsg("enter"))
	m = press(t, m, defaultDialogKeys().Yes)
	if !strings.Contains(m.message, "(cancel_order) unknown (idle timeout): whether call 1 is compensated is not known") || !m.messageWarn {
		t.Fatalf("message = %q", m.message)
	}
	sends := len(e.srv.sends("cancel_order"))
	m = press(t, m, m.list.keys.Compensate)
	want := fmt.Sprintf("call %d (create_order): its cancel, call 5 (cancel_order), is unknown; decide that one first", c.ID)
	if m.dialog != nil || !strings.HasPrefix(m.message, want) || len(e.srv.sends("cancel_order")) != sends {
		t.Fatalf("K with the cancel unknown: dialog %v, message %q; want %q…", m.dialog != nil, m.message, want)
	}
}

// The dialog's safe answers send nothing and record nothing.
func TestCompensateDialogSafeAnswersOnTheDemoServer(t *testing.T) {
	e := newDemoEnv(t, compensatePolicy)
	orig := e.order("alice", 1)
	m := e.model(100, 30)
	decisions := len(e.get(orig.ID).Decisions)
	dk := defaultDialogKeys()
	for _, keys := range [][]string{
		{"esc"},            // in the note field
		{"enter", "enter"}, // done with the note, then No
		{"enter", "n"},     // done with the note, then n
		{"enter", "esc"},   // done with the note, then esc
		{"enter", dk.Toggle.Keys()[0], dk.Toggle.Keys()[0], "enter"}, // Yes, back to No, enter
	} {
		m = press(t, m, m.list.keys.Compensate)
		if m.dialog == nil {
			t.Fatal("K did not open the dialog")
		}
		for _, k := range keys {
			m = step(t, m, keyMsg(k))
		}
		if m.dialog != nil {
			t.Fatalf("%v: the dialog is still open", keys)
		}
		if n := len(e.calls()); n != 1 || len(e.get(orig.ID).Decisions) != decisions || e.demoOrder(orig.Key, "alice").Cancelled {
			t.Fatalf("%v: %d calls, decisions %v, the order cancelled %v; want nothing done", keys, n, e.get(orig.ID).Decisions, e.demoOrder(orig.Key, "alice").Cancelled)
		}
	}
}

// Where K does not apply it answers in one line why, opens no dialog and
// sends nothing: a read, a call that failed, one in flight, a tool with no
// cancel_tool in the policy (the cancel itself), a cancel_tool the server
// does not list or lists as a read.
func TestCompensateNotApplicableSaysWhyOnTheDemoServer(t *testing.T) {
	e := newDemoEnv(t, compensatePolicy)
	e.order("alice", 1)         // unknown: its cancel is the call with no cancel_tool below
	failed := e.order("zed", 1) // no such buyer: the demo server refuses it
	if failed.State != pending.StateFailed {
		t.Fatalf("the order for zed is %s, want failed", failed.State)
	}
	ctx := context.Background()
	read, err := e.j.RecordIntent(ctx, pending.Intent{Server: "mcp-confirm-demo", Tool: "find_orders", Kind: pending.KindRead, KindSource: pending.KindFromAnnotation,
		Key: "01JREADREADREADREADREAD001", Args: []byte(`{"buyer":"alice"}`), Fingerprint: "f-read", Session: 1})
	if err != nil {
		t.Fatal(err)
	}
	inFlight, err := e.j.RecordIntent(ctx, pending.Intent{Server: "mcp-confirm-demo", Tool: "create_order", Kind: pending.KindWrite, KindSource: pending.KindFromAnnotation,
		Key: "01JFLIGHTFLIGHTFLIGHTFL001", Args: []byte(`{"item":"gadget","quantity":1,"buyer":"bob"}`), Fingerprint: "f-flight", Session: 1})
	if err != nil {
		t.Fatal(err)
	}
	m := e.model(140, 30)
	m = press(t, m, m.list.keys.Compensate)
	m = step(t, m, keyMsg("enter"))
	m = press(t, m, defaultDialogKeys().Yes) // the cancel of the unknown order: succeeded
	cancel := e.calls()[len(e.calls())-1]
	if cancel.Tool != "cancel_order" || cancel.State != pending.StateSucceeded {
		t.Fatalf("the cancel: %s %s", cancel.Tool, cancel.State)
	}

	for _, tc := range []struct {
		call pending.Call
		want string
	}{
		{read, fmt.Sprintf("call %d (find_orders) is a read; it changed nothing, there is nothing to compensate", read.ID)},
		{failed, fmt.Sprintf("call %d (create_order) failed: the server said it did nothing, there is nothing to compensate", failed.ID)},
		{inFlight, fmt.Sprintf("call %d (create_order) is in flight; wait for its outcome before compensating it", inFlight.ID)},
		{cancel, fmt.Sprintf("call %d (cancel_order) cannot be compensated: the policy names no cancel_tool for cancel_order (set cancel_tool and cancel_args under [tools.cancel_order])", cancel.ID)},
	} {
		m = openDetailOf(t, m, tc.call.ID) // the All tab holds every state
		m = press(t, m, m.detail.keys.Back)
		if m.list.keys.Compensate.Enabled() || strings.Contains(m.View(), "K compensate") {
			t.Errorf("call %d: K is offered:\n%s", tc.call.ID, m.View())
		}
		calls := len(e.calls())
		m = press(t, m, m.list.keys.Compensate)
		if m.dialog != nil || len(e.calls()) != calls {
			t.Fatalf("call %d: K opened a dialog or sent something", tc.call.ID)
		}
		if m.message != tc.want || !m.messageErr {
			t.Errorf("call %d: message = %q, want %q", tc.call.ID, m.message, tc.want)
		}
		if v := m.View(); !strings.Contains(flat(v), flat(tc.want)) {
			t.Errorf("call %d: the reason is not on screen:\n%s", tc.call.ID, v)
		}
		m = press(t, m, m.list.keys.Down) // the reason answers one key
		if m.message == tc.want {
			t.Errorf("call %d: the reason outlived the next key", tc.call.ID)
		}
	}

	// The policy names a cancel_tool the server does not list, or one it
	// lists as a read.
	for _, tc := range []struct{ cancelTool, want string }{
		{"refund_order", "its cancel_tool refund_order is not among the server's tools"},
		{"find_orders", "its cancel_tool find_orders is a read here; a compensation must be a write"},
	} {
		e := newDemoEnv(t, "[tools.create_order]\ncancel_tool = \""+tc.cancelTool+"\"\ncancel_args = { idempotency_key = \"{key}\" }\n")
		c := e.order("alice", 1)
		m := e.model(140, 30)
		m = press(t, m, m.list.keys.Compensate)
		if m.dialog != nil || !strings.HasPrefix(m.message, fmt.Sprintf("call %d (create_order) cannot be compensated: ", c.ID)) || !strings.Contains(m.message, tc.want) {
			t.Errorf("cancel_tool %s: dialog %v, message %q; want %q", tc.cancelTool, m.dialog != nil, m.message, tc.want)
		}
		if n := len(e.calls()); n != 1 || len(e.get(c.ID).Decisions) != 0 {
			t.Errorf("cancel_tool %s: %d calls and decisions %v after K", tc.cancelTool, n, e.get(c.ID).Decisions)
		}
	}
}

// With no call selected, K says so, as the other decision keys do.
func TestCompensateWithNoCallSaysWhy(t *testing.T) {
	e := newEnvPolicy(t, fakeCompensatePolicy)
	m := e.model(80, 24)
	m = press(t, m, m.list.keys.Compensate)
	if m.dialog != nil || !strings.HasPrefix(m.message, "no call selected") {
		t.Fatalf("dialog %v, message %q", m.dialog != nil, m.message)
	}
}

// The decision keys follow the selection as the cursor moves, not only
// when a window of the list is loaded: in the All tab, r on an unknown row
// below a succeeded one opens the retry dialog, and K's availability
// changes from row to row.
func TestDecisionKeysFollowTheCursor(t *testing.T) {
	e := newEnvPolicy(t, fakeCompensatePolicy)
	e.seed()
	m := e.model(100, 30)
	m = step(t, m, keyMsg("shift+tab")) // all, newest first: the succeeded gizmo order on top
	if c, _ := m.list.Selected(); c.State != pending.StateSucceeded || m.list.keys.Retry.Enabled() {
		t.Fatalf("top row %d %s, retry enabled %v", c.ID, c.State, m.list.keys.Retry.Enabled())
	}
	m = press(t, m, m.list.keys.Down)
	if c, _ := m.list.Selected(); c.State != pending.StateUnknown || !m.list.keys.Retry.Enabled() {
		t.Fatalf("second row %d %s: retry enabled %v, want the binding to follow the cursor", c.ID, c.State, m.list.keys.Retry.Enabled())
	}
	m = press(t, m, m.list.keys.Retry)
	if _, ok := m.dialog.(*confirmDialog); !ok {
		t.Fatalf("r on an unknown row did not open the retry dialog; message %q", m.message)
	}
	m = step(t, m, keyMsg("esc"))
	m = selectTool(t, m, "send_email") // no cancel_tool for it
	if m.list.keys.Compensate.Enabled() {
		t.Fatal("K stays enabled on a call with no cancel_tool")
	}
}

// fakeCompensatePolicy is the goldens' policy (testPolicy) with
// create_order undone by cancel_order.
const fakeCompensatePolicy = testPolicy + `cancel_tool = "cancel_order"
cancel_args = { order_key = "{key}", buyer = "{arg.buyer}" }
`

// withCancelTool adds the demo server's cancel_order to the fake server,
// answered by answer.
func (e *env) withCancelTool(answer func(args map[string]any) mcpclient.Delivery) {
	cancel := mcp.NewTool("cancel_order", mcp.WithDescription("Cancel the order created under a key."),
		mcp.WithString("order_key", mcp.Required()), mcp.WithString("buyer"), mcp.WithString("idempotency_key"),
		mcp.WithReadOnlyHintAnnotation(false))
	e.srv.tools = append(e.srv.tools, cancel)
	next := e.srv.answer
	e.srv.answer = func(tool string, args map[string]any, o mcpclient.CallOptions, n int) mcpclient.Delivery {
		if tool == "cancel_order" {
			return answer(args)
		}
		return next(tool, args, o, n)
	}
}

// The dialog and the detail lines as pictures (the goldens' fake server,
// fixed clock and keys): the dialog over the list at 80×24 and 60×20, the
// original's detail and its cancel's after a compensation.
func TestGoldenCompensate(t *testing.T) {
	for _, tc := range []struct {
		name string
		w, h int
		keys []string
	}{
		{"dialog_80x24", 80, 24, []string{"K"}},
		{"dialog_60x20", 60, 20, []string{"K"}},
		{"reason_80x24", 80, 24, []string{"j", "K"}},
		{"done_80x24", 80, 24, []string{"K", "enter", "y"}},
		{"detail_original_100x30", 100, 30, []string{"K", "enter", "y", "enter"}},
		{"detail_cancel_100x30", 100, 30, []string{"K", "enter", "y", "shift+tab", "enter"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvPolicy(t, fakeCompensatePolicy)
			e.withCancelTool(func(map[string]any) mcpclient.Delivery {
				return mcpclient.Delivery{Kind: mcpclient.DeliveryResult, Session: 1,
					ResultJSON: json.RawMessage(`{"content":[{"type":"text","text":"cancelled"}],"structuredContent":{"cancelled":true,"refunded":50}}`)}
			})
			e.seed()
			m := e.model(tc.w, tc.h)
			for _, k := range tc.keys {
				m = step(t, m, keyMsg(k))
			}
			v := m.View()
			checkFits(t, v, tc.w, tc.h)
			golden.RequireEqual(t, v)
		})
	}
}

// What the server says of a cancel reaches the screen inert, and so do the
// call's arguments that the cancel's are made of.
func TestCompensateShowsServerTextInert(t *testing.T) {
	e := newEnvPolicy(t, fakeCompensatePolicy)
	e.withCancelTool(func(map[string]any) mcpclient.Delivery {
		return mcpclient.Delivery{Kind: mcpclient.DeliveryResult, Session: 1,
			ResultJSON: json.RawMessage(`{"content":[{"type":"text","text":"no\u001b]52;c;aGk=\u0007 such\u001b[2J order\u202e"}],"isError":true}`)}
	})
	e.call(time.Minute, "create_order", map[string]any{"item": "widget", "quantity": 1, "buyer": "eve\x1b]0;pwned\x07\u202e"})
	m := e.model(120, 30)
	m = press(t, m, m.list.keys.Compensate)
	if m.dialog == nil {
		t.Fatalf("no dialog; message %q", m.message)
	}
	assertInert(t, "compensate dialog", m.View())
	m = step(t, m, keyMsg("enter"))
	m = press(t, m, defaultDialogKeys().Yes)
	if !strings.Contains(m.message, "failed: ") || !strings.Contains(m.message, "no such order") {
		t.Fatalf("message = %q", m.message)
	}
	assertInert(t, "status line after the cancel", m.View())
	assertInert(t, "status line after the cancel (message)", m.message)
	if s := e.srv.sends("cancel_order"); len(s) != 1 {
		t.Fatalf("cancel_order sent %v, want once", s)
	}
}

// The pop-up for a call that has just become unknown offers K where the
// policy names a cancel_tool for its tool, and K there leads to the same
// compensate dialog as on the list (nothing sent before it). Without a
// cancel_tool the pop-up has no K line and its help no K.
func TestUnknownPopUpOffersCompensateOnTheDemoServer(t *testing.T) {
	e := newDemoEnv(t, compensatePolicy)
	orig := e.order("alice", 1)
	m := e.model(100, 30)
	d := newUnknownDialog(m.sh, m.nextDialogID(), orig)
	d.Arm()
	v := flat(d.View(90))
	if !strings.Contains(v, "K compensate: send cancel_order to undo it") || !hasKey(d.ShortHelp(), "K") {
		t.Fatalf("the pop-up does not offer K for an order the policy can cancel:\n%s", v)
	}
	m.dialog = d
	nm, cmd := m.Update(keyMsg("K"))
	m = settle(t, nm.(Model), cmd)
	if _, ok := m.dialog.(*compensateDialog); !ok || len(e.calls()) != 1 {
		t.Fatalf("K in the pop-up: dialog %T, %d calls; want the compensate dialog and nothing sent (message %q)", m.dialog, len(e.calls()), m.message)
	}

	plain := newDemoEnv(t, "")
	other := plain.order("bob", 1)
	pm := plain.model(100, 30)
	pd := newUnknownDialog(pm.sh, pm.nextDialogID(), other)
	if v := flat(pd.View(90)); strings.Contains(v, "compensate") || hasKey(pd.ShortHelp(), "K") {
		t.Fatalf("the pop-up offers K with no cancel_tool in the policy:\n%s", v)
	}
}

func hasKey(bs []key.Binding, k string) bool {
	for _, b := range bs {
		if b.Help().Key == k {
			return true
		}
	}
	return false
}
