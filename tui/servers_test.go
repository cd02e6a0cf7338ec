package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// fakeServers is Options.Servers over named guards of one journal.
type fakeServers struct {
	names []string
	g     map[string]*guard.Guard
	srv   map[string]*fakeServer
}

func (f fakeServers) Names() []string { return f.names }
func (f fakeServers) Engine(n string) Engine {
	if g, ok := f.g[n]; ok {
		return g
	}
	return nil
}
func (f fakeServers) Status(n string) ServerStatus {
	if s, ok := f.srv[n]; ok {
		return s
	}
	return nil
}

// overServers is o made a console over several servers: e's own, named
// first, then others, each guarded on e's journal, in that order.
func (e *env) overServers(o Options, first string, others ...*fakeServer) Options {
	fs := fakeServers{names: []string{first}, g: map[string]*guard.Guard{first: e.g}, srv: map[string]*fakeServer{first: e.srv}}
	for _, s := range others {
		fs.names = append(fs.names, s.name)
		fs.g[s.name] = guard.New(e.j, s, guard.Options{Policy: e.policy, Operator: "ops"})
		fs.srv[s.name] = s
	}
	o.Server, o.Servers = nil, fs
	return o
}

// Over several servers: nothing is listed before a server is picked, c
// picks the server first, its tools are that server's, and the status bar
// names every server.
func TestConsoleOverSeveralServers(t *testing.T) {
	e := newEnv(t)
	e.seed()
	other := &fakeServer{name: "billing", tools: testTools()[:1], answer: ordersAnswer, seen: map[string]int{}}
	o := e.overServers(e.options(), "shop", other)
	m := e.modelWith(o, 160, 40)
	if m.sh.toolsLoaded || len(m.sh.tools) > 0 {
		t.Fatalf("tools listed before a server was picked: %d", len(m.sh.tools))
	}
	if bar := flat(m.statusBar()); !strings.Contains(bar, "2 servers: shop running") || !strings.Contains(bar, "billing running") {
		t.Errorf("status bar: %q", bar)
	}
	m = press(t, m, m.list.keys.NewCall)
	if got := m.activeScreen().Title(); got != "new call: pick a server" {
		t.Fatalf("title %q after c", got)
	}
	if v := flat(m.View()); !strings.Contains(v, "shop") || !strings.Contains(v, "billing") {
		t.Errorf("picker does not list both servers:\n%s", v)
	}
	m = step(t, m, keyMsg("down"))
	m = step(t, m, keyMsg("enter"))
	if m.sh.picked != "billing" || !m.sh.toolsLoaded || len(m.sh.tools) != 1 {
		t.Fatalf("picked %q, loaded %v, %d tools; want billing's 1 tool", m.sh.picked, m.sh.toolsLoaded, len(m.sh.tools))
	}
	if m.sh.newCallEngine() != o.Servers.Engine("billing") {
		t.Error("new calls would not go to the picked server's engine")
	}
	m = step(t, m, keyMsg("esc"))
	if m.sh.picked != "" || m.activeScreen().Title() != "new call: pick a server" {
		t.Errorf("esc from the tools did not go back to the servers: picked %q", m.sh.picked)
	}
}

func TestParseFilter(t *testing.T) {
	for in, want := range map[string][2]string{
		"create_order":                     {"create_order", ""},
		"server:shop":                      {"", "shop"},
		"server:shop create_order":         {"create_order", "shop"},
		"tool:send_email server:billing  ": {"send_email", "billing"},
		"":                                 {"", ""},
	} {
		tool, server := parseFilter(in)
		if tool != want[0] || server != want[1] {
			t.Errorf("parseFilter(%q) = %q, %q; want %q, %q", in, tool, server, want[0], want[1])
		}
	}
}

