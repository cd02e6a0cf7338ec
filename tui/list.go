package tui

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// tab is one state filter of the calls list. Work queues (unknown, in
// flight, failed) are oldest first; history is newest first.
type tab struct {
	State       pending.State // "" for all
	OldestFirst bool
}

var tabs = []tab{
	{pending.StateUnknown, true},
	{pending.StateInFlight, true},
	{pending.StateFailed, true},
	{pending.StateSucceeded, false},
	{pending.StateApplied, false},
	{pending.StateAbandoned, false},
	{"", false},
}

// previewHeight is the lines under the list that describe the selection.
const previewHeight = 6

// listScreen is the calls list. It is virtualised: it holds one window of
// rows read by keyset paging around what is on screen (a few pages), never
// the journal, so a million calls cost what ten do.
type listScreen struct {
	sh   *shared
	keys listKeys

	tab       int
	tool      string // exact tool filter; "" none
	filtering bool
	filter    textinput.Model
	fkeys     filterKeys

	rows    []pending.Call // the window, in list order
	sc      scroller       // the selected and first visible rows, in rows
	atStart bool           // nothing before rows[0]
	atEnd   bool           // nothing after the last row
	pos     int            // the selection's index in the whole list (estimated after jumps)

	gen, minGen, applied int // load sequence: drop loads older than the tab or the last applied one
	loading              bool
	loaded               bool
	err                  error
	cnt                  map[pending.State]int

	w, h int

	// picked are the calls selected for a bulk query (space, *), by ID,
	// as last seen; they stay picked across tabs and filters until S
	// queries them.
	picked map[int64]pending.Call

	// rowCache keeps rendered rows while their data, selection, age and
	// width are unchanged (most frames redraw identical rows).
	rowCache map[int64]cachedRow
}

type cachedRow struct{ key, out string }

// parseFilter reads the list's filter text (/): words of the form
// server:NAME name the server, tool:NAME or a bare word the tool; both must
// match exactly. The last of each kind counts.
func parseFilter(text string) (tool, server string) {
	for _, w := range strings.Fields(text) {
		switch {
		case strings.HasPrefix(w, "server:"):
			server = strings.TrimPrefix(w, "server:")
		case strings.HasPrefix(w, "tool:"):
			tool = strings.TrimPrefix(w, "tool:")
		default:
			tool = w
		}
	}
	return tool, server
}

// filterText says what the filter keeps, as the list's banner shows it.
func filterText(text string) string {
	tool, server := parseFilter(text)
	var parts []string
	if tool != "" {
		parts = append(parts, "tool = "+displayName(tool))
	}
	if server != "" {
		parts = append(parts, "server = "+displayName(server))
	}
	return strings.Join(parts, ", ")
}

func newListScreen(sh *shared) *listScreen {
	ti := textinput.New()
	ti.Prompt = "filter: "
	ti.Placeholder = "a tool name, server:NAME, or both; enter to apply, esc to clear"
	ti.CharLimit = 200
	ti.Cursor.SetMode(cursor.CursorStatic)
	return &listScreen{sh: sh, keys: defaultListKeys(), filter: ti, fkeys: defaultFilterKeys(), cnt: map[pending.State]int{},
		picked: map[int64]pending.Call{}}
}

func (l *listScreen) SetSize(w, h int) {
	l.w, l.h = w, h
	l.filter.Width = max(10, w-10)
	l.clampView()
}

// page is the number of rows visible.
func (l *listScreen) page() int {
	h := l.h - 2 // tabs, header
	if l.h >= 16 {
		h -= previewHeight
	}
	if l.filtering || l.tool != "" {
		h--
	}
	return max(h, 1)
}

func (l *listScreen) query() listQuery {
	t := tabs[l.tab]
	tool, server := parseFilter(l.tool)
	q := listQuery{Tool: tool, Server: server, OldestFirst: t.OldestFirst}
	if t.State != "" {
		q.States = []pending.State{t.State}
	}
	return q
}

// load asks for a window; pages before and after the anchor.
func (l *listScreen) load(kind anchorKind, anchor pending.Call, selectID int64) tea.Cmd {
	if l.sh.opts.Journal == nil {
		return nil
	}
	l.gen++
	l.loading = true
	p := l.page()
	return loadWindowCmd(l.sh.opts.Journal, l.gen, l.query(), kind, anchor, 2*p, 3*p, selectID)
}

