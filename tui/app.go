// Package tui is mcp-confirm's operator console: a Bubble Tea program that
// shows every write call whose outcome is unknown and turns the operator's
// keystrokes into guard decisions (query, retry with the same key, abandon,
// mark applied, note). It writes nothing itself: every change goes through
// guard, every read through the journal, all of it in tea.Cmds.
//
// The root model is in four files: app.go routes (options, the model,
// Update's fixed order, screen switching), decide.go has the decision
// keys and their dialogs, results.go the handlers of what came back, and
// chrome.go draws the bars, message lines and help around the screen.
// bulk.go is the reconcile screen (a bulk query of the selected calls) and
// the root's keys and handlers for it; login.go, likewise, the login
// screen of a server that asked for authorization (O).
package tui

import (
	"context"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/spinner"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
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
	// KeyArg is the argument the tool's idempotency key goes in: the
	// policy's key_arg, else the schema's (guard.Guard.KeyArg).
	KeyArg(t mcp.Tool) string
	// Reconcile queries a call and keeps the answer, sorted into a finding
	// (guard.Guard.Reconcile, as 'mcp-confirm reconcile' runs it).
	Reconcile(ctx context.Context, c pending.Call, o guard.ReconcileOptions) guard.Reconciled
	// AcceptFound marks a call applied with the evidence of its latest
	// query, if that query found it (guard.Guard.AcceptFound).
	AcceptFound(ctx context.Context, id int64, note string) (pending.Call, string, error)
	// Compensate has the policy's cancel_tool called to undo a call: a
	// guarded write of its own, linked to it (guard.Guard.Compensate).
	Compensate(ctx context.Context, id int64, o guard.CompensateOptions) (guard.Result, error)
	// CompensationPreview is the cancel Compensate would send for c, or
	// why c cannot be compensated; it sends and records nothing
	// (guard.Guard.CompensationPreview).
	CompensationPreview(c pending.Call) (tool string, args map[string]any, err error)
}

// ServerStatus is what the status bar shows of the server (mcpclient.Client).
type ServerStatus interface {
	ServerInfo() mcpclient.ServerInfo
	Session() int
	State() mcpclient.SessionState
}

// Servers is a console over several servers (mcp-confirm --config FILE
// without --server, or a journal's own servers). Options.Engine then sends
// each call's query, retry and other decisions to the server that call was
// made on (never another); a new call goes to the server picked for it
// first; the status bar shows each server's state.
type Servers interface {
	// Names are the servers a new call can be made on, in the order shown:
	// their names in the host config (or the journal's aliases).
	Names() []string
	// Engine is the named server's engine (one of Names), whose session
	// starts on first use: its tools and the new calls made on it. nil for
	// a name it does not know.
	Engine(name string) Engine
	// Status is the named server's session, for the status bar; nil for a
	// name it does not know.
	Status(name string) ServerStatus
}

// CallTools is an Engine over several servers that can list the tools of
// the server a call was made on (reached by its recorded identity, as its
// retry would be). The console then judges that call's retry and cancel
// by them; without it, only by the picked server's, when it is the call's.
type CallTools interface {
	ToolsOfCall(ctx context.Context, c pending.Call) ([]mcp.Tool, error)
}

// Options wire the console to an engine.
type Options struct {
	// Context ends guarded calls the console started when it is cancelled.
	Context context.Context
	Journal Journal
	Engine  Engine
	Server  ServerStatus
	// Servers, when set, makes this a console over several servers; Server
	// is then unused and Engine routes each call to its own server.
	Servers Servers
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
	// Concurrency is how many queries a bulk query (S) has out at once.
	// Default 8, as 'mcp-confirm reconcile'.
	Concurrency int
	// Login, when set, is offered (O) when a remote server's start is
	// refused for want of a login (mcpclient.StartError.NeedsLogin): it
	// logs in as 'mcp-confirm login --url' does. nil: the message says
	// authorization is needed, and no more.
	Login LoginFunc
	// LoginWait bounds the login's browser step, as login's --wait.
	// Default 5 minutes.
	LoginWait time.Duration
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
	screenBulk
	screenLogin
)