// Over several servers, a call's retry is known safe only by the tools of
// its own server: another server's tool of the same name, with a key
// argument, says nothing about it.
func TestRetrySafeOnlyByTheCallsOwnServer(t *testing.T) {
	e := newEnv(t)
	e.seed()
	other := &fakeServer{name: "billing", tools: testTools(), answer: ordersAnswer, seen: map[string]int{}}
	m := e.modelWith(e.overServers(e.options(), "orders-test", other), 160, 40)
	c := e.find(pending.StateUnknown, "create_order")
	if c.Server != "orders-test" {
		t.Fatalf("seeded call on %q", c.Server)
	}
	m = settle(t, m, m.sh.pick("billing"))
	if !m.sh.toolsLoaded {
		t.Fatal("billing's tools not listed")
	}
	if retrySafe(m.sh, c) {
		t.Error("billing's create_order key argument made a retry of a call on orders-test look safe")
	}
	m = settle(t, m, m.sh.pick("orders-test"))
	if !retrySafe(m.sh, c) {
		t.Error("with its own server's tools listed, the call's retry is not known safe")
	}
}

// callToolsEngine is the guard with the fleet's ToolsOfCall: it lists the
// tools of a call's own server (or fails to), and counts the asks.
type callToolsEngine struct {
	*guard.Guard
	tools []mcp.Tool
	err   error
	asked int
}

func (c *callToolsEngine) ToolsOfCall(ctx context.Context, _ pending.Call) ([]mcp.Tool, error) {
	c.asked++
	return c.tools, c.err
}

// Over several servers with no server picked, r on a call first has the
// call's own server list its tools (once), then opens the retry dialog
// judged by them: safe, no "retry" to type. When that listing fails the
// dialog opens all the same, with the server's tools unknown, so a typed
// "retry" is asked for; it is not asked again.
func TestRetryDialogWaitsForTheCallsOwnServerTools(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("listing fails %v", fail), func(t *testing.T) {
			e := newEnv(t)
			e.seed()
			ct := &callToolsEngine{Guard: e.g, tools: testTools()}
			if fail {
				ct.tools, ct.err = nil, errors.New("server gone")
			}
			o := e.overServers(e.options(), "orders-test")
			o.Engine = ct
			m := e.modelWith(o, 160, 40)
			c := e.find(pending.StateUnknown, "create_order")
			m = selectCall(t, m, func(x pending.Call) bool { return x.ID == c.ID })
			if m.sh.listsToolsOf(c) {
				t.Fatal("the call's server's tools are listed before anyone asked")
			}
			nm, cmd := m.Update(keyMsg("r"))
			m = nm.(Model)
			if m.dialog != nil || cmd == nil {
				t.Fatalf("r opened the dialog (%v) before the call's server listed its tools", m.dialog != nil)
			}
			m = settle(t, m, cmd)
			if a := dialogAction(m); a != pending.ActionRetry || ct.asked != 1 {
				t.Fatalf("after the listing: dialog %T, asked %d times; want the retry dialog, asked once", m.dialog, ct.asked)
			}
			typed := strings.Contains(flat(m.dialog.View(100)), "type retry")
			if typed != fail {
				t.Errorf("listing failed %v: dialog asks for retry typed %v:\n%s", fail, typed, m.dialog.View(100))
			}
			m = press(t, m, defaultDialogKeys().No)
			m = settle(t, m, func() tea.Cmd { nm, cmd := m.Update(keyMsg("r")); m = nm.(Model); return cmd }())
			if m.dialog == nil || ct.asked != 1 {
				t.Fatalf("r again: dialog %v, asked %d times; want the dialog at once, asked once in all", m.dialog != nil, ct.asked)
			}
		})
	}
}

// dialogAction is the decision the open dialog confirms, "" for none.
func dialogAction(m Model) pending.Action {
	if m.dialog == nil {
		return ""
	}
	a, _ := m.dialog.Decision()
	return a
}