// reload starts the tab over (a new tab or filter): older loads are dropped.
func (l *listScreen) reload(kind anchorKind) tea.Cmd {
	cmd := l.load(kind, pending.Call{}, 0)
	l.minGen = l.gen
	l.pos = 0
	return cmd
}

// refresh re-reads the window where it is (the journal changed).
func (l *listScreen) refresh() tea.Cmd {
	if len(l.rows) == 0 {
		return l.load(anchorStart, pending.Call{}, 0)
	}
	return l.load(anchorAt, l.rows[l.sc.top], 0)
}

// showCall switches to a state's tab and selects a call in it.
func (l *listScreen) showCall(st pending.State, c pending.Call) tea.Cmd {
	for i, t := range tabs {
		if t.State == st {
			l.tab = i
		}
	}
	cmd := l.load(anchorAt, c, c.ID)
	l.minGen = l.gen
	return cmd
}

// jumpTo selects a call in its state's tab, clearing a tool filter that
// would hide it.
func (l *listScreen) jumpTo(c pending.Call) tea.Cmd {
	if tool, server := parseFilter(l.tool); (tool != "" && tool != c.Tool) ||
		(server != "" && server != c.ServerAlias && server != c.Server) {
		l.tool = ""
	}
	return l.showCall(c.State, c)
}

// onWindow applies a loaded window, keeping the selected and top rows
// where they are (the operator may have moved while it loaded).
func (l *listScreen) onWindow(msg windowLoadedMsg) tea.Cmd {
	if msg.Gen < l.minGen || msg.Gen < l.applied {
		return nil
	}
	l.applied = msg.Gen
	if msg.Gen == l.gen {
		l.loading = false
	}
	if msg.Err != nil {
		l.err = msg.Err
		return nil
	}
	l.err = nil
	var selID, topID int64
	if c, ok := l.Selected(); ok && msg.Gen != l.minGen { // a new tab or jump starts where it loads
		selID, topID = c.ID, l.rows[l.sc.top].ID
	}
	if msg.SelectID != 0 {
		selID = msg.SelectID
	}
	first := !l.loaded
	l.loaded = true
	l.cnt = msg.Counts
	l.rows, l.atStart, l.atEnd = msg.Calls, msg.AtStart, msg.AtEnd
	l.sc.top = min(msg.Anchor, max(0, len(l.rows)-1))
	l.sc.cur = l.sc.top
	if i := l.indexOf(topID); i >= 0 {
		l.sc.top = i
	}
	if i := l.indexOf(selID); i >= 0 {
		l.sc.cur = i
	} else if !first && selID != 0 {
		l.sc.cur = min(l.sc.top, max(0, len(l.rows)-1))
	}
	if msg.End && len(l.rows) > 0 {
		l.sc.cur = len(l.rows) - 1
		l.sc.top = max(0, len(l.rows)-l.page())
	}
	if msg.AtStart && l.sc.cur < len(l.rows) {
		l.pos = l.sc.cur
	}
	if msg.AtEnd && len(l.rows) > 0 {
		l.pos = l.total() - (len(l.rows) - l.sc.cur)
	}
	l.clampView()
	return nil
}

func (l *listScreen) indexOf(id int64) int {
	if id == 0 {
		return -1
	}
	for i := range l.rows {
		if l.rows[i].ID == id {
			return i
		}
	}
	return -1
}

func (l *listScreen) counts() map[pending.State]int { return l.cnt }

// total is the number of calls in the tab (unknown with a tool filter).
func (l *listScreen) total() int {
	st := tabs[l.tab].State
	if st == "" {
		n := 0
		for _, v := range l.cnt {
			n += v
		}
		return n
	}
	return l.cnt[st]
}

func (l *listScreen) Title() string { return "calls" }

// Capturing: the tool filter has the keys.
func (l *listScreen) Capturing() bool          { return l.filtering }
func (l *listScreen) decisions() *decisionKeys { return &l.keys.decisionKeys }

// pressedLate: k is L, enabled or not (the root answers it, with a
// reason when no call settled late).
func (l *listScreen) pressedLate(k tea.KeyMsg) bool {
	return key.Matches(k, l.keys.Late) || pressedDisabled(k, l.keys.Late)
}