// shared is the state every screen reads; only the root writes it.
type shared struct {
	opts    Options
	st      *Styles
	now     time.Time
	server  serverSnap
	servers []serverSnap // each server's, over several (Options.Servers)
	// picked is the server whose tools are listed and new calls go to,
	// over several servers; "" before one is picked.
	picked string
	// callTools are the tools listed by the servers calls were made on,
	// over several servers, by the calls' recorded identity (CallTools);
	// callToolsTried, each identity asked once, listed or not.
	callTools      map[string][]toolInfo
	callToolsTried map[string]bool
	counts         map[pending.State]int
	tools          []toolInfo
	toolsErr       error
	toolsLoaded    bool
	// policyProblems are the parts of the policy that do not apply to the
	// tools last listed (a section for a tool the server does not list, a
	// query_tool that is missing or a write, ...), shown as a banner.
	policyProblems []string
	// late is every call that settled late and is not acknowledged, oldest
	// late settle first; lateKnown once it has been read.
	late      []pending.Call
	lateKnown bool
	// cancel ends the calls the console started, with a cause the journal
	// records as their reason (guard.CancelCause).
	cancel context.CancelCauseFunc
	// bodyH is the height under the bars (Model.bodyHeight), where a
	// dialog is drawn: a dialog with a list sizes it to fit.
	bodyH int
}

// multi: a console over several servers (Options.Servers).
func (sh *shared) multi() bool { return sh.opts.Servers != nil }

// newCallEngine is the engine new calls and the tools list go to: the one
// server's, or the picked server's (nil before one is picked).
func (sh *shared) newCallEngine() Engine {
	if !sh.multi() {
		return sh.opts.Engine
	}
	if sh.picked == "" {
		return nil
	}
	return sh.opts.Servers.Engine(sh.picked)
}

// listTools lists the tools of the server new calls go to, which starts
// it; over several servers, nothing until one is picked.
func (sh *shared) listTools() tea.Cmd {
	return listToolsCmd(sh.picked, sh.newCallEngine(), sh.opts.Policy)
}

