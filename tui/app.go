// Package tui is mcp-confirm's operator console: a Bubble Tea program that
// shows every write call whose outcome is unknown and turns the operator's
// keystrokes into guard decisions (query, retry with the same key, abandon,
// mark applied, note). It writes nothing itself: every change goes through
// guard, every read through the journal, all of it in tea.Cmds.
package tui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/spinner"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// Journal is what the console reads (pending.Journal).
type Journal interface {
	List(ctx context.Context, f pending.Filter) ([]pending.Call, error)
	Counts(ctx context.Context) (map[pending.State]int, error)
	Get(ctx context.Context, id int64) (pending.Call, error)
	Recovered() []int64
	Path() string
}

// LateLister is what a Journal may also offer: the calls that hold late
// (pending.Call.HoldsLate), read from the journal's partial index on
// late_settled_at/acked_at, at a cost that does not grow with the journal.
// A journal without it is read whole, in keyset pages, and those reads are
// spaced out (latePause).
type LateLister interface {
	HoldingLate(ctx context.Context) ([]pending.Call, error)
}

// Engine is what the console asks of the guard (guard.Guard).
type Engine interface {
	Call(ctx context.Context, req guard.Request) (guard.Result, error)
	Retry(ctx context.Context, id int64, o guard.RetryOptions) (guard.Result, error)
	Query(ctx context.Context, id int64, o guard.QueryOptions) (guard.Result, error)
	Abandon(ctx context.Context, id int64, note string) error
	MarkApplied(ctx context.Context, id int64, note string) error
	Note(ctx context.Context, id int64, note string) error
	// Ack records that the operator has seen a call that settled late;
	// identical calls are sent again from then on (SPEC §9).
	Ack(ctx context.Context, id int64, note string) error
	ListTools(ctx context.Context) ([]mcp.Tool, error)
	Classify(t mcp.Tool) (pending.Kind, pending.KindSource)
}

// ServerStatus is what the status bar shows of the server (mcpclient.Client).
type ServerStatus interface {
	ServerInfo() mcpclient.ServerInfo
	Session() int
	State() mcpclient.SessionState
}

// Options wire the console to an engine.
type Options struct {
	// Context ends guarded calls the console started when it is cancelled.
	Context context.Context
	Journal Journal
	Engine  Engine
	Server  ServerStatus
	Policy  *guard.Policy // for the query a decision runs; nil: none configured
	// Watch signals journal changes (guard.Watch); nil: no live updates.
	Watch <-chan struct{}
	// Now is the clock (tests fix it). Default time.Now.
	Now func() time.Time
	// Tick is how often ages and the status bar refresh. Default 1s.
	Tick time.Duration
	// Grace is how long a dialog opened by an event ignores keys. Default 400ms.
	Grace time.Duration
	// Demo turns on the guided demo's hints.
	Demo bool
	// Prefill overrides schema defaults in the new-call editor, per tool.
	Prefill map[string]map[string]any
	// WriteTimeout is --timeout, as given to the guard
	// (guard.Options.WriteTimeout): it overrides the policy's idle clock
	// for every write. 0: each write has the policy's clock for its tool
	// (shared.writeClock), which the in-flight line and hints show.
	WriteTimeout time.Duration
	// Renderer for styles; default lipgloss.DefaultRenderer() (NO_COLOR aware).
	Renderer *lipgloss.Renderer
	// Home shortens the journal path to ~/… in the status bar; "" leaves it.
	Home string
}

// homeTilde writes a path under home as ~/….
func homeTilde(path, home string) string {
	if home != "" && strings.HasPrefix(path, home+"/") {
		return "~" + path[len(home):]
	}
	return path
}

// screen is one full-window view: the calls list, a call's detail, the
// tools, the new-call form. What the root needs of a screen it asks
// through these methods, never by reading the screen's fields.
type screen interface {
	Update(tea.Msg) (screen, tea.Cmd)
	View() string
	help.KeyMap
	SetSize(w, h int)
	// Title names the screen in the top bar.
	Title() string
	// Capturing: a text field has the keys, so letters (q, ?) are text;
	// only ctrl+c stays global.
	Capturing() bool
	// Selected is the call the decision keys act on, if any.
	Selected() (pending.Call, bool)
	// decisions are the screen's decision keys (s r x m n A); nil: it has
	// none.
	decisions() *decisionKeys
}

type screenID int

const (
	screenList screenID = iota
	screenDetail
	screenTools
	screenForm
)

// shared is the state every screen reads; only the root writes it.
type shared struct {
	opts        Options
	st          *Styles
	now         time.Time
	server      serverSnap
	counts      map[pending.State]int
	tools       []toolInfo
	toolsErr    error
	toolsLoaded bool
	// late is every call that settled late and is not acknowledged, oldest
	// late settle first; lateKnown once it has been read.
	late      []pending.Call
	lateKnown bool
	// cancel ends the calls the console started, with a cause the journal
	// records as their reason (guard.CancelCause).
	cancel context.CancelCauseFunc
}