// syncLate enables L while n calls wait for an acknowledgement.
func (l *listScreen) syncLate(n int) { l.keys.Late.SetEnabled(n > 0) }

// empty: no call is held (the tab has none, or none is read yet).
func (l *listScreen) empty() bool { return len(l.rows) == 0 }

// Selected is the call under the cursor: the decision keys act on it.
func (l *listScreen) Selected() (pending.Call, bool) {
	if l.sc.cur < 0 || l.sc.cur >= len(l.rows) {
		return pending.Call{}, false
	}
	return l.rows[l.sc.cur], true
}

// clampView keeps the selection on screen.
func (l *listScreen) clampView() { l.sc.clamp(len(l.rows), l.page()) }

// move changes the selection by d rows, fetching the next window when the
// selection nears an edge of the one held.
func (l *listScreen) move(d int) tea.Cmd {
	if len(l.rows) == 0 {
		return nil
	}
	p := l.page()
	l.pos += l.sc.move(d, len(l.rows), p)
	if l.loading {
		return nil
	}
	if (!l.atEnd && len(l.rows)-1-l.sc.cur < p) || (!l.atStart && l.sc.cur < p) {
		return l.load(anchorAt, l.rows[l.sc.top], 0)
	}
	return nil
}

func (l *listScreen) Update(msg tea.Msg) (screen, tea.Cmd) {
	k, ok := msg.(tea.KeyMsg)
	if !ok {
		if l.filtering {
			var cmd tea.Cmd
			l.filter, cmd = l.filter.Update(msg)
			return l, cmd
		}
		return l, nil
	}
	if l.filtering {
		return l, l.updateFilter(k)
	}
	p := l.page()
	switch {
	case key.Matches(k, l.keys.Down):
		return l, l.move(1)
	case key.Matches(k, l.keys.Up):
		return l, l.move(-1)
	case key.Matches(k, l.keys.PageDown):
		return l, l.move(p)
	case key.Matches(k, l.keys.PageUp):
		return l, l.move(-p)
	case key.Matches(k, l.keys.Top):
		return l, l.reload(anchorStart)
	case key.Matches(k, l.keys.Bottom):
		cmd := l.reload(anchorEnd)
		l.pos = max(0, l.total()-1)
		return l, cmd
	case key.Matches(k, l.keys.NextTab):
		l.tab = (l.tab + 1) % len(tabs)
		return l, l.reload(anchorStart)
	case key.Matches(k, l.keys.PrevTab):
		l.tab = (l.tab + len(tabs) - 1) % len(tabs)
		return l, l.reload(anchorStart)
	case key.Matches(k, l.keys.Filter):
		l.filtering = true
		l.filter.SetValue(l.tool)
		l.clampView()
		return l, l.filter.Focus()
	case key.Matches(k, l.keys.Detail):
		if _, ok := l.Selected(); ok {
			return l, showScreen(screenDetail, "")
		}
	case key.Matches(k, l.keys.NewCall):
		return l, showScreen(screenTools, "call")
	case key.Matches(k, l.keys.Tools):
		return l, showScreen(screenTools, "")
	case key.Matches(k, l.keys.Pick):
		if c, ok := l.Selected(); ok {
			l.togglePick(c)
			return l, l.move(1)
		}
	case key.Matches(k, l.keys.PickAll):
		if l.sh.opts.Journal != nil {
			return l, pickAllCmd(l.sh.opts.Journal, l.query())
		}
	}
	return l, nil
}

// togglePick selects c for a bulk query, or unselects it.
func (l *listScreen) togglePick(c pending.Call) {
	if _, ok := l.picked[c.ID]; ok {
		delete(l.picked, c.ID)
	} else {
		l.picked[c.ID] = c
	}
}

// onPickedAll selects every call of the filtered list, or, when all of
// them are selected already, unselects them. It returns how many changed
// and whether they were selected.
func (l *listScreen) onPickedAll(calls []pending.Call) (n int, selected bool) {
	all := true
	for _, c := range calls {
		if _, ok := l.picked[c.ID]; !ok {
			all = false
			break
		}
	}
	for _, c := range calls {
		if all {
			delete(l.picked, c.ID)
		} else if _, ok := l.picked[c.ID]; !ok {
			l.picked[c.ID] = c
			n++
		}
	}
	if all {
		return len(calls), false
	}
	return n, true
}

