package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

const loginServerURL = "https://orders.example.com/mcp"

// authEngine is the console's engine on a remote server that wants a
// login: its start is refused (as mcpclient.Remote refuses it, 401 with
// NeedsLogin) until loggedIn.
type authEngine struct {
	Engine
	loggedIn   atomic.Bool
	needsLogin bool // what the refusal says; false: a header of its own, a login would not help
	lists      atomic.Int32
}

func (a *authEngine) ListTools(ctx context.Context) ([]mcp.Tool, error) {
	a.lists.Add(1)
	if !a.loggedIn.Load() {
		return nil, &mcpclient.StartError{Server: loginServerURL, Session: 1, NeedsLogin: a.needsLogin,
			Err: fmt.Errorf("handshake: %w (the server answered 401)", mcpclient.ErrAuthorization)}
	}
	return a.Engine.ListTools(ctx)
}

// fakeLogin is Options.Login without a network: it shows an authorization
// URL, then ends as the test says (end), or when its context ends.
type fakeLogin struct {
	calls  atomic.Int32
	engine *authEngine
	end    chan error
	waits  chan time.Duration
}

// A long URL with a control sequence in it, as a hostile authorization
// server's metadata could make it.
const fakeAuthURL = "https://auth.example.com/authorize?client_id=c-123&code_challenge=0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ&code_challenge_method=S256&redirect_uri=http%3A%2F%2F127.0.0.1%3A41234%2Fcallback&response_type=code&state=s-456\x1b[2J"