// writeClock is the idle clock the guard runs on a write of tool, as the
// guard picks it: --timeout (Options.WriteTimeout) when given, else the
// policy's timeout for the tool, else its [defaults] write_timeout, else
// guard.DefaultWriteTimeout. No answer and no progress for that long,
// and the write becomes unknown.
func (sh *shared) writeClock(tool string) time.Duration {
	if d := sh.opts.WriteTimeout; d > 0 {
		return d
	}
	if p := sh.opts.Policy; p != nil {
		if d := p.Tools[tool].Timeout.Duration; d > 0 {
			return d
		}
		if d := p.Defaults.WriteTimeout.Duration; d > 0 {
			return d
		}
	}
	return guard.DefaultWriteTimeout
}

func (sh *shared) tool(name string) (toolInfo, bool) {
	for _, t := range sh.tools {
		if t.Tool.Name == name {
			return t, true
		}
	}
	return toolInfo{}, false
}

// Model is the root of the console.
type Model struct {
	sh   *shared
	keys appKeys
	help help.Model

	list   *listScreen
	detail *detailScreen
	tools  *toolsScreen
	form   *formScreen
	active screenID

	dialog     dialog
	dialogSeq  int
	quitDialog int // the ID of the quit question, when it was asked
	showHelp   bool

	message     string // what the last action did, to which call
	messageErr  bool
	messageWarn bool             // an outcome to act on, not an error
	messageMark string           // the warning's glyph when not GlyphUnknown
	messageOnce bool             // a one-shot reason why a key did nothing: gone at the next key or screen
	queried     map[int64]bool   // calls the operator queried this session (the demo's hints)
	queryErr    map[int64]string // calls whose last query this session got no answer, and why
	retrying    map[int64]bool   // calls with a retry in flight from this console
	quitting    bool             // quit confirmed: waiting for the write in flight to be recorded
	demoOrders  demoOrders       // the demo server's orders, from its find_orders
	demoCall    pending.Call     // the demo's create_order call, as last seen
	busy        bool             // message says what is running
	recovered   int
	// The late scan: one at a time; a change while it runs asks for another.
	lateScanning, lateAgain bool
	lateTook                time.Duration
	w, h                    int
}

// New returns the console's root model.
func New(o Options) Model {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Tick == 0 {
		o.Tick = time.Second
	}
	if o.Grace == 0 {
		o.Grace = 400 * time.Millisecond
	}
	if o.Context == nil {
		o.Context = context.Background()
	}
	ctx, cancel := context.WithCancelCause(o.Context)
	o.Context = ctx
	sh := &shared{opts: o, st: NewStyles(o.Renderer), now: o.Now(), counts: map[pending.State]int{}, cancel: cancel}
	hm := help.New()
	hm.Styles.ShortKey = sh.st.Key
	hm.Styles.FullKey = sh.st.Key
	hm.Styles.ShortDesc = sh.st.Subtle
	hm.Styles.FullDesc = sh.st.Subtle
	hm.Styles.ShortSeparator = sh.st.Faint
	hm.Styles.FullSeparator = sh.st.Faint
	hm.Styles.Ellipsis = sh.st.Faint
	m := Model{sh: sh, keys: defaultAppKeys(), help: hm, w: 80, h: 24, queried: map[int64]bool{},
		queryErr: map[int64]string{}, retrying: map[int64]bool{}}
	m.lateScanning = o.Journal != nil // Init starts the first scan
	if o.Journal != nil {
		m.recovered = len(o.Journal.Recovered())
	}
	m.list = newListScreen(sh)
	m.detail = newDetailScreen(sh)
	m.tools = newToolsScreen(sh)
	m.form = newFormScreen(sh)
	m.setSize(m.w, m.h)
	return m
}

// Init loads the first window, the tools (which starts the server), the
// calls that settled late, and starts the clock and the journal watch.
func (m Model) Init() tea.Cmd {
	var late tea.Cmd
	if m.sh.opts.Journal != nil {
		late = loadLateCmd(m.sh.opts.Journal, 0)
	}
	return tea.Batch(
		m.list.reload(anchorStart),
		late,
		listToolsCmd(m.sh.opts.Engine),
		nowCmd(m.sh.opts.Now, m.sh.opts.Server),
		tickCmd(m.sh.opts.Tick, m.sh.opts.Now, m.sh.opts.Server),
		watchCmd(m.sh.opts.Watch),
	)
}

// Update routes messages in a fixed order: size, the open dialog, global
// keys, app-level results, then the active screen only.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if ws, ok := msg.(tea.WindowSizeMsg); ok {
		m.setSize(ws.Width, ws.Height)
		return m, nil
	}
	if _, ok := msg.(tea.KeyMsg); ok {
		m.dropOneShot() // it answered the key before this one
	}
	if m.dialog != nil {
		if cmd, handled := m.updateDialog(msg); handled {
			return m, cmd
		}
	}
	if k, ok := msg.(tea.KeyMsg); ok {
		if cmd, handled := m.globalKey(k); handled {
			return m, cmd
		}
	}
	if cmd, handled := m.appMsg(msg); handled {
		return m, cmd
	}
	return m, m.updateActive(msg)
}

func (m *Model) setSize(w, h int) {
	m.w, m.h = w, h
	m.help.Width = w
	bh := m.bodyHeight()
	for _, s := range m.screens() {
		s.SetSize(w, bh)
	}
}

