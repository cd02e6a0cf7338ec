// The console's own OAuth login (issue 19): when a remote server's start
// fails because it wants authorization that a stored login would give
// (mcpclient.StartError.NeedsLogin), the message says so and O logs in
// here, as 'mcp-confirm login --url' does (Options.Login). The login
// screen shows the authorization URL as plain text and waits, with its
// time left, for the browser to come back; esc cancels. A login kept, the
// server's tools are listed again, which starts its session anew with
// it. No tool is called: what reaches the server is the login's discovery
// (an unauthenticated initialize, its metadata) and, once logged in, a
// handshake and tools/list.

package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// LoginFunc logs in to the remote MCP server at serverURL with OAuth, as
// 'mcp-confirm login --url' does, and keeps the login where the console's
// sessions read it. show is given the authorization URL for the user's
// browser once the loopback redirect listens; wait bounds the browser
// step from then; ctx's end stops it. It returns one line that says what
// was kept where.
type LoginFunc func(ctx context.Context, serverURL string, wait time.Duration, show func(authURL string)) (string, error)

// defaultLoginWait is Options.LoginWait's default, login's --wait default.
const defaultLoginWait = 5 * time.Minute

// loginOffer is a server whose start was refused for want of a login
// (mcpclient.StartError.NeedsLogin): O logs in to it.
type loginOffer struct {
	url string // the endpoint, as the start error names it (unsanitised: it is what is logged in to)
	// picked is the server (Options.Servers) whose tools could not be
	// listed; "" for the one server, or for the server of a call.
	picked string
}

// loginOfferOf is the login err asks for, if a login would answer it.
func loginOfferOf(err error) (loginOffer, bool) {
	var se *mcpclient.StartError
	if !errors.As(err, &se) || !se.NeedsLogin || !errors.Is(err, mcpclient.ErrAuthorization) {
		return loginOffer{}, false
	}
	return loginOffer{url: se.Server}, true
}

// authLine is errLine, but for an error a login would answer, when the
// console can log in (Options.Login): it says that authorization is
// needed, by which server, and that O logs in, and it offers that login.
// picked is the server (Options.Servers) whose tools err kept from being
// listed, if any.
func (m *Model) authLine(err error, picked string) string {
	o, ok := loginOfferOf(err)
	if !ok || m.sh.opts.Login == nil {
		return errLine(err)
	}
	o.picked = picked
	m.offer = &o
	m.syncLogin()
	return fmt.Sprintf("authorization needed by %s: %s logs in here, as mcp-confirm login does", clean(o.url), m.keys.Login.Help().Key)
}

// onToolsListed says why the tools of the one server, or the picked one,
// could not be listed, and offers a login when one would answer. Listed,
// no login is offered for it any more.
func (m *Model) onToolsListed(msg toolsLoadedMsg) {
	if msg.Err != nil {
		m.setMessage("the server's tools could not be listed: "+m.authLine(msg.Err, msg.Server), true)
		return
	}
	if m.offer != nil && m.offer.picked == msg.Server {
		m.offer = nil
		m.syncLogin()
	}
}

// syncLogin enables O while a server waits for a login and none runs.
func (m *Model) syncLogin() {
	m.keys.Login.SetEnabled(m.offer != nil && m.sh.opts.Login != nil && m.login.seq == 0)
}

// loginKey starts the login offered, or shows the one under way; pressed
// with none offered, it says why nothing happens.
func (m *Model) loginKey(k tea.KeyMsg) (tea.Cmd, bool) {
	switch {
	case key.Matches(k, m.keys.Login):
		return m.startLogin(), true
	case !pressedDisabled(k, m.keys.Login):
		return nil, false
	case m.login.seq != 0:
		// Back to the login under way, should another screen have come.
		m.active = screenLogin
		m.showHelp = false
	default:
		m.whyNot("no server asked for a login: " + m.keys.Login.Help().Key + " logs in to a remote server whose start was refused for want of one")
	}
	return nil, true
}

// startLogin shows the login screen and starts the login as a command;
// Update goes on meanwhile.
func (m *Model) startLogin() tea.Cmd {
	o := *m.offer
	m.loginSeq++
	ctx, cancel := context.WithCancel(m.sh.opts.Context)
	m.login.begin(m.loginSeq, o, m.active, cancel)
	m.active = screenLogin
	m.showHelp = false
	m.setMessage("", false)
	m.syncLogin()
	return loginCmd(ctx, m.sh.opts.Login, m.loginSeq, o.url, m.sh.opts.LoginWait, m.sh.opts.Now)
}

// onLoginURL shows the authorization URL and waits for the rest.
func (m *Model) onLoginURL(msg loginURLMsg) tea.Cmd {
	if msg.Seq == m.login.seq {
		m.login.authURL, m.login.shownAt = clean(msg.URL), msg.At
	}
	return nextLoginCmd(msg.next)
}