// Over several servers, when a bulk query ends, each server it queried
// lists its tools (once, however many of its calls), so R offers a retry
// of the calls whose own server declares the key argument.
func TestBulkQueryListsTheToolsOfItsServers(t *testing.T) {
	e := newEnv(t)
	e.unknownOrders(3)
	e.findsOnly()
	ct := &callToolsEngine{Guard: e.g, tools: testTools()}
	o := e.overServers(e.options(), "orders-test")
	o.Engine = ct
	m := e.modelWith(o, 120, 30)
	m = press(t, m, m.list.keys.PickAll)
	m = press(t, m, m.list.keys.Reconcile)
	for m.bulk.group < len(guard.Findings) && guard.Findings[m.bulk.group] != guard.FindingNotFound {
		m = press(t, m, m.bulk.keys.Down)
	}
	safe, unsafe := m.bulk.retryable()
	if ct.asked != 1 || len(safe) != 3 || unsafe != 0 {
		t.Fatalf("after the bulk query: tools asked %d times, %d safe to retry, %d not; want asked once, 3 safe", ct.asked, len(safe), unsafe)
	}
}

// startingServer is a fakeServer that is not started until its tools are
// first listed (as a fleet server starts on first use).
type startingServer struct {
	*fakeServer
	started bool
}

func (s *startingServer) State() mcpclient.SessionState {
	if s.started {
		return mcpclient.StateRunning
	}
	return mcpclient.StateNew
}

func (s *startingServer) Tools(ctx context.Context) ([]mcp.Tool, error) {
	s.started = true
	return s.fakeServer.Tools(ctx)
}

// The status bar shows a server started by the console's own work (here:
// picked, so its tools are listed) when that work ends, not at the next
// clock tick (settle drops the ticks after the first).
func TestStatusBarShowsAServerStartedAtOnce(t *testing.T) {
	e := newEnv(t)
	e.seed()
	billing := &startingServer{fakeServer: &fakeServer{name: "billing", tools: testTools()[:1], answer: ordersAnswer, seen: map[string]int{}}}
	o := e.options()
	o.Server, o.Servers = nil, startingServers{names: []string{"shop", "billing"},
		g:   map[string]*guard.Guard{"shop": e.g, "billing": guard.New(e.j, billing, guard.Options{Policy: e.policy, Operator: "ops"})},
		srv: map[string]ServerStatus{"shop": e.srv, "billing": billing}}
	m := e.modelWith(o, 160, 40)
	if bar := flat(m.statusBar()); !strings.Contains(bar, "billing not started") {
		t.Fatalf("status bar before billing is used: %q", bar)
	}
	m = press(t, m, m.list.keys.NewCall)
	m = step(t, m, keyMsg("down"))
	m = step(t, m, keyMsg("enter"))
	if !billing.started {
		t.Fatal("picking billing did not list its tools")
	}
	if bar := flat(m.statusBar()); !strings.Contains(bar, "billing running") {
		t.Errorf("status bar once billing's tools are listed: %q", bar)
	}
}

// startingServers is Options.Servers with any ServerStatus per name.
type startingServers struct {
	names []string
	g     map[string]*guard.Guard
	srv   map[string]ServerStatus
}

func (f startingServers) Names() []string              { return f.names }
func (f startingServers) Engine(n string) Engine       { return f.g[n] }
func (f startingServers) Status(n string) ServerStatus { return f.srv[n] }

// A server that never ran (its start was refused, or its command is not
// there) says so, rather than "exited" as one that ran and died does.
func TestServerStateSaysAStartFailed(t *testing.T) {
	for _, tc := range []struct {
		snap serverSnap
		want string
	}{
		{serverSnap{}, "not started"},
		{serverSnap{State: mcpclient.StateStarting}, "starting"},
		{serverSnap{State: mcpclient.StateExited}, "start failed"},
		{serverSnap{State: mcpclient.StateExited, Session: 2}, "exited"},
		{serverSnap{State: mcpclient.StateRunning, Session: 1}, "running"},
	} {
		if got := serverState(tc.snap); got != tc.want {
			t.Errorf("serverState(%+v) = %q, want %q", tc.snap, got, tc.want)
		}
	}
}