// screens are every screen, the active one or not.
func (m *Model) screens() []screen { return []screen{m.list, m.detail, m.tools, m.form} }

// bodyHeight is what is left for the active screen: the window minus the
// top bar, the message lines, the help line and the status bar.
func (m *Model) bodyHeight() int {
	h := m.h - 3 - m.messageLines()
	if m.recovered > 0 {
		h--
	}
	return max(h, 3)
}

func (m *Model) activeScreen() screen {
	switch m.active {
	case screenDetail:
		return m.detail
	case screenTools:
		return m.tools
	case screenForm:
		return m.form
	}
	return m.list
}

func (m *Model) updateActive(msg tea.Msg) tea.Cmd {
	_, cmd := m.activeScreen().Update(msg)
	return cmd
}

// updateDialog gives the open dialog its messages: keys (ctrl+c still
// quits), and its own arming tick.
func (m *Model) updateDialog(msg tea.Msg) (tea.Cmd, bool) {
	switch msg := msg.(type) {
	case dialogArmedMsg:
		if msg.Dialog == m.dialog.ID() {
			m.dialog.Arm()
		}
		return nil, true
	case tea.KeyMsg:
		if key.Matches(msg, m.keys.ForceQuit) {
			m.sh.cancel(quitCause)
			return tea.Quit, true
		}
		d := m.dialog
		cmd, closed := d.Update(msg)
		if closed {
			m.dialog = nil
		}
		if closed && cmd != nil { // it started what it confirms
			if b := d.Busy(); b != "" {
				m.setMessage(b, false)
				m.busy = true
			}
			if a, c := d.Decision(); a == pending.ActionRetry {
				m.retrying[c.ID] = true
			}
		}
		return cmd, true
	}
	return nil, false
}

// globalKey handles ctrl+c, ?, q (not while typing), and the decision keys
// on the screens that have a selected call.
func (m *Model) globalKey(k tea.KeyMsg) (tea.Cmd, bool) {
	switch {
	case key.Matches(k, m.keys.ForceQuit):
		m.sh.cancel(quitCause)
		return tea.Quit, true
	case m.activeScreen().Capturing():
		return nil, false
	case key.Matches(k, m.keys.Quit):
		return m.quit(), true
	case key.Matches(k, m.keys.Help):
		m.showHelp = !m.showHelp
		return nil, true
	case m.showHelp && k.Type == tea.KeyEsc:
		m.showHelp = false
		return nil, true
	}
	if m.active == screenList {
		if cmd, handled := m.lateKey(k); handled {
			return cmd, true
		}
	}
	return m.decisionKey(k)
}

// lateKey (L) selects the next call that settled late and is not yet
// acknowledged, in its state's tab, after the selected one if that is one.
func (m *Model) lateKey(k tea.KeyMsg) (tea.Cmd, bool) {
	if !m.list.pressedLate(k) {
		return nil, false
	}
	late := m.sh.late
	if len(late) == 0 {
		if m.sh.lateKnown {
			m.whyNot("no call is waiting for an acknowledgement: none settled late after being reported unknown")
		} else {
			m.whyNot("still reading the journal for calls that settled late; try again in a moment")
		}
		return nil, true
	}
	i := 0
	if c, ok := m.list.Selected(); ok {
		for j := range late {
			if late[j].ID == c.ID {
				i = (j + 1) % len(late)
			}
		}
	}
	c := late[i]
	m.setMessage(fmt.Sprintf("late settle %d of %d: call %d (%s) %s late, %s ago; identical calls are held until you acknowledge it (A)",
		i+1, len(late), c.ID, displayName(c.Tool), stateWord(c.State), age(m.sh.now.Sub(*c.LateSettledAt))), false)
	m.messageWarn, m.messageMark = true, GlyphLate
	return m.list.jumpTo(c), true
}

// decisionKey opens the dialog for s, r, x, m, n or A on the active
// screen's selected call, or says in one line why that action is not
// possible. A screen without decision keys does not handle them.
func (m *Model) decisionKey(k tea.KeyMsg) (tea.Cmd, bool) {
	s := m.activeScreen()
	dk := s.decisions()
	if dk == nil {
		return nil, false
	}
	c, ok := s.Selected()
	for _, b := range []struct {
		b      key.Binding
		action pending.Action
	}{{dk.Query, pending.ActionQuery}, {dk.Retry, pending.ActionRetry}, {dk.Abandon, pending.ActionAbandon}, {dk.Mark, pending.ActionMark}, {dk.Note, pending.ActionNote}, {dk.Ack, pending.ActionAck}} {
		switch {
		case key.Matches(k, b.b) && ok:
			return m.openDecision(b.action, c), true
		case pressedDisabled(k, b.b) || key.Matches(k, b.b):
			m.whyNot(disabledReason(b.action, c, ok))
			return nil, true
		}
	}
	return nil, false
}

