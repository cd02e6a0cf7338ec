package tui

import (
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcp-confirm/mcp-confirm/guard"
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

// Over several servers: nothing is listed before a server is picked, c
// picks the server first, its tools are that server's, and the status bar
// names every server.
func TestConsoleOverSeveralServers(t *testing.T) {
	e := newEnv(t)
	e.seed()
	other := &fakeServer{name: "billing", tools: testTools()[:1], answer: ordersAnswer, seen: map[string]int{}}
	g2 := guard.New(e.j, other, guard.Options{Policy: e.policy, Operator: "ops"})
	o := e.options()
	o.Server = nil
	o.Servers = fakeServers{names: []string{"shop", "billing"},
		g: map[string]*guard.Guard{"shop": e.g, "billing": g2}, srv: map[string]*fakeServer{"shop": e.srv, "billing": other}}
	m := New(o)
	m = step(t, m, tea.WindowSizeMsg{Width: 160, Height: 40})
	m = settle(t, m, m.Init())
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
	if m.sh.newCallEngine() != Engine(g2) {
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
	g2 := guard.New(e.j, other, guard.Options{Policy: e.policy, Operator: "ops"})
	o := e.options()
	o.Server = nil
	o.Servers = fakeServers{names: []string{"orders-test", "billing"},
		g: map[string]*guard.Guard{"orders-test": e.g, "billing": g2}, srv: map[string]*fakeServer{"orders-test": e.srv, "billing": other}}
	m := New(o)
	m = step(t, m, tea.WindowSizeMsg{Width: 160, Height: 40})
	m = settle(t, m, m.Init())
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