// pick makes name the server the tools list and new calls are for.
func (sh *shared) pick(name string) tea.Cmd {
	sh.picked = name
	sh.tools, sh.toolsErr, sh.toolsLoaded, sh.policyProblems = nil, nil, false, nil
	return sh.listTools()
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

// listsToolsOf: the tools of the server c was made on are listed. Over
// several servers, they are those its own server listed for it
// (CallTools), else the picked server's when that is the call's.
func (sh *shared) listsToolsOf(c pending.Call) bool {
	_, ok := sh.toolsListOf(c)
	return ok
}

// toolsListOf are the tools of the server c was made on, if listed.
func (sh *shared) toolsListOf(c pending.Call) ([]toolInfo, bool) {
	if !sh.multi() {
		return sh.tools, sh.toolsLoaded
	}
	if ts, ok := sh.callTools[string(c.ServerIdentity)]; ok && len(c.ServerIdentity) > 0 {
		return ts, true
	}
	if sh.toolsLoaded && sh.picked != "" && (sh.picked == c.ServerAlias || (c.ServerAlias == "" && sh.picked == c.Server)) {
		return sh.tools, true
	}
	return nil, false
}

// toolOf is the tool name as the server c was made on lists it; false
// when that server's tools are not listed. Over several servers, another
// server's tool of the same name says nothing about c's: its key
// argument must not make a retry of c look safe.
func (sh *shared) toolOf(c pending.Call, name string) (toolInfo, bool) {
	ts, _ := sh.toolsListOf(c)
	return findTool(ts, name)
}

// tool is the tool name of the server new calls go to.
func (sh *shared) tool(name string) (toolInfo, bool) { return findTool(sh.tools, name) }

func findTool(ts []toolInfo, name string) (toolInfo, bool) {
	for _, t := range ts {
		if t.Tool.Name == name {
			return t, true
		}
	}
	return toolInfo{}, false
}

// callToolsCmd lists, once per console run, the tools of the server c was
// made on, when the console is over several servers, its engine can
// (CallTools) and they are not listed yet; nil otherwise.
func (sh *shared) callToolsCmd(c pending.Call) tea.Cmd {
	ct, ok := sh.opts.Engine.(CallTools)
	id := string(c.ServerIdentity)
	if !sh.multi() || !ok || id == "" || sh.listsToolsOf(c) || sh.callToolsTried[id] {
		return nil
	}
	sh.callToolsTried[id] = true
	e := sh.opts.Engine
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), toolsTimeout)
		defer cancel()
		tools, err := ct.ToolsOfCall(ctx, c)
		msg := toolsLoadedMsg{Identity: id, Err: err}
		if err == nil {
			msg.Tools = classifyTools(e, tools)
		}
		return msg
	}
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
	bulk   *bulkScreen
	login  *loginScreen
	active screenID

	dialog     dialog
	dialogSeq  int
	quitDialog int // the ID of the quit question, when it was asked
	showHelp   bool

	message      string // what the last action did, to which call
	messageErr   bool
	messageWarn  bool             // an outcome to act on, not an error
	messageMark  string           // the warning's glyph when not GlyphUnknown
	messageOnce  bool             // a one-shot reason why a key did nothing: gone at the next key or screen
	queried      map[int64]bool   // calls the operator queried this session (the demo's hints)
	queryErr     map[int64]string // calls whose last query this session got no answer, and why
	retrying     map[int64]bool   // calls with a retry in flight from this console
	compensating map[int64]bool   // calls whose cancel (K) is in flight from this console
	// awaiting is the decision whose dialog opens once its call's server
	// has listed its tools (over several servers; shared.callToolsCmd).
	awaiting   *awaitedDecision
	quitting   bool         // quit confirmed: waiting for the write in flight to be recorded
	demoOrders demoOrders   // the demo server's orders, from its find_orders
	demoCall   pending.Call // the demo's create_order call, as last seen
	busy       bool         // message says what is running
	recovered  int
	// The late scan: one at a time; a change while it runs asks for another.
	lateScanning, lateAgain bool
	lateTook                time.Duration
	// offer is the server O logs in to: its start was refused for want of
	// a login (login.go); nil: none. loginSeq numbers the logins run.
	offer    *loginOffer
	loginSeq int
	w, h     int
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
	if o.Concurrency <= 0 {
		o.Concurrency = defaultConcurrency
	}
	if o.LoginWait <= 0 {
		o.LoginWait = defaultLoginWait
	}
	ctx, cancel := context.WithCancelCause(o.Context)
	o.Context = ctx
	sh := &shared{opts: o, st: NewStyles(o.Renderer), now: o.Now(), counts: map[pending.State]int{}, cancel: cancel,
		callTools: map[string][]toolInfo{}, callToolsTried: map[string]bool{}}
	hm := help.New()
	hm.Styles.ShortKey = sh.st.Key
	hm.Styles.FullKey = sh.st.Key
	hm.Styles.ShortDesc = sh.st.Subtle
	hm.Styles.FullDesc = sh.st.Subtle
	hm.Styles.ShortSeparator = sh.st.Faint
	hm.Styles.FullSeparator = sh.st.Faint
	hm.Styles.Ellipsis = sh.st.Faint
	m := Model{sh: sh, keys: defaultAppKeys(), help: hm, w: 80, h: 24, queried: map[int64]bool{},
		queryErr: map[int64]string{}, retrying: map[int64]bool{}, compensating: map[int64]bool{}}
	m.lateScanning = o.Journal != nil // Init starts the first scan
	if o.Journal != nil {
		m.recovered = len(o.Journal.Recovered())
	}
	m.list = newListScreen(sh)
	m.detail = newDetailScreen(sh)
	m.tools = newToolsScreen(sh)
	m.form = newFormScreen(sh)
	m.bulk = newBulkScreen(sh)
	m.login = &loginScreen{sh: sh, keys: defaultLoginKeys()}
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
		m.sh.listTools(),
		nowCmd(m.sh.opts),
		tickCmd(m.sh.opts.Tick, m.sh.opts),
		watchCmd(m.sh.opts.Watch),
	)
}

// Update routes messages in a fixed order: size, the open dialog, global
// keys, app-level results, then the active screen only.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	nm, cmd := m.update(msg)
	if endsServerWork(msg) { // a server may have started, or died: show it now, not at the next tick
		cmd = tea.Batch(cmd, nowCmd(nm.(Model).sh.opts))
	}
	return nm, cmd
}