// syncBindings enables, on each screen with decision keys, the ones its
// selected call allows, so help hides what cannot be done.
func (m *Model) syncBindings() {
	for _, s := range m.screens() {
		dk := s.decisions()
		if dk == nil {
			continue
		}
		c, ok := s.Selected()
		dk.Query.SetEnabled(ok && c.Kind == pending.KindWrite)
		dk.Retry.SetEnabled(ok && c.State.Allows(pending.EventRetry))
		dk.Abandon.SetEnabled(ok && c.State.Allows(pending.EventAbandon))
		dk.Mark.SetEnabled(ok && c.State.Allows(pending.EventMark))
		dk.Note.SetEnabled(ok)
		dk.Ack.SetEnabled(ok && c.HoldsLate())
	}
	m.list.syncLate(len(m.sh.late))
}

// disabledReason is the one line shown when an action's key is pressed on
// a call that does not allow it.
func disabledReason(a pending.Action, c pending.Call, ok bool) string {
	if !ok {
		return "no call selected; pick one with ↑/↓ (tab changes the state shown)"
	}
	name := fmt.Sprintf("call %d (%s)", c.ID, displayName(c.Tool))
	switch a {
	case pending.ActionRetry:
		return fmt.Sprintf("%s is %s; only unknown or failed calls can be retried", name, stateWord(c.State))
	case pending.ActionAbandon, pending.ActionMark:
		return fmt.Sprintf("%s is %s; only unknown calls can be %s", name, stateWord(c.State), map[pending.Action]string{pending.ActionAbandon: "abandoned", pending.ActionMark: "marked applied"}[a])
	case pending.ActionQuery:
		return fmt.Sprintf("%s is a read; reads are never unknown, there is nothing to query", name)
	case pending.ActionAck:
		if c.LateSettledAt != nil && c.AckedAt != nil {
			return fmt.Sprintf("%s was acknowledged already (%s); it holds nothing", name, stamp(*c.AckedAt))
		}
		return fmt.Sprintf("%s did not settle late after being reported unknown; there is nothing to acknowledge", name)
	}
	return fmt.Sprintf("cannot %s %s", a, name)
}

// appMsg handles results that concern the whole app.
func (m *Model) appMsg(msg tea.Msg) (tea.Cmd, bool) {
	switch msg := msg.(type) {
	case tickMsg:
		return m.onTick(msg), true
	case journalChangedMsg:
		return m.onJournalChanged(), true
	case windowLoadedMsg:
		cmd := m.list.onWindow(msg)
		m.sh.counts = m.list.counts()
		m.syncBindings()
		return cmd, true
	case toolsLoadedMsg:
		m.sh.tools, m.sh.toolsErr, m.sh.toolsLoaded = msg.Tools, msg.Err, msg.Err == nil
		m.tools.onTools()
		if msg.Err != nil {
			m.setMessage("the server's tools could not be listed: "+errLine(msg.Err), true)
		}
		return m.readDemoOrders(), true
	case demoOrdersMsg:
		m.onDemoOrders(msg)
		return nil, true
	case quitConfirmedMsg:
		return m.beginQuit(), true
	case quitNowMsg:
		return tea.Quit, true
	case callLoadedMsg:
		_, cmd := m.detail.Update(msg)
		m.syncBindings()
		return cmd, true
	case lateLoadedMsg:
		return m.onLateLoaded(msg), true
	case openDecisionMsg:
		return m.openDecision(msg.Action, msg.Call), true
	case queriedMsg:
		return m.onQueried(msg), true
	case retriedMsg:
		return m.onRetried(msg), true
	case decidedMsg:
		return m.onDecided(msg), true
	case callDoneMsg:
		return m.onCallDone(msg), true
	case showScreenMsg:
		return m.show(msg.Screen, msg.Tool), true
	case errMsg:
		m.setMessage(errLine(msg.Err), true)
		return nil, true
	case spinner.TickMsg, progressMsg, progressClosedMsg:
		_, cmd := m.form.Update(msg) // the call in flight, whichever screen shows
		return cmd, true
	}
	return nil, false
}

func (m *Model) onTick(t tickMsg) tea.Cmd {
	m.sh.now, m.sh.server = t.Now, t.Server
	m.detail.refresh()
	return tickCmd(m.sh.opts.Tick, m.sh.opts.Now, m.sh.opts.Server)
}

// onJournalChanged reloads what is on screen and waits for the next change.
func (m *Model) onJournalChanged() tea.Cmd {
	cmds := []tea.Cmd{m.list.refresh(), watchCmd(m.sh.opts.Watch), m.scanLate()}
	if id := m.detail.loadedID(); id != 0 {
		cmds = append(cmds, loadCallCmd(m.sh.opts.Journal, id))
	}
	return tea.Batch(cmds...)
}

// scanLate reads the calls that hold late again: now if no read is
// running (after a pause that keeps a whole-journal read rare), else once
// the running one ends.
func (m *Model) scanLate() tea.Cmd {
	if m.sh.opts.Journal == nil {
		return nil
	}
	if m.lateScanning {
		m.lateAgain = true
		return nil
	}
	m.lateScanning = true
	return loadLateCmd(m.sh.opts.Journal, latePause(m.lateTook))
}

func (m *Model) onLateLoaded(msg lateLoadedMsg) tea.Cmd {
	m.lateScanning = false
	m.lateTook = msg.Took
	if msg.Err != nil {
		m.setMessage("cannot read which calls settled late: "+errLine(msg.Err), true)
	} else {
		m.sh.late, m.sh.lateKnown = msg.Calls, true
		m.syncBindings()
	}
	if m.lateAgain {
		m.lateAgain = false
		return m.scanLate()
	}
	return nil
}

