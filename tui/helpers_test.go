package tui

import (
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/spinner"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/muesli/termenv"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// Goldens are monochrome and independent of the terminal running the tests.
func init() {
	lipgloss.SetColorProfile(termenv.Ascii)
	lipgloss.SetHasDarkBackground(true)
}

// t0 is the fixed "now" of every test.
var t0 = time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)

// testClock is a clock tests move by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// fakeServer is an MCP server in memory (guard.Server): the tools below, and
// answers chosen per tool. It records every call it is sent.
type fakeServer struct {
	mu     sync.Mutex
	name   string
	tools  []mcp.Tool
	answer func(tool string, args map[string]any, o mcpclient.CallOptions, n int) mcpclient.Delivery
	// block, when set, is asked first with the call's context: a tool it
	// names waits for that context to end and is reported cancelled, as
	// mcpclient reports a request its caller cancelled.
	block func(tool string, n int) bool
	sent  []string // "tool key"
	seen  map[string]int
}

func (f *fakeServer) ServerInfo() mcpclient.ServerInfo { return mcpclient.ServerInfo{Name: f.name} }
func (f *fakeServer) Session() int                     { return 1 }
func (f *fakeServer) State() mcpclient.SessionState    { return mcpclient.StateRunning }
func (f *fakeServer) Tools(context.Context) ([]mcp.Tool, error) {
	return f.tools, nil
}

func (f *fakeServer) Call(ctx context.Context, tool string, args map[string]any, o mcpclient.CallOptions) mcpclient.Delivery {
	f.mu.Lock()
	f.sent = append(f.sent, tool+" "+o.Key)
	f.seen[tool+o.Key]++
	n := f.seen[tool+o.Key]
	block := f.block
	f.mu.Unlock()
	if block != nil && block(tool, n) {
		<-ctx.Done()
		return mcpclient.Delivery{Kind: mcpclient.DeliveryUnknown, Reason: mcpclient.ReasonCancelled, Session: 1,
			Err: fmt.Errorf("cancelled after the request was sent (%w); it may have taken effect", context.Cause(ctx))}
	}
	return f.answer(tool, args, o, n)
}