// takePicked is the selection, in id order, which it clears: S queries it.
func (l *listScreen) takePicked() []pending.Call {
	out := make([]pending.Call, 0, len(l.picked))
	for _, c := range l.picked {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b pending.Call) int { return cmp.Compare(a.ID, b.ID) })
	clear(l.picked)
	return out
}

func (l *listScreen) updateFilter(k tea.KeyMsg) tea.Cmd {
	switch {
	case key.Matches(k, l.fkeys.Apply):
		l.filtering = false
		l.filter.Blur()
		l.tool = strings.TrimSpace(l.filter.Value())
		return l.reload(anchorStart)
	case key.Matches(k, l.fkeys.Cancel):
		l.filtering = false
		l.filter.Blur()
		had := l.tool != ""
		l.tool = ""
		if had {
			return l.reload(anchorStart)
		}
		return nil
	}
	var cmd tea.Cmd
	l.filter, cmd = l.filter.Update(k)
	return cmd
}

func (l *listScreen) ShortHelp() []key.Binding {
	if l.filtering {
		return []key.Binding{l.fkeys.Apply, l.fkeys.Cancel}
	}
	k := l.keys
	if n := len(l.picked); n > 0 {
		// A selection: querying it leads.
		s := k.Reconcile
		s.SetHelp(s.Help().Key, fmt.Sprintf("query %d selected", n))
		return []key.Binding{s, k.Pick, k.PickAll, k.Query, k.Retry, k.Abandon, k.Mark, k.Note, k.Detail, k.NextTab}
	}
	if _, ok := l.Selected(); !ok {
		// Nothing to decide on: the decision keys show, dimmed, in one
		// entry that says what they need, after what can be done now.
		keys := strings.Join([]string{k.Query.Help().Key, k.Retry.Help().Key, k.Abandon.Help().Key, k.Mark.Help().Key, k.Note.Help().Key}, " ")
		return []key.Binding{k.NewCall, k.NextTab, k.Late, l.dimmed(k.Query, keys, "need a call")}
	}
	return []key.Binding{k.Ack, k.Query, k.Retry, k.Abandon, k.Mark, k.Compensate, k.Pick, k.Note, k.Detail, k.NewCall, k.NextTab, k.Late}
}

func (l *listScreen) FullHelp() [][]key.Binding {
	k := l.keys
	decide := []key.Binding{k.Query, k.Retry, k.Abandon, k.Mark, k.Note, k.Compensate, k.Ack}
	if _, ok := l.Selected(); !ok { // shown dimmed, as they need a call
		for i, b := range decide[:5] {
			decide[i] = l.dimmed(b, b.Help().Key, b.Help().Desc)
		}
	}
	return [][]key.Binding{
		{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom},
		{k.NextTab, k.PrevTab, k.Late, k.Filter, k.Detail, k.NewCall, k.Tools, k.Pick, k.PickAll, k.Reconcile},
		decide,
	}
}

// dimmed is a disabled binding as help shows it: dimmed, and never hidden
// (help hides a disabled binding). It is for display only: keys are
// matched against the real binding, which stays disabled.
func (l *listScreen) dimmed(b key.Binding, keys, desc string) key.Binding {
	f := l.sh.st.Faint.Render
	return key.NewBinding(key.WithKeys(b.Keys()...), key.WithHelp(f(keys), f(desc)))
}