// show switches screens.
func (m *Model) show(s screenID, tool string) tea.Cmd {
	m.active = s
	m.showHelp = false
	m.dropOneShot()
	switch s {
	case screenDetail:
		c, ok := m.list.Selected()
		if !ok {
			m.active = screenList
			return nil
		}
		m.detail.open(c)
		m.syncBindings()
		return loadCallCmd(m.sh.opts.Journal, c.ID)
	case screenTools:
		var cmd tea.Cmd
		if !m.sh.toolsLoaded {
			cmd = listToolsCmd(m.sh.opts.Engine)
		}
		m.tools.open(tool == "call")
		return cmd
	case screenForm:
		t, ok := m.sh.tool(tool)
		if !ok {
			m.active = screenTools
			return nil
		}
		return m.form.open(t)
	case screenList:
		m.syncBindings()
	}
	return nil
}

// onQueried reports a query's evidence and reloads the call.
func (m *Model) onQueried(msg queriedMsg) tea.Cmd {
	who := fmt.Sprintf("call %d %s key %s", msg.ID, displayName(msg.Tool), keyTail(msg.Key))
	var ser *guard.ServerMismatchError
	if errors.As(msg.Err, &ser) {
		m.setMessage(serverMismatchLine(ser, msg.ID, "query"), true)
		return m.reloadAfter(msg.ID)
	}
	if msg.Err != nil {
		m.queryErr[msg.ID] = errLine(msg.Err)
		m.setMessage("query of "+who+" failed: "+errLine(msg.Err), true)
		return m.reloadAfter(msg.ID)
	}
	if msg.Result.State != pending.StateSucceeded {
		why := rpcErrorText(msg.Result.Error)
		if why == "" {
			why = "the read " + stateWord(msg.Result.State)
		}
		m.queryErr[msg.ID] = why
		m.setMessage("query of "+who+" got no usable answer: "+trunc(why, 80)+"; nothing was resent, s asks again", true)
		return m.reloadAfter(msg.ID)
	}
	delete(m.queryErr, msg.ID)
	m.queried[msg.ID] = true
	m.noteDemoCall(msg.Result.Call)
	p := msg.Result.Call.Proposal
	switch p {
	case guard.ProposalApplied:
		m.setMessage("queried "+who+": the server has it, so the first attempt took effect. m marks it applied; r resends with the same key (a keyed server replays it)", false)
	case guard.ProposalNotFound:
		m.setMessage("queried "+who+": the server has no trace of it. r resends it with the same key; x abandons it", false)
	default:
		m.setMessage("queried "+who+": evidence stored (see details, enter); "+trunc(clean(resultText(msg.Result.Result, partStructured)), 60), false)
	}
	return m.reloadAfter(msg.ID)
}

// onRetried reports a retry's outcome.
func (m *Model) onRetried(msg retriedMsg) tea.Cmd {
	delete(m.retrying, msg.ID)
	if m.quitting && !m.writeInFlight() {
		return tea.Quit
	}
	m.dropQuitDialog()
	if msg.Err == nil {
		m.noteDemoCall(msg.Result.Call)
	}
	who := fmt.Sprintf("retried %s key %s (call %d)", displayName(msg.Tool), keyTail(msg.Key), msg.ID)
	var ser *guard.ServerMismatchError
	switch {
	case errors.As(msg.Err, &ser):
		m.setMessage(serverMismatchLine(ser, msg.ID, "retry"), true)
	case msg.Err != nil:
		m.setMessage("retry of call "+fmt.Sprint(msg.ID)+" failed: "+errLine(msg.Err), true)
	default:
		s := who + ": " + stateWord(msg.Result.State)
		if msg.Result.Replayed {
			s += ", replayed by the server: the first attempt's result, nothing done twice"
		}
		if msg.Result.State == pending.StateUnknown {
			s += " again (" + clean(msg.Result.Call.Reason) + "); nothing more was sent"
		}
		m.setMessage(s, msg.Result.State == pending.StateFailed)
		m.messageWarn = msg.Result.State == pending.StateUnknown
	}
	return tea.Batch(m.reloadAfter(msg.ID), m.readDemoOrders())
}

// serverMismatchLine says that a query or retry was refused because the
// call was made on another server, and what to run instead: the CLI goes
// to the call's own server when none is given.
func serverMismatchLine(e *guard.ServerMismatchError, id int64, command string) string {
	where := fmt.Sprintf("server %q", clean(e.Recorded))
	if e.RecordedIdentity != "" {
		where = trunc(clean(e.RecordedIdentity), 48)
	}
	return fmt.Sprintf("not sent: call %d was made on %s; run 'mcp-confirm %s %d' (it uses the call's own server)", id, where, command, id)
}