// onLoginDone says in one line how the login ended and goes back to the
// screen it was started from. Kept, the server's tools are listed again,
// which starts its session anew with the login; otherwise nothing else
// changes, and O may be pressed again.
func (m *Model) onLoginDone(msg loginDoneMsg) tea.Cmd {
	if msg.Seq != m.login.seq {
		return nil
	}
	l := m.login.end()
	if m.active == screenLogin {
		m.active = l.prev
	}
	defer m.syncLogin()
	who := clean(l.offer.url)
	if msg.Err != nil {
		m.setMessage(loginFailedLine(who, l.cancelled, msg.Err, m.keys.Login.Help().Key), !l.cancelled)
		return nil
	}
	if m.offer != nil && m.offer.url == l.offer.url {
		m.offer = nil // another server's, offered meanwhile, stays
	}
	said := clean(msg.Said)
	if said == "" {
		said = "logged in to " + who
	}
	if !m.sh.multi() || (l.offer.picked != "" && l.offer.picked == m.sh.picked) {
		m.setMessage(said, false)
		return m.sh.pick(m.sh.picked)
	}
	// Over several servers, the calls' servers whose tools could not be
	// listed (this one among them) are asked again at their next decision.
	for id := range m.sh.callToolsTried {
		if _, listed := m.sh.callTools[id]; !listed {
			delete(m.sh.callToolsTried, id)
		}
	}
	m.setMessage(said+"; its calls' next decisions reach it with the login", false)
	return nil
}

// loginFailedLine is a login that did not happen, in one line, from its
// typed error: nothing was stored either way.
func loginFailedLine(who string, cancelled bool, err error, again string) string {
	why := errLine(err)
	switch {
	case cancelled && errors.Is(err, context.Canceled):
		return "login to " + who + " cancelled; nothing was stored"
	case errors.Is(err, context.Canceled):
		return "login to " + who + " stopped; nothing was stored"
	case errors.Is(err, mcpclient.ErrLoginWait):
		return "login to " + who + " not completed: " + why + "; nothing was stored; " + again + " tries again"
	case errors.Is(err, mcpclient.ErrLoginDenied):
		return "login to " + who + " refused: " + why + "; nothing was stored"
	case errors.Is(err, mcpclient.ErrNoOAuth):
		return "no login to " + who + ": " + why + "; nothing was stored (mcp-confirm login --url takes --client-id for a client registered beforehand)"
	}
	return "login to " + who + " failed: " + why + "; nothing was stored"
}

// loginScreen is a login under way: what it logs in to, the authorization
// URL once there, and the time left for the browser.
type loginScreen struct {
	sh   *shared
	keys loginKeys
	// seq is the login's number, 0 when none runs: a message of another
	// login is dropped.
	seq       int
	offer     loginOffer
	prev      screenID // where it was started, to go back to
	cancel    context.CancelFunc
	cancelled bool // esc was pressed; the login's end is awaited
	authURL   string
	shownAt   time.Time
	w, h      int
}

func (l *loginScreen) begin(seq int, o loginOffer, prev screenID, cancel context.CancelFunc) {
	*l = loginScreen{sh: l.sh, keys: l.keys, w: l.w, h: l.h, seq: seq, offer: o, prev: prev, cancel: cancel}
}

// end forgets the login, once it has ended, and returns what it was.
func (l *loginScreen) end() loginScreen {
	was := *l
	was.cancel() // its context's resources
	*l = loginScreen{sh: l.sh, keys: l.keys, w: l.w, h: l.h}
	return was
}

func (l *loginScreen) Title() string                  { return "log in" }
func (l *loginScreen) Capturing() bool                { return false }
func (l *loginScreen) Selected() (pending.Call, bool) { return pending.Call{}, false }
func (l *loginScreen) decisions() *decisionKeys       { return nil }
func (l *loginScreen) SetSize(w, h int)               { l.w, l.h = w, h }
func (l *loginScreen) ShortHelp() []key.Binding       { return []key.Binding{l.keys.Cancel} }
func (l *loginScreen) FullHelp() [][]key.Binding      { return [][]key.Binding{l.ShortHelp()} }

// Update: esc cancels the login, whose end then says so.
func (l *loginScreen) Update(msg tea.Msg) (screen, tea.Cmd) {
	if k, ok := msg.(tea.KeyMsg); ok && key.Matches(k, l.keys.Cancel) && l.seq != 0 && !l.cancelled {
		l.cancelled = true
		l.cancel()
	}
	return l, nil
}

// left is the time left for the browser step, by the last tick's clock.
func (l *loginScreen) left() time.Duration {
	wait := l.sh.opts.LoginWait
	left := l.shownAt.Add(wait).Sub(l.sh.now)
	return min(max(left, 0), wait).Round(time.Second)
}

// View says what is logged in to and where the login is. The URL is on
// lines of its own, from the first column, in no style: selected in the
// terminal, it copies as it is (a browser drops the line breaks).
func (l *loginScreen) View() string {
	st := l.sh.st
	who := clean(l.offer.url)
	var b strings.Builder
	b.WriteString(wrap(st.Bold.Render("Logging in to "+who)+st.Subtle.Render(" with OAuth, as 'mcp-confirm login' does. No tool is called meanwhile."), l.w))
	b.WriteString("\n\n")
	switch {
	case l.cancelled:
		b.WriteString(st.Subtle.Render("Cancelling…"))
	case l.authURL == "":
		b.WriteString(st.Subtle.Render(wrap("Finding its authorization server and registering mcp-confirm with it…", l.w)))
	default:
		b.WriteString(wrap("Open this URL in a browser and log in there (select its lines to copy it); the browser then comes back to mcp-confirm on 127.0.0.1.", l.w))
		b.WriteString("\n\n")
		b.WriteString(ansi.Hardwrap(l.authURL, max(l.w, 20), false))
		b.WriteString("\n\n")
		b.WriteString(wrap(fmt.Sprintf("Waiting for the browser: %s left. %s cancels.", l.left(), l.keys.Cancel.Help().Key), l.w))
	}
	return b.String()
}