// endsServerWork says msg is the end of something a server did for one
// call (its tools listed, a query, a retry, a compensation, a new call). A
// bulk run's answers are left to the ticks: one snapshot per answer of a
// thousand would be a thousand reads of every server's state.
func endsServerWork(msg tea.Msg) bool {
	switch msg.(type) {
	case toolsLoadedMsg, queriedMsg, retriedMsg, compensatedMsg, callDoneMsg:
		return true
	}
	return false
}

func (m Model) update(msg tea.Msg) (tea.Model, tea.Cmd) {
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
	m.sh.bodyH = bh
	for _, s := range m.screens() {
		s.SetSize(w, bh)
	}
}

// screens are every screen, the active one or not.
func (m *Model) screens() []screen {
	return []screen{m.list, m.detail, m.tools, m.form, m.bulk, m.login}
}

func (m *Model) activeScreen() screen {
	switch m.active {
	case screenDetail:
		return m.detail
	case screenTools:
		return m.tools
	case screenForm:
		return m.form
	case screenBulk:
		return m.bulk
	case screenLogin:
		return m.login
	}
	return m.list
}

// updateActive gives the active screen a message. After a key, which may
// have moved the selection, the decision keys follow the selected call.
func (m *Model) updateActive(msg tea.Msg) tea.Cmd {
	_, cmd := m.activeScreen().Update(msg)
	if _, ok := msg.(tea.KeyMsg); ok {
		m.syncBindings()
	}
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
			switch a, c := d.Decision(); a {
			case pending.ActionRetry:
				m.retrying[c.ID] = true
			case pending.ActionCompensate:
				m.compensating[c.ID] = true
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
	if cmd, handled := m.loginKey(k); handled {
		return cmd, true
	}
	if m.active == screenList {
		if cmd, handled := m.lateKey(k); handled {
			return cmd, true
		}
		if cmd, handled := m.reconcileKey(k); handled {
			return cmd, true
		}
	}
	if m.active == screenBulk {
		if cmd, handled := m.bulkKey(k); handled {
			return cmd, true
		}
	}
	return m.decisionKey(k)
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
		if msg.Identity != "" {
			return m.onCallTools(msg), true
		}
		if msg.Server != m.sh.picked {
			return nil, true // the tools of a server picked before this one
		}
		m.sh.tools, m.sh.toolsErr, m.sh.toolsLoaded = msg.Tools, msg.Err, msg.Err == nil
		if msg.Err == nil {
			m.sh.policyProblems = msg.PolicyProblems
			m.setSize(m.w, m.h) // the banner takes lines from the screen
		}
		m.tools.onTools()
		m.syncBindings() // K depends on the cancel_tool being listed, as a write
		m.onToolsListed(msg)
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
	case compensateCheckedMsg:
		return m.onCompensateChecked(msg), true
	case compensatedMsg:
		return m.onCompensated(msg), true
	case decidedMsg:
		return m.onDecided(msg), true
	case callDoneMsg:
		return m.onCallDone(msg), true
	case showScreenMsg:
		return m.show(msg.Screen, msg.Tool), true
	case pickedAllMsg:
		m.onPickedAll(msg)
		return nil, true
	case reconciledMsg:
		return m.onReconciled(msg), true
	case acceptConfirmedMsg:
		return m.bulk.startAccept(msg.Run, msg.IDs), true
	case acceptedMsg:
		return m.onAccepted(msg), true
	case bulkRetryConfirmedMsg:
		return m.startBulkRetry(msg), true
	case bulkRetriedMsg:
		return m.onBulkRetried(msg), true
	case loginURLMsg:
		return m.onLoginURL(msg), true
	case loginDoneMsg:
		return m.onLoginDone(msg), true
	case errMsg:
		m.setMessage(errLine(msg.Err), true)
		return nil, true
	case spinner.TickMsg, progressMsg, progressClosedMsg:
		_, cmd := m.form.Update(msg) // the call in flight, whichever screen shows
		return cmd, true
	}
	return nil, false
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
			cmd = m.sh.listTools()
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

// showBulk switches to the reconcile screen.
func (m *Model) showBulk() {
	m.active = screenBulk
	m.showHelp = false
}

// showScreenMsg asks the root to switch screens (from a screen).
type showScreenMsg struct {
	Screen screenID
	Tool   string // the tool for the form; "call" for the tools screen opened by c
}

func showScreen(s screenID, tool string) tea.Cmd {
	return func() tea.Msg { return showScreenMsg{Screen: s, Tool: tool} }
}