func (m *Model) onDecided(msg decidedMsg) tea.Cmd {
	if msg.Err != nil {
		m.setMessage(fmt.Sprintf("%s of call %d failed: %s", msg.Action, msg.ID, errLine(msg.Err)), true)
		return m.reloadAfter(msg.ID)
	}
	if msg.Action == pending.ActionAck {
		// Its hold is over now: the count and L drop it before the next
		// read of the journal confirms it.
		m.sh.late = slices.DeleteFunc(slices.Clone(m.sh.late), func(c pending.Call) bool { return c.ID == msg.ID })
		m.syncBindings()
		m.setMessage(fmt.Sprintf("acknowledged call %d (%s): identical calls will be sent again from now on", msg.ID, displayName(msg.Tool)), false)
		return m.reloadAfter(msg.ID)
	}
	done := map[pending.Action]string{pending.ActionAbandon: "abandoned", pending.ActionMark: "marked applied", pending.ActionNote: "noted"}[msg.Action]
	m.setMessage(fmt.Sprintf("%s %s key %s (call %d)", done, displayName(msg.Tool), keyTail(msg.Key), msg.ID), false)
	if m.demoCall.ID == msg.ID {
		switch msg.Action {
		case pending.ActionMark:
			m.demoCall.State = pending.StateApplied
		case pending.ActionAbandon:
			m.demoCall.State = pending.StateAbandoned
		}
	}
	return tea.Batch(m.reloadAfter(msg.ID), m.readDemoOrders())
}

// onCallDone: a call from the new-call form is over. An unknown outcome is
// put in front of the operator: the list switches to unknown with the call
// selected and a dialog (opened by an event, so it waits out the grace
// period before it takes keys) asks what to do.
func (m *Model) onCallDone(msg callDoneMsg) tea.Cmd {
	if !m.form.onDone(msg) {
		return nil
	}
	if m.quitting && !m.writeInFlight() {
		return tea.Quit
	}
	m.dropQuitDialog()
	res, err := msg.Result, msg.Err
	m.noteDemoCall(res.Call)
	var held *guard.HeldError
	var notRecorded *guard.OutcomeNotRecordedError
	switch {
	case errors.As(err, &held):
		m.setMessage(fmt.Sprintf("held, nothing sent: an identical call (%d) is %s; decide it first", held.CallID, stateWord(held.State)), true)
		return nil
	case errors.As(err, &notRecorded):
		// It went out: never say "not sent" of it.
		m.setMessage(fmt.Sprintf("%s (call %d) was sent, but the journal could not record how it ended: outcome unknown, NOT resent; fix the journal, it shows as unknown after a restart",
			displayName(msg.Tool), notRecorded.CallID), true)
		return nil
	case err != nil:
		m.setMessage(fmt.Sprintf("%s was not sent: %s", displayName(msg.Tool), errLine(err)), true)
		return nil
	}
	if res.Call.ID == 0 {
		m.setMessage(fmt.Sprintf("read %s: %s", displayName(msg.Tool), stateWord(res.State)), res.State != pending.StateSucceeded)
		return nil
	}
	who := fmt.Sprintf("%s key %s (call %d)", displayName(msg.Tool), keyTail(res.Key), res.Call.ID)
	switch res.State {
	case pending.StateUnknown:
		m.setMessage(fmt.Sprintf("%s: no answer (%s); outcome unknown, NOT resent", who, clean(res.Call.Reason)), false)
		m.messageWarn = true
		m.active = screenList
		cmd := m.list.showCall(pending.StateUnknown, res.Call)
		d := newUnknownDialog(m.sh, m.nextDialogID(), res.Call)
		m.dialog = d
		return tea.Batch(cmd, armCmd(d.ID(), m.sh.opts.Grace))
	case pending.StateSucceeded:
		extra := ""
		if res.Replayed {
			extra = " (replayed: the server had done it already)"
		}
		m.setMessage(fmt.Sprintf("%s: succeeded%s", who, extra), false)
	default:
		m.setMessage(fmt.Sprintf("%s: %s: %s", who, stateWord(res.State), clean(res.Call.Reason)), true)
	}
	return tea.Batch(m.list.refresh(), m.readDemoOrders())
}

// reloadAfter reloads the list, the calls that settled late and, if shown,
// the detail of a call.
func (m *Model) reloadAfter(id int64) tea.Cmd {
	cmds := []tea.Cmd{m.list.refresh(), m.scanLate()}
	if m.detail.loadedID() == id {
		cmds = append(cmds, loadCallCmd(m.sh.opts.Journal, id))
	}
	return tea.Batch(cmds...)
}

func (m *Model) setMessage(s string, isErr bool) {
	m.message, m.messageErr, m.busy, m.messageWarn, m.messageMark, m.messageOnce = s, isErr, false, false, "", false
}

// whyNot says in one line why the key just pressed did nothing. It is an
// answer to that key only: the next key, or another screen, takes it away,
// so it never reads as news about what is on screen later.
func (m *Model) whyNot(s string) {
	m.setMessage(s, true)
	m.messageOnce = true
}

// dropOneShot clears a whyNot line; what an action did stays.
func (m *Model) dropOneShot() {
	if m.messageOnce {
		m.setMessage("", false)
	}
}

func (m *Model) nextDialogID() int {
	m.dialogSeq++
	return m.dialogSeq
}