// View draws tabs, the column header, the visible rows only, and the
// preview of the selection.
func (l *listScreen) View() string {
	st := l.sh.st
	var b strings.Builder
	b.WriteString(l.tabsView())
	b.WriteByte('\n')
	if l.filtering {
		b.WriteString(l.filter.View())
		b.WriteByte('\n')
	} else if l.tool != "" {
		b.WriteString(st.Info.Render(trunc("filter: "+filterText(l.tool)+"   (/ to change, esc in the filter clears it)", l.w)))
		b.WriteByte('\n')
	}
	cols := l.columns()
	b.WriteString(st.Row.Header.Render(l.header(cols)))
	b.WriteByte('\n')
	p := l.page()
	switch {
	case l.err != nil:
		b.WriteString(st.ErrorLine.Render(trunc("cannot read the journal: "+errLine(l.err), l.w)))
		b.WriteString(strings.Repeat("\n", p))
	case len(l.rows) == 0:
		b.WriteString(l.emptyView(p))
	default:
		start, end := l.sc.window(len(l.rows), p)
		if l.rowCache == nil || len(l.rowCache) > 4*p {
			l.rowCache = make(map[int64]cachedRow, 2*p)
		}
		for i := start; i < end; i++ {
			c := l.rows[i]
			_, picked := l.picked[c.ID]
			k := fmt.Sprintf("%d|%s|%t|%d|%d|%s|%t|%d|%s|%t|%t", c.UpdatedAt.UnixNano(), c.State, i == l.sc.cur, l.w, l.tab,
				age(l.sh.now.Sub(c.CreatedAt)), c.Conflict, c.AttemptCount, c.Reason, c.HoldsLate(), picked)
			r, ok := l.rowCache[c.ID]
			if !ok || r.key != k {
				r = cachedRow{key: k, out: l.rowView(c, i == l.sc.cur, cols)}
				l.rowCache[c.ID] = r
			}
			b.WriteString(r.out)
			b.WriteByte('\n')
		}
		b.WriteString(strings.Repeat("\n", p-(end-start)))
	}
	if l.h >= 16 {
		b.WriteString(l.previewView())
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func (l *listScreen) emptyView(p int) string {
	st := l.sh.st
	var msg string
	switch {
	case !l.loaded:
		msg = "reading the journal…"
	case tabs[l.tab].State == pending.StateUnknown:
		msg = "No unknown calls: no write is waiting for a decision."
		if l.sh.opts.Demo {
			msg += " Press c to make one."
		}
	case tabs[l.tab].State == "":
		msg = "The journal has no calls yet. Press c to call a tool."
	default:
		msg = fmt.Sprintf("No %s calls.", stateWord(tabs[l.tab].State))
	}
	lines := []string{"", "   " + st.Subtle.Render(msg)}
	for len(lines) < p {
		lines = append(lines, "")
	}
	return strings.Join(lines[:p], "\n") + "\n"
}

// tabsView is one tab per state with its count; inactive tabs shrink to a
// glyph and a count when the window is narrow.
func (l *listScreen) tabsView() string {
	st := l.sh.st
	render := func(short int) string {
		parts := make([]string, len(tabs))
		for i, t := range tabs {
			glyph, word := GlyphAll, "all"
			n := 0
			if t.State == "" {
				for _, v := range l.cnt {
					n += v
				}
			} else {
				glyph, word, n = stateGlyph(t.State), stateWord(t.State), l.cnt[t.State]
			}
			label := fmt.Sprintf("%s %s %d", glyph, word, n)
			switch {
			case i == l.tab:
			case short == 1:
				label = fmt.Sprintf("%s %d", word, n)
			case short == 2:
				label = fmt.Sprintf("%s %d", glyph, n)
			}
			if i == l.tab {
				parts[i] = st.Tab.Active.Render("[" + label + "]")
			} else {
				s := st.Tab.Inactive
				if t.State != "" {
					s = st.State[t.State]
				}
				parts[i] = s.Render(" " + label + " ")
			}
		}
		return strings.Join(parts, "")
	}
	// The calls that settled late and wait for an acknowledgement are
	// counted beside the tabs, on every tab: they are in the succeeded or
	// failed tab, and L goes to them.
	// So are the calls selected for a bulk query (space, *), on every tab.
	badge := func(long bool) string {
		out := ""
		if n := len(l.picked); n > 0 {
			out = " " + st.Key.Render(fmt.Sprintf("%s %d selected", GlyphPicked, n))
		}
		n := len(l.sh.late)
		if n == 0 {
			return out
		}
		word := "late"
		if long {
			word = "settled late"
		}
		return out + " " + st.Late.Render(fmt.Sprintf("%s %d %s", GlyphLate, n, word)) + st.Subtle.Render(" ("+l.keys.Late.Help().Key+")")
	}
	s := render(0) + badge(true)
	for short := 1; short <= 2 && ansi.StringWidth(s) > l.w; short++ {
		s = render(short) + badge(true)
	}
	if ansi.StringWidth(s) > l.w {
		s = render(2) + badge(false)
	}
	return trunc(s, l.w)
}

// columns are the widths of the row's columns for the window width.
// server is 0 on a console over one server: every call is its.
type columns struct{ age, server, tool, args, key, tries, why int }

func (l *listScreen) columns() columns {
	c := columns{age: 4, tool: 14, key: 7, tries: 3, why: 18}
	if tabs[l.tab].State == "" {
		c.why = 24
	}
	fixed := 2 + 2 + c.age + 1 + c.tool + 1 + 1 + c.key + 1 + c.tries + 1 + c.why
	if l.sh.multi() && l.w-fixed >= 12+11 {
		// Over several servers each row names its call's: the one its
		// query and retry go to.
		c.server = min(12, l.w-fixed-12-1)
		fixed += c.server + 1
	}
	c.args = l.w - fixed
	if c.args < 12 { // narrow: the why column gives way first
		c.why = max(8, c.why-(12-c.args))
		c.args = l.w - (fixed - 18 + c.why)
	}
	c.args = max(c.args, 4)
	return c
}

func (l *listScreen) header(c columns) string {
	pos := ""
	if n := l.total(); n > 0 && len(l.rows) > 0 {
		pos = fmt.Sprintf("%d/%d", min(l.pos+1, n), n)
	}
	why := "WHY"
	if tabs[l.tab].State == "" {
		why = "STATE · WHY"
	}
	server := ""
	if c.server > 0 {
		server = pad("SERVER", c.server) + " "
	}
	h := "    " + pad("AGE", c.age) + " " + server + pad("TOOL", c.tool) + " " + pad("ARGS", c.args) + " " + pad("KEY", c.key) + " " + padLeft("TRY", c.tries) + " " + why
	if pos != "" {
		gap := l.w - ansi.StringWidth(h) - ansi.StringWidth(pos)
		if gap > 1 {
			h += strings.Repeat(" ", gap) + pos
		}
	}
	return trunc(h, l.w)
}

// rowView is one call: marker, state glyph, age, tool, short arguments,
// key tail, attempts and why. Server text is sanitised before styling.
func (l *listScreen) rowView(c pending.Call, sel bool, cols columns) string {
	st := l.sh.st
	marker := "  "
	if sel {
		marker = GlyphSelected + " "
	}
	if _, ok := l.picked[c.ID]; ok {
		marker = marker[:len(marker)-1] + GlyphPicked
	}
	why := clean(c.Reason)
	switch {
	case c.UndoneBy != 0:
		// Its state stays what the server said; that a cancel of it
		// succeeded is said beside it, so it is not undone twice.
		why = fmt.Sprintf("undone by %d · %s", c.UndoneBy, why)
	case c.Compensates != 0:
		why = fmt.Sprintf("undoes %d · %s", c.Compensates, why)
	}
	if c.Conflict {
		why = "CONFLICT " + why
	}
	if tabs[l.tab].State == "" {
		why = stateWord(c.State) + " " + why
	}
	if why == "" {
		why = "—"
	}
	rs := st.Row.Normal
	if sel {
		rs = st.Row.Selected
	}
	server := ""
	if cols.server > 0 {
		server = pad(callServerName(c), cols.server) + " "
	}
	text := pad(age(l.sh.now.Sub(c.CreatedAt)), cols.age) + " " + server +
		pad(displayName(c.Tool), cols.tool) + " " +
		pad(shortArgs(c.Args), cols.args) + " " +
		pad(keyTail(c.Key), cols.key) + " " +
		padLeft(fmt.Sprint(c.AttemptCount), cols.tries) + " "
	glyph := st.State[c.State].Render(stateGlyph(c.State)) + rs.Render(" ")
	if !c.HoldsLate() {
		return rs.Render(marker) + glyph + rs.Render(pad(text+pad(why, cols.why), max(0, l.w-4)))
	}
	// A late settle no operator has acknowledged leads the why column, as
	// a glyph and a word, until it is acknowledged.
	text = trunc(text, max(0, l.w-4))
	mark := trunc(GlyphLate+" late", max(0, l.w-4-ansi.StringWidth(text)))
	rest := max(0, l.w-4-ansi.StringWidth(text)-ansi.StringWidth(mark))
	return rs.Render(marker) + glyph + rs.Render(text) + st.Late.Inherit(rs).Render(mark) + rs.Render(pad(" "+why, rest))
}

// previewView describes the selected call under the list: the detail a
// decision needs, without leaving the list.
func (l *listScreen) previewView() string {
	st := l.sh.st
	c, ok := l.Selected()
	rule := func(title string) string {
		t := GlyphRule + " " + title + " "
		return st.Faint.Render(t + strings.Repeat(GlyphRule, max(0, l.w-ansi.StringWidth(t))))
	}
	if !ok {
		return rule("no call selected") + strings.Repeat("\n", previewHeight-1)
	}
	label := st.Label.Render
	lines := []string{
		rule(fmt.Sprintf("call %d · %s · %s", c.ID, displayName(c.Tool), stateWord(c.State))),
		label("key    ") + clean(c.Key) + label("   server ") + serverLabel(c) + label("   kind ") + string(c.Kind) + label(" ("+string(c.KindSource)+")"),
		label("args   ") + shortArgs(c.Args),
	}
	why := clean(c.Reason)
	if why == "" {
		why = "—"
	}
	status := label("why    ") + why + label(" · ") + plural(c.AttemptCount, "attempt") + label(" · created ") + age(l.sh.now.Sub(c.CreatedAt)) + " ago"
	lines = append(lines, status)
	switch {
	case c.Conflict:
		lines = append(lines, st.Bad.Render("CONFLICT: "+clean(c.ConflictNote)))
	case c.HoldsLate():
		lines = append(lines, label("late   ")+st.Late.Render(lateLine(l.sh, c)))
	case c.Proposal != "":
		lines = append(lines, label("query  ")+st.Info.Render(clean(c.Proposal)))
	default:
		lines = append(lines, label("query  ")+st.Faint.Render("not queried yet"))
	}
	lines = append(lines, label("retry  ")+retrySafety(l.sh, c))
	for i := range lines {
		lines[i] = trunc(lines[i], l.w)
	}
	return strings.Join(lines[:previewHeight], "\n")
}

// lateLine says, for a call that holds late, when it settled and what that
// holds until the operator acknowledges it.
func lateLine(sh *shared, c pending.Call) string {
	return fmt.Sprintf("%s %s late %s ago: identical calls are held until A acknowledges it (or late_hold passes)",
		GlyphLate, stateWord(c.State), age(sh.now.Sub(*c.LateSettledAt)))
}

// retrySafety says in a phrase whether a retry is known to be safe.
func retrySafety(sh *shared, c pending.Call) string {
	st := sh.st
	t, ok := sh.toolOf(c, c.Tool)
	switch {
	case !c.State.Allows(pending.EventRetry):
		// Whether a retry would be safe means nothing where r refuses
		// (the one table, State.Allows): say why there is none.
		if c.State == pending.StateInFlight {
			return st.Faint.Render("not now: in flight, its outcome is coming; r works once it is unknown or failed")
		}
		return st.Faint.Render("none: " + string(c.State) + " is settled")
	case !ok && !sh.listsToolsOf(c):
		return st.Faint.Render("unknown until the server lists its tools")
	case !ok:
		return st.Warn.Render("the server no longer lists " + displayName(c.Tool))
	case t.KeyArg != "":
		return st.Good.Render("safe: " + t.Name + " declares " + clean(t.KeyArg) + "; a completed first attempt is replayed, not repeated")
	}
	return st.Warn.Render("not known to be safe: " + t.Name + " declares no key argument (r asks you to type retry)")
}

// queryPlan is the query a decision runs for c: the policy's, or none.
func queryPlan(p *guard.Policy, c pending.Call) (tool string, args map[string]any) {
	if p == nil {
		return "", nil
	}
	tp, ok := p.Tools[c.Tool]
	if !ok || tp.QueryTool == "" {
		return "", nil
	}
	return tp.QueryTool, tp.QueryArgs
}

// callServerName is the name a call's server goes by in the console: its
// name in the host config, else the name it declared.
func callServerName(c pending.Call) string {
	if c.ServerAlias != "" {
		return displayName(c.ServerAlias)
	}
	return displayName(c.Server)
}

// serverLabel is a call's server with both its names, when they differ.
func serverLabel(c pending.Call) string {
	if c.ServerAlias != "" && c.ServerAlias != c.Server && c.Server != "" {
		return displayName(c.ServerAlias) + " (" + displayName(c.Server) + ")"
	}
	return callServerName(c)
}