func (f *fakeLogin) login(ctx context.Context, serverURL string, wait time.Duration, show func(string)) (string, error) {
	f.calls.Add(1)
	f.waits <- wait
	if serverURL != loginServerURL {
		return "", fmt.Errorf("logged in to %q, want %q", serverURL, loginServerURL)
	}
	show(fakeAuthURL)
	select {
	case err := <-f.end:
		if err != nil {
			return "", err
		}
		f.engine.loggedIn.Store(true)
		return "logged in to " + serverURL + " (access token valid for 1h0m0s, refreshed when it expires); kept in /state/oauth/orders.json", nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// run runs a command that may block (the login's), bounded.
func run(t *testing.T, cmd tea.Cmd) tea.Msg {
	t.Helper()
	if cmd == nil {
		t.Fatal("no command")
	}
	got := make(chan tea.Msg, 1)
	go func() { got <- cmd() }()
	select {
	case msg := <-got:
		return msg
	case <-time.After(5 * time.Second):
		t.Fatal("the command did not return in 5s")
	}
	return nil
}

func update(m Model, msg tea.Msg) (Model, tea.Cmd) {
	nm, cmd := m.Update(msg)
	return nm.(Model), cmd
}

// loginConsole is a console on a server that refuses its start for want
// of a login, with the fake login as Options.Login.
func loginConsole(t *testing.T, needsLogin bool) (*env, *authEngine, *fakeLogin, Model) {
	t.Helper()
	e := newEnv(t)
	e.seed()
	ae := &authEngine{Engine: e.g, needsLogin: needsLogin}
	fl := &fakeLogin{engine: ae, end: make(chan error, 1), waits: make(chan time.Duration, 4)}
	o := e.options()
	o.Engine = ae
	o.Login = fl.login
	return e, ae, fl, e.modelWith(o, 100, 30)
}

// The inline login's states, without a network: the start refused for
// want of a login says so and offers O; O shows the login screen and
// starts the login as a command (Update runs none of it); the URL is shown
// whole and clean, with the time left; esc cancels it, which says so in
// one line and changes nothing else; O again, and the login kept, the
// tools are listed. Nothing is sent to the server in all of it.
func TestLoginInline(t *testing.T) {
	e, ae, fl, m := loginConsole(t, true)
	keys := defaultAppKeys()
	if !m.keys.Login.Enabled() || !strings.Contains(m.message, "authorization needed by "+loginServerURL+": O logs in here") {
		t.Fatalf("a start refused for want of a login: O enabled %v, message %q", m.keys.Login.Enabled(), m.message)
	}
	if v := m.View(); !strings.Contains(v, "O log in") {
		t.Errorf("the footer has no hint for O:\n%s", v)
	}
	m = press(t, m, m.list.keys.Tools)
	if v := flat(m.View()); !strings.Contains(v, "It wants authorization: O logs in to "+loginServerURL) {
		t.Errorf("the tools screen does not offer the login:\n%s", m.View())
	}
	lists := ae.lists.Load()
	sent := len(e.srv.sent)

	// 1. O: the login screen, and a command; Update ran nothing of it.
	m, cmd := update(m, keyMsg(keys.Login.Keys()[0]))
	if cmd == nil || m.active != screenLogin || fl.calls.Load() != 0 {
		t.Fatalf("O: command %v, screen %v, logins run %d; want a command, the login screen, none run in Update", cmd != nil, m.active, fl.calls.Load())
	}
	if v := flat(m.View()); !strings.Contains(v, "Logging in to "+loginServerURL) || !strings.Contains(v, "Finding its authorization server") {
		t.Errorf("login screen before the URL:\n%s", m.View())
	}
	if m.keys.Login.Enabled() {
		t.Error("O is still enabled while a login runs")
	}
	msg := run(t, cmd)
	if w := <-fl.waits; w != defaultLoginWait {
		t.Errorf("the login waits %s, want login's default %s", w, defaultLoginWait)
	}
	um, ok := msg.(loginURLMsg)
	if !ok {
		t.Fatalf("first message %T, want loginURLMsg", msg)
	}
	m, next := update(m, um)
	m, _ = update(m, tickMsg{Now: um.At.Add(61 * time.Second), OutOfTurn: true})
	v := m.View()
	clean := strings.TrimSuffix(fakeAuthURL, "\x1b[2J")
	if strings.Contains(v, "\x1b[2J") {
		t.Error("the URL's control sequence reached the screen")
	}
	if !strings.Contains(urlOnScreen(v), clean) || !strings.Contains(v, "3m59s left") || !strings.Contains(v, "esc cancels") {
		t.Errorf("login screen with the URL (want it whole on lines of its own, and 3m59s left):\n%s", v)
	}
	for _, l := range strings.Split(v, "\n") {
		if w := lipglossWidth(l); w > 100 {
			t.Errorf("line wider than the screen (%d): %q", w, l)
		}
	}

	// 2. esc cancels; the end says so; nothing else changed.
	m, _ = update(m, keyMsg(m.login.keys.Cancel.Keys()[0]))
	if v := m.View(); !strings.Contains(v, "Cancelling") {
		t.Errorf("after esc:\n%s", v)
	}
	m, cmd = update(m, run(t, next))
	if cmd != nil {
		t.Error("a cancelled login runs a command")
	}
	if m.active != screenTools || m.message != "login to "+loginServerURL+" cancelled; nothing was stored" {
		t.Fatalf("after cancel: screen %v, message %q", m.active, m.message)
	}
	if !m.keys.Login.Enabled() || m.sh.toolsLoaded || ae.lists.Load() != lists {
		t.Fatalf("after cancel: O enabled %v, tools loaded %v, lists %d (was %d); want the offer kept, nothing else",
			m.keys.Login.Enabled(), m.sh.toolsLoaded, ae.lists.Load(), lists)
	}

	// 3. O again, the browser comes back: kept; the tools are listed.
	m, cmd = update(m, keyMsg(keys.Login.Keys()[0]))
	um = run(t, cmd).(loginURLMsg)
	<-fl.waits
	m, next = update(m, um)
	fl.end <- nil
	m, cmd = update(m, run(t, next))
	if !strings.HasPrefix(m.message, "logged in to "+loginServerURL+" (access token valid for 1h0m0s") || m.active != screenTools {
		t.Fatalf("after the login: message %q, screen %v", m.message, m.active)
	}
	m = settle(t, m, cmd)
	if !m.sh.toolsLoaded || len(m.sh.tools) != len(testTools()) || m.keys.Login.Enabled() {
		t.Fatalf("after the login: tools loaded %v (%d), O enabled %v; want the tools listed, no offer", m.sh.toolsLoaded, len(m.sh.tools), m.keys.Login.Enabled())
	}
	if v := m.View(); !strings.Contains(v, "create_order") {
		t.Errorf("the tools screen after the login:\n%s", v)
	}
	if s := e.srv.sent[sent:]; len(s) != 0 {
		t.Fatalf("the login flow sent %q to the server", s)
	}
}

// urlOnScreen joins the lines of the login screen between its "Open this
// URL" line and its "Waiting" line: the URL as a person copies it.
func urlOnScreen(v string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.Split(v, "\n") {
		switch {
		case strings.Contains(l, "Open this URL"):
			in = true
		case strings.Contains(l, "Waiting for the browser"):
			in = false
		case in:
			b.WriteString(strings.TrimSpace(l))
		}
	}
	return b.String()
}

// A login that does not happen says why in one line, keeps the offer and
// changes nothing else.
func TestLoginFailures(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w (waited 5m0s)", mcpclient.ErrLoginWait), "login to " + loginServerURL + " not completed: the browser step was not completed in time (waited 5m0s); nothing was stored; O tries again"},
		{fmt.Errorf("%w by the authorization server (access_denied)", mcpclient.ErrLoginDenied), "login to " + loginServerURL + " refused: authorization denied by the authorization server (access_denied); nothing was stored"},
		{errors.New("register with https://auth.example.com: 500\x1b]52;c;aGk=\x07"), "login to " + loginServerURL + " failed: register with https://auth.example.com: 500; nothing was stored"},
	} {
		_, ae, fl, m := loginConsole(t, true)
		lists := ae.lists.Load()
		m, cmd := update(m, keyMsg("O"))
		um := run(t, cmd).(loginURLMsg)
		<-fl.waits
		m, next := update(m, um)
		fl.end <- tc.err
		m, cmd = update(m, run(t, next))
		if m.message != tc.want || !m.messageErr || cmd != nil {
			t.Errorf("%v:\n got %q (error %v, command %v)\nwant %q", tc.err, m.message, m.messageErr, cmd != nil, tc.want)
		}
		if m.active != screenList || !m.keys.Login.Enabled() || ae.lists.Load() != lists || m.sh.toolsLoaded {
			t.Errorf("%v: screen %v, O enabled %v, lists %d (was %d); want back on the list, the offer kept, nothing else", tc.err, m.active, m.keys.Login.Enabled(), ae.lists.Load(), lists)
		}
	}
}

// A refusal a login would not answer (a header of its own), or a console
// that cannot log in, offers no O; pressed anyway, it says why.
func TestLoginNotOffered(t *testing.T) {
	_, _, fl, m := loginConsole(t, false)
	if m.keys.Login.Enabled() || strings.Contains(m.message, "O logs in") || !strings.Contains(m.message, "authorization needed") {
		t.Fatalf("a refusal no login answers: O enabled %v, message %q", m.keys.Login.Enabled(), m.message)
	}
	m, cmd := update(m, keyMsg("O"))
	if cmd != nil || fl.calls.Load() != 0 || !strings.HasPrefix(m.message, "no server asked for a login") {
		t.Fatalf("O with nothing offered: command %v, logins %d, message %q", cmd != nil, fl.calls.Load(), m.message)
	}

	e := newEnv(t)
	o := e.options()
	o.Engine = &authEngine{Engine: e.g, needsLogin: true}
	m = e.modelWith(o, 100, 30) // no Options.Login
	if m.keys.Login.Enabled() || strings.Contains(m.message, "O logs in") {
		t.Fatalf("a console without Options.Login: O enabled %v, message %q", m.keys.Login.Enabled(), m.message)
	}
}

// The console goes on while a login waits: the clock ticks, the list
// moves, and ctrl+c quits, which ends the login.
func TestLoginDoesNotHoldTheConsole(t *testing.T) {
	_, _, fl, m := loginConsole(t, true)
	m, cmd := update(m, keyMsg("O"))
	um := run(t, cmd).(loginURLMsg)
	<-fl.waits
	m, next := update(m, um)
	m, _ = update(m, tickMsg{Now: um.At.Add(4*time.Minute + 30*time.Second), OutOfTurn: true})
	if v := m.View(); !strings.Contains(v, "30s left") {
		t.Errorf("the time left does not follow the clock:\n%s", v)
	}
	m, _ = update(m, showScreenMsg{Screen: screenList}) // another screen came
	m, _ = update(m, keyMsg("O"))
	if m.active != screenLogin {
		t.Errorf("O during a login shows screen %v, want the login's", m.active)
	}
	m, cmd = update(m, keyMsg("ctrl+c"))
	if cmd == nil {
		t.Fatal("ctrl+c during a login does not quit")
	}
	done, ok := run(t, next).(loginDoneMsg)
	if !ok || !errors.Is(done.Err, context.Canceled) {
		t.Fatalf("the login after ctrl+c: %#v, want ended by its context", done)
	}
}

// loginServers is fakeServers with some servers' engines replaced.
type loginServers struct {
	fakeServers
	engines map[string]Engine
}

func (s loginServers) Engine(n string) Engine {
	if e, ok := s.engines[n]; ok {
		return e
	}
	return s.fakeServers.Engine(n)
}

// Over several servers, the picked server that wants a login is the one
// logged in to, and its tools are listed again once it is; the picker's
// other server is left as it was.
func TestLoginInlineOverSeveralServers(t *testing.T) {
	e := newEnv(t)
	e.seed()
	other := &fakeServer{name: "remote", tools: testTools(), answer: ordersAnswer, seen: map[string]int{}}
	o := e.overServers(e.options(), "shop", other)
	ae := &authEngine{Engine: o.Servers.Engine("remote"), needsLogin: true}
	o.Servers = loginServers{fakeServers: o.Servers.(fakeServers), engines: map[string]Engine{"remote": ae}}
	fl := &fakeLogin{engine: ae, end: make(chan error, 1), waits: make(chan time.Duration, 4)}
	o.Login = fl.login
	m := e.modelWith(o, 120, 30)
	if m.keys.Login.Enabled() {
		t.Fatal("a login offered before any server was started")
	}
	m = press(t, m, m.list.keys.NewCall)
	m = step(t, m, keyMsg("down"))
	m = step(t, m, keyMsg("enter")) // remote: refused
	if m.sh.picked != "remote" || !m.keys.Login.Enabled() || !strings.Contains(m.message, "authorization needed by "+loginServerURL) {
		t.Fatalf("remote picked: picked %q, O enabled %v, message %q", m.sh.picked, m.keys.Login.Enabled(), m.message)
	}
	m, cmd := update(m, keyMsg("O"))
	um := run(t, cmd).(loginURLMsg)
	<-fl.waits
	m, next := update(m, um)
	fl.end <- nil
	m, cmd = update(m, run(t, next))
	m = settle(t, m, cmd)
	if m.active != screenTools || m.sh.picked != "remote" || !m.sh.toolsLoaded || len(m.sh.tools) != len(testTools()) {
		t.Fatalf("after the login: screen %v, picked %q, tools loaded %v (%d); want remote's tools listed", m.active, m.sh.picked, m.sh.toolsLoaded, len(m.sh.tools))
	}
	if v := flat(m.View()); !strings.Contains(v, "Pick the tool to call on remote") {
		t.Errorf("the tools screen after the login:\n%s", m.View())
	}
}