func (f *fakeServer) sends(tool string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, s := range f.sent {
		if strings.HasPrefix(s, tool+" ") {
			out = append(out, s)
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func testTools() []mcp.Tool {
	create := mcp.NewTool("create_order", mcp.WithDescription("Create an order and deduct it from the buyer's budget."),
		mcp.WithString("item", mcp.Required(), mcp.Enum("widget", "gadget", "gizmo")),
		mcp.WithNumber("quantity", mcp.Required(), mcp.Min(1)),
		mcp.WithString("buyer", mcp.Required()),
		mcp.WithString("idempotency_key"),
		mcp.WithReadOnlyHintAnnotation(false))
	email := mcp.NewTool("send_email", mcp.WithDescription("Send an email. No idempotency key."),
		mcp.WithString("to", mcp.Required()), mcp.WithString("subject", mcp.Required()))
	email.Annotations.ReadOnlyHint = ptr(false)
	find := mcp.NewTool("find_orders", mcp.WithDescription("Find orders by key or buyer."),
		mcp.WithString("idempotency_key"), mcp.WithString("buyer"), mcp.WithReadOnlyHintAnnotation(true))
	return []mcp.Tool{create, email, find}
}

// ordersAnswer: create_order and send_email get no answer the first time a
// key is sent (idle timeout, or a lost connection for buyer "bob"), and a
// replayed result after; find_orders finds the order.
func ordersAnswer(tool string, args map[string]any, o mcpclient.CallOptions, n int) mcpclient.Delivery {
	switch tool {
	case "find_orders":
		return mcpclient.Delivery{Kind: mcpclient.DeliveryResult, Session: 1,
			ResultJSON: json.RawMessage(`{"content":[{"type":"text","text":"1 order"}],"structuredContent":{"orders":[{"order_id":7,"item":"widget"}]}}`)}
	case "create_order", "send_email":
		if args["item"] == "gizmo" {
			return mcpclient.Delivery{Kind: mcpclient.DeliveryResult, Session: 1,
				ResultJSON: json.RawMessage(`{"content":[{"type":"text","text":"order 9"}],"structuredContent":{"order_id":9}}`)}
		}
		if n == 1 {
			reason := mcpclient.ReasonIdleTimeout
			if args["buyer"] == "bob" {
				reason = mcpclient.ReasonConnectionLost
			}
			return mcpclient.Delivery{Kind: mcpclient.DeliveryUnknown, Reason: reason, Session: 1, Err: mcpclient.ErrIdleTimeout}
		}
		return mcpclient.Delivery{Kind: mcpclient.DeliveryResult, Session: 1,
			ResultJSON: json.RawMessage(`{"content":[{"type":"text","text":"order 7"}],"structuredContent":{"order_id":7},"_meta":{"io.github.mcp-confirm/replayed":true}}`)}
	}
	return mcpclient.Delivery{Kind: mcpclient.DeliveryNotSent, Err: fmt.Errorf("no tool %s", tool)}
}

// testPolicy queries create_order with find_orders by key.
const testPolicy = `
[tools.create_order]
query_tool = "find_orders"
query_args = { idempotency_key = "{key}" }
`

// testIdentity is how the test guard says its server was reached.
var testIdentity = guard.ServerIdentity{Command: "orders-server", Args: []string{"--stdio"}}

// env is a real journal and a real guard on a fake server, with a fixed
// clock and seeded keys, so goldens are stable.
type env struct {
	t      testing.TB
	j      *pending.Journal
	g      *guard.Guard
	srv    *fakeServer
	clock  *testClock
	policy *guard.Policy
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvPolicy(t, testPolicy)
}

// newEnvPolicy is newEnv with the policy given as TOML.
func newEnvPolicy(t testing.TB, policy string) *env {
	t.Helper()
	clock := &testClock{t: t0}
	j, err := pending.Open(context.Background(), filepath.Join(t.TempDir(), "journal.db"), pending.Options{Now: clock.Now, Host: "host-a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	pol, err := guard.ParsePolicy(policy, "test policy")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fakeServer{name: "orders-test", tools: testTools(), answer: ordersAnswer, seen: map[string]int{}}
	var seed [32]byte
	copy(seed[:], "mcp-confirm tui golden key seed!")
	g := guard.New(j, srv, guard.Options{Policy: pol, Operator: "ops", Keys: guard.SeededKeys(mrand.NewChaCha8(seed)), Server: testIdentity})
	return &env{t: t, j: j, g: g, srv: srv, clock: clock, policy: pol}
}

// call makes a guarded call at t0-ago and returns its journal row.
func (e *env) call(ago time.Duration, tool string, args map[string]any) pending.Call {
	e.t.Helper()
	e.clock.Set(t0.Add(-ago))
	defer e.clock.Set(t0)
	res, err := e.g.Call(context.Background(), guard.Request{Tool: tool, Args: args})
	if err != nil {
		e.t.Fatalf("seed call %s: %v", tool, err)
	}
	return res.Call
}

// seed makes the journal of the goldens: three unknown calls of different
// ages and reasons (one with a key argument and a query proposal, one
// without a key argument, one after a lost connection) and a succeeded one.
func (e *env) seed() {
	e.call(42*time.Minute, "create_order", map[string]any{"item": "widget", "quantity": 2, "buyer": "alice"})
	e.call(17*time.Minute, "send_email", map[string]any{"to": "carol@example.com", "subject": "Your order"})
	e.call(5*time.Minute, "create_order", map[string]any{"item": "gadget", "quantity": 1, "buyer": "bob"})
	e.call(3*time.Minute, "create_order", map[string]any{"item": "gizmo", "quantity": 3, "buyer": "alice"})
}

func (e *env) options() Options {
	return Options{Journal: e.j, Engine: e.g, Server: e.srv, Policy: e.policy, Now: e.clock.Now, Home: filepath.Dir(e.j.Path()),
		Tick: time.Millisecond, Grace: time.Millisecond, WriteTimeout: 5 * time.Second}
}

// model is a console on env, sized, with its first loads done.
func (e *env) model(w, h int) Model { return e.modelWith(e.options(), w, h) }

// modelWith is model on options o (e.options, changed).
func (e *env) modelWith(o Options, w, h int) Model {
	e.t.Helper()
	m := New(o)
	m = step(e.t, m, tea.WindowSizeMsg{Width: w, Height: h})
	return settle(e.t, m, m.Init())
}

// step feeds one message and settles what it starts.
func step(t testing.TB, m Model, msg tea.Msg) Model {
	t.Helper()
	nm, cmd := m.Update(msg)
	return settle(t, nm.(Model), cmd)
}

// settle runs commands and feeds their messages back until none is left,
// as the program would, except the clock and spinner ticks (which would
// go on forever). Commands run one after another, so the order is fixed.
func settle(t testing.TB, m Model, cmd tea.Cmd) Model {
	t.Helper()
	queue := []tea.Cmd{cmd}
	for n := 0; len(queue) > 0; n++ {
		if n > 500 {
			t.Fatal("commands did not settle")
		}
		c := queue[0]
		queue = queue[1:]
		if c == nil {
			continue
		}
		msg := c()
		switch msg := msg.(type) {
		case nil, spinner.TickMsg:
			continue
		case tickMsg: // take the time, drop the next tick
			nm, _ := m.Update(msg)
			m = nm.(Model)
			continue
		case tea.BatchMsg:
			queue = append(queue, msg...)
			continue
		case tea.QuitMsg:
			continue
		}
		nm, next := m.Update(msg)
		m = nm.(Model)
		queue = append(queue, next)
	}
	return m
}

// press sends a binding's first key, so a rebind does not break the tests.
func press(t testing.TB, m Model, b key.Binding) Model {
	t.Helper()
	return step(t, m, keyMsg(b.Keys()[0]))
}

// keyMsg builds the tea.KeyMsg a terminal would deliver for a key name.
func keyMsg(k string) tea.KeyMsg {
	switch k {
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	case "tab":
		return tea.KeyMsg{Type: tea.KeyTab}
	case "shift+tab":
		return tea.KeyMsg{Type: tea.KeyShiftTab}
	case "up":
		return tea.KeyMsg{Type: tea.KeyUp}
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "left":
		return tea.KeyMsg{Type: tea.KeyLeft}
	case "right":
		return tea.KeyMsg{Type: tea.KeyRight}
	case "pgdown":
		return tea.KeyMsg{Type: tea.KeyPgDown}
	case "pgup":
		return tea.KeyMsg{Type: tea.KeyPgUp}
	case "home":
		return tea.KeyMsg{Type: tea.KeyHome}
	case "end":
		return tea.KeyMsg{Type: tea.KeyEnd}
	case "ctrl+c":
		return tea.KeyMsg{Type: tea.KeyCtrlC}
	case "ctrl+s":
		return tea.KeyMsg{Type: tea.KeyCtrlS}
	case "ctrl+r":
		return tea.KeyMsg{Type: tea.KeyCtrlR}
	case "backspace":
		return tea.KeyMsg{Type: tea.KeyBackspace}
	case " ":
		return tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
}

// typeText types runes one key at a time.
func typeText(t testing.TB, m Model, s string) Model {
	t.Helper()
	for _, r := range s {
		m = step(t, m, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
	return m
}

// get reads a call from the journal.
func (e *env) get(id int64) pending.Call {
	e.t.Helper()
	c, err := e.j.Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *env) find(state pending.State, tool string) pending.Call {
	e.t.Helper()
	cs, err := e.j.List(context.Background(), pending.Filter{States: []pending.State{state}, Tool: tool, OldestFirst: true, Limit: 1})
	if err != nil || len(cs) == 0 {
		e.t.Fatalf("no %s %s call (%v)", state, tool, err)
	}
	return cs[0]
}

// flat is a view as one line of words, box borders removed, so a test can
// look for a sentence that the dialog wrapped.
func flat(v string) string {
	v = strings.NewReplacer("│", " ", "╭", " ", "╮", " ", "╰", " ", "╯", " ", "─", " ").Replace(v)
	return strings.Join(strings.Fields(v), " ")
}

func lipglossWidth(s string) int { return ansi.StringWidth(s) }

// ackRecorder is the console's Engine (the real guard) with its Ack calls
// recorded, so a test can check which call the console acknowledged.
type ackRecorder struct {
	Engine
	mu   sync.Mutex
	acks []int64
}

func (r *ackRecorder) Ack(ctx context.Context, id int64, note string) error {
	r.mu.Lock()
	r.acks = append(r.acks, id)
	r.mu.Unlock()
	return r.Engine.Ack(ctx, id, note)
}

func (r *ackRecorder) acked() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.acks)
}

// settleLate answers c's unknown first attempt late, ago before t0, after
// its caller was told it was unknown: c succeeds late and holds identical
// calls until an operator acknowledges it.
func (e *env) settleLate(c pending.Call, ago time.Duration) pending.Call {
	e.t.Helper()
	e.clock.Set(t0.Add(-ago))
	defer e.clock.Set(t0)
	e.g.HandleLateResult(mcpclient.LateResult{Key: c.Key, Tool: c.Tool, Session: 1, Class: mcpclient.AnswerResult,
		ResultJSON: json.RawMessage(`{"content":[{"type":"text","text":"order 7"}],"structuredContent":{"order_id":7}}`)})
	got := e.get(c.ID)
	if !got.HoldsLate() || got.State != pending.StateSucceeded {
		e.t.Fatalf("call %d after a late answer: %s, late %v, acked %v", c.ID, got.State, got.LateSettledAt, got.AckedAt)
	}
	return got
}