// errLine is an error as one line, without the guard's class prefix.
func errLine(err error) string {
	s := clean(err.Error())
	for _, p := range []string{"bad input: ", "not allowed: ", "unavailable: ", "held: "} {
		s = strings.TrimPrefix(s, p)
	}
	return s
}

// ShortHelp is the footer: the active screen's keys, then the app's.
func (m Model) ShortHelp() []key.Binding {
	var b []key.Binding
	if m.dialog != nil {
		b = m.dialog.ShortHelp()
	} else {
		b = m.activeScreen().ShortHelp()
	}
	if m.dialog != nil || m.activeScreen().Capturing() {
		return append(b, m.keys.ForceQuit) // q is a letter here
	}
	return append(b, m.keys.Help, m.keys.Quit)
}

// FullHelp is the ? view: the active screen's groups, then the app's.
func (m Model) FullHelp() [][]key.Binding {
	return append(m.activeScreen().FullHelp(), []key.Binding{m.keys.Help, m.keys.Quit, m.keys.ForceQuit})
}

// View draws the window: top bar, optional recovery banner, the active
// screen (or full help), a dialog over it, the message line, the short
// help and the status bar. It does no I/O and reads no clock.
func (m Model) View() string {
	st := m.sh.st
	var b strings.Builder
	b.WriteString(m.topBar())
	b.WriteByte('\n')
	if m.recovered > 0 {
		b.WriteString(st.Banner.Render(pad(fmt.Sprintf(" ⚠ %s recovered after an unclean shutdown: they were in flight when a process stopped, so their outcome is unknown. ", plural(m.recovered, "call")), m.w)))
		b.WriteByte('\n')
	}
	bh := m.bodyHeight()
	var body string
	if m.showHelp {
		hm := m.help
		hm.ShowAll = true
		body = st.Section.Render("Keys") + "\n\n" + hm.View(m)
	} else {
		body = m.activeScreen().View()
	}
	if m.dialog != nil {
		body = overlay(body, m.dialog.View(min(m.w-2, 76)), m.w, bh)
	}
	b.WriteString(fitHeight(body, m.w, bh))
	b.WriteByte('\n')
	b.WriteString(m.messageLine())
	b.WriteByte('\n')
	hm := m.help
	b.WriteString(trunc(hm.ShortHelpView(m.ShortHelp()), m.w))
	b.WriteByte('\n')
	b.WriteString(m.statusBar())
	return b.String()
}

func (m Model) topBar() string {
	st := m.sh.st
	title := st.Title.Render("mcp-confirm")
	left := title + st.Faint.Render(" · ") + st.Bold.Render(m.activeScreen().Title())
	right := ""
	if m.sh.opts.Demo {
		right = st.Badge.Demo.Render(" guided demo ") + " "
	}
	gap := m.w - ansi.StringWidth(left) - ansi.StringWidth(right)
	if gap < 1 {
		return trunc(left, m.w)
	}
	return left + strings.Repeat(" ", gap) + right
}

// messageLines is how many lines the message area takes: two, and one
// more in the guided demo, whose guide line has its own.
func (m *Model) messageLines() int {
	if m.sh.opts.Demo {
		return 3
	}
	return 2
}

// messageLine is the message area: what the last action did (to which
// call), and in the guided demo the next step under it. Each wraps at
// spaces into the lines it has (the guide keeps at least one); a cut is
// marked with "…".
func (m Model) messageLine() string {
	st := m.sh.st
	var msg string
	if m.message != "" {
		switch {
		case m.busy:
			msg = st.Info.Render("… " + m.message)
		case m.messageErr:
			msg = st.ErrorLine.Render("! " + m.message)
		case m.messageWarn && m.messageMark != "":
			msg = st.Warn.Render(m.messageMark + " " + m.message)
		case m.messageWarn:
			msg = st.Warn.Render(GlyphUnknown + " " + m.message)
		default:
			msg = st.Message.Render("✓ " + m.message)
		}
	}
	hint := ""
	if m.sh.opts.Demo {
		hint = st.Hint.Render("→ " + m.demoHint())
	}
	n := m.messageLines()
	lines := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(wrap(s, m.w), "\n")
	}
	// take keeps k lines of ls, the last one ending in "…" when cut.
	take := func(ls []string, k int) []string {
		if k <= 0 {
			return nil
		}
		if len(ls) > k {
			ls = slices.Clone(ls[:k])
			ls[k-1] = trunc(ls[k-1], m.w-1) + "…"
		}
		return ls
	}
	ml, hl := lines(msg), lines(hint)
	mn := min(len(ml), n)
	if len(hl) > 0 {
		mn = min(mn, n-1)
	}
	out := append(take(ml, mn), take(hl, n-mn)...)
	for len(out) < n {
		out = append(out, "")
	}
	for i := range out {
		out[i] = trunc(out[i], m.w)
	}
	return strings.Join(out[:n], "\n")
}

// statusBar: server name, state and session; journal path; counts.
func (m Model) statusBar() string {
	st := m.sh.st
	srv := m.sh.server
	name := displayName(srv.Name)
	if name == "" {
		name = "server"
	}
	state := string(srv.State)
	switch srv.State {
	case "", mcpclient.StateNew, mcpclient.StateStarting:
		state = "starting"
	}
	server := fmt.Sprintf(" %s %s", name, state)
	if srv.Session > 0 {
		server += fmt.Sprintf(" · session %d", srv.Session)
	}
	c := m.sh.counts
	counts := fmt.Sprintf("%d unknown", c[pending.StateUnknown])
	if n := c[pending.StateInFlight]; n > 0 {
		counts += fmt.Sprintf(" · %d in flight", n)
	}
	if n := len(m.sh.late); n > 0 {
		counts += fmt.Sprintf(" · %s %d settled late", GlyphLate, n)
	}
	path := ""
	if m.sh.opts.Journal != nil {
		path = "journal " + homeTilde(clean(m.sh.opts.Journal.Path()), m.sh.opts.Home)
	}
	avail := m.w - ansi.StringWidth(server) - ansi.StringWidth(counts) - 6
	if avail < 12 {
		path = ""
	} else if ansi.StringWidth(path) > avail {
		path = ansi.TruncateLeft(path, ansi.StringWidth(path)-avail+1, "…")
	}
	line := server + " │ " + counts
	if path != "" {
		line += " │ " + path
	}
	return st.StatusBar.Render(pad(line, m.w))
}

// fitHeight pads or cuts a block to exactly h lines of at most w cells.
func fitHeight(s string, w, h int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for i, l := range lines {
		if ansi.StringWidth(l) > w {
			lines[i] = ansi.Truncate(l, w, "…")
		}
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}

// overlay draws box centred over body (both of at most w×h cells).
func overlay(body, box string, w, h int) string {
	lines := strings.Split(fitHeight(body, w, h), "\n")
	bl := strings.Split(box, "\n")
	bw := 0
	for _, l := range bl {
		bw = max(bw, ansi.StringWidth(l))
	}
	top := max(0, (h-len(bl))/2)
	left := max(0, (w-bw)/2)
	for i, l := range bl {
		y := top + i
		if y >= len(lines) {
			break
		}
		under := lines[y]
		pre := ansi.Truncate(under, left, "")
		if n := ansi.StringWidth(pre); n < left {
			pre += strings.Repeat(" ", left-n)
		}
		l = pad(l, bw)
		post := ""
		if uw := ansi.StringWidth(under); uw > left+bw {
			post = ansi.TruncateLeft(under, left+bw, "")
		}
		lines[y] = pre + l + post
	}
	return strings.Join(lines, "\n")
}

// showScreenMsg asks the root to switch screens (from a screen).
type showScreenMsg struct {
	Screen screenID
	Tool   string // the tool for the form; "call" for the tools screen opened by c
}

func showScreen(s screenID, tool string) tea.Cmd {
	return func() tea.Msg { return showScreenMsg{Screen: s, Tool: tool} }
}

// openDecisionMsg asks the root to open a decision dialog (from a dialog).
type openDecisionMsg struct {
	Action pending.Action
	Call   pending.Call
}

// openDecision opens the dialog for an action on a call. Nothing is sent
// or written until the dialog's Yes.
func (m *Model) openDecision(a pending.Action, c pending.Call) tea.Cmd {
	ctx, e := m.sh.opts.Context, m.sh.opts.Engine
	id, tool, key := c.ID, c.Tool, c.Key
	did := m.nextDialogID()
	m.message = ""
	switch a {
	case pending.ActionQuery:
		m.dialog = newQueryDialog(m.sh, did, c, func(o guard.QueryOptions) tea.Cmd { return queryCmd(ctx, e, id, tool, key, o) })
	case pending.ActionRetry:
		m.dialog = newRetryDialog(m.sh, did, c, func(note string) tea.Cmd { return retryCmd(ctx, e, id, tool, key, note) })
	case pending.ActionAbandon:
		m.dialog = newAbandonDialog(m.sh, did, c, func(note string) tea.Cmd { return decideCmd(ctx, e, a, id, tool, key, note) })
	case pending.ActionMark:
		m.dialog = newMarkDialog(m.sh, did, c, func(note string) tea.Cmd { return decideCmd(ctx, e, a, id, tool, key, note) })
	case pending.ActionNote:
		m.dialog = newNoteDialog(m.sh, did, c, func(note string) tea.Cmd { return decideCmd(ctx, e, a, id, tool, key, note) })
	case pending.ActionAck:
		m.dialog = newAckDialog(m.sh, did, c, func(note string) tea.Cmd { return decideCmd(ctx, e, a, id, tool, key, note) })
	}
	return nil
}

// decisionBusy is the status line while a decision on c runs.
func decisionBusy(sh *shared, a pending.Action, c pending.Call) string {
	who := displayName(c.Tool) + " key " + keyTail(c.Key)
	return map[pending.Action]string{
		pending.ActionQuery:   "querying " + who + "…",
		pending.ActionRetry:   fmt.Sprintf("retrying %s as attempt %d… (no answer and no progress for %s → unknown again; the outcome shows here)", who, c.AttemptCount+1, sh.writeClock(c.Tool)),
		pending.ActionAbandon: "abandoning " + who + "…",
		pending.ActionMark:    "marking " + who + " applied…",
		pending.ActionNote:    "saving the note on " + who + "…",
		pending.ActionAck:     "acknowledging the late settle of " + who + "…",
	}[a]
}
