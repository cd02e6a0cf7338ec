// The reconcile screen (issue 21, "Reconciliation in bulk"): the calls the
// operator picked on the list (space, *) are queried with S, at most
// Options.Concurrency at once, each by guard.Reconcile, the engine of
// 'mcp-confirm reconcile'. The screen shows the progress as it comes, then
// the findings in groups (found, not found, query failed, no query
// configured); A accepts the found group's proposal, after a dialog that
// lists every call it will mark. esc cancels a run; nothing is ever sent
// but reads.

package tui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// defaultConcurrency is how many queries a bulk query has out at once, as
// 'mcp-confirm reconcile' has by default.
const defaultConcurrency = 8

// errBulkCancelled is the cause a cancelled run's queries end with.
var errBulkCancelled = errors.New("the operator cancelled the bulk query (esc)")

// bulkItem is one call of a run.
type bulkItem struct {
	call    pending.Call
	res     guard.Reconciled
	queried bool
	marked  bool   // accepted: marked applied by this console
	refused string // why its accept was refused; "" none
	retried string // what its bulk retry came to; "" not retried
}

// bulkScreen is one run at a time: its calls, its progress and findings,
// and the accept that may follow.
type bulkScreen struct {
	sh   *shared
	keys bulkKeys

	run   int // which run; results of an earlier one are dropped
	items []bulkItem
	index map[int64]int // call ID → index in items
	// groups are the queried calls of each finding, as indexes in items
	// (so in id order), and nQueried how many calls are queried: kept as
	// the answers come, so a frame does not scan the run (a selection of
	// thousands would cost milliseconds a frame).
	groups    map[guard.Finding][]int
	nQueried  int
	next      int // the next item to query
	out       int // queries out
	running   bool
	cancelled bool
	ctx       context.Context
	cancel    context.CancelCauseFunc

	accepting  []int64 // calls left to accept, in order
	acceptOut  int     // accepts out
	acceptRun  bool
	acceptDone int // marked in the last accept
	acceptNo   int // refused in the last accept

	retryQueue []int64 // calls left to retry, in order
	retryOut   int
	retryRun   bool
	retryStop  bool // esc: no more retries are sent
	retryOK    int  // retried: succeeded
	retryNot   int  // retried: unknown again, failed, or refused

	group  int // the group under the cursor: an index in guard.Findings
	offset int // the first call shown of the group

	w, h int
}

func newBulkScreen(sh *shared) *bulkScreen {
	return &bulkScreen{sh: sh, keys: defaultBulkKeys(), index: map[int64]int{}}
}

func (b *bulkScreen) SetSize(w, h int)               { b.w, b.h = w, h }
func (b *bulkScreen) Title() string                  { return "reconcile" }
func (b *bulkScreen) Capturing() bool                { return false }
func (b *bulkScreen) Selected() (pending.Call, bool) { return pending.Call{}, false }
func (b *bulkScreen) decisions() *decisionKeys       { return nil }
func (b *bulkScreen) hasRun() bool                   { return len(b.items) > 0 }
func (b *bulkScreen) busy() bool                     { return b.running || b.acceptRun || b.retryRun }
func (b *bulkScreen) queried() int                   { return b.nQueried }
func (b *bulkScreen) finding() guard.Finding         { return guard.Findings[b.group] }
func (b *bulkScreen) groupSize(f guard.Finding) int  { return len(b.members(f)) }
func (b *bulkScreen) concurrency() int               { return b.sh.opts.Concurrency }
func (b *bulkScreen) pickedGroup() []int             { return b.members(b.finding()) }

// item is the run's call id.
func (b *bulkScreen) item(id int64) (*bulkItem, bool) {
	i, ok := b.index[id]
	if !ok {
		return nil, false
	}
	return &b.items[i], true
}

// members are the indexes of the queried calls of a finding, in id order.
// The slice is the screen's own: read it, never change it.
func (b *bulkScreen) members(f guard.Finding) []int { return b.groups[f] }

// acceptable are the found calls not marked yet: what A would mark.
func (b *bulkScreen) acceptable() []pending.Call {
	var out []pending.Call
	for _, i := range b.members(guard.FindingFound) {
		if it := &b.items[i]; it.isAcceptable() {
			out = append(out, it.call)
		}
	}
	return out
}

// acceptableCount is len(acceptable()), without copying the calls: help
// and the group's advice ask it every frame.
func (b *bulkScreen) acceptableCount() int {
	n := 0
	for _, i := range b.members(guard.FindingFound) {
		if b.items[i].isAcceptable() {
			n++
		}
	}
	return n
}

// isAcceptable: a found call that A would mark (not marked yet, not
// refused, not marked by its query).
func (it *bulkItem) isAcceptable() bool { return !it.marked && it.refused == "" && !it.res.Applied }

// start begins a run over calls (in id order) and sends the first queries.
func (b *bulkScreen) start(calls []pending.Call) tea.Cmd {
	if b.cancel != nil {
		b.cancel(errBulkCancelled)
	}
	calls = slices.Clone(calls)
	slices.SortFunc(calls, func(x, y pending.Call) int { return cmp.Compare(x.ID, y.ID) })
	b.run++
	b.items = make([]bulkItem, len(calls))
	b.index = make(map[int64]int, len(calls))
	b.groups, b.nQueried = map[guard.Finding][]int{}, 0
	for i, c := range calls {
		b.items[i] = bulkItem{call: c}
		b.index[c.ID] = i
	}
	b.next, b.out, b.running, b.cancelled = 0, 0, true, false
	b.accepting, b.acceptOut, b.acceptRun, b.acceptDone, b.acceptNo = nil, 0, false, 0, 0
	b.retryQueue, b.retryOut, b.retryRun, b.retryStop, b.retryOK, b.retryNot = nil, 0, false, false, 0, 0
	b.group, b.offset = 0, 0
	b.ctx, b.cancel = context.WithCancelCause(b.sh.opts.Context)
	return b.fill()
}

// fill sends queries until Concurrency are out or none is left.
func (b *bulkScreen) fill() tea.Cmd {
	var cmds []tea.Cmd
	for b.running && !b.cancelled && b.out < b.concurrency() && b.next < len(b.items) {
		cmds = append(cmds, reconcileCmd(b.ctx, b.sh.opts.Engine, b.run, b.items[b.next].call))
		b.next++
		b.out++
	}
	return tea.Batch(cmds...)
}

// onReconciled keeps one call's finding and sends the next query; over
// reports that the run has ended (all queried, or cancelled and drained).
func (b *bulkScreen) onReconciled(msg reconciledMsg) (cmd tea.Cmd, over bool) {
	i, ok := b.index[msg.ID]
	if msg.Run != b.run || !ok || b.items[i].queried {
		return nil, false
	}
	it := &b.items[i]
	it.res, it.queried = msg.Res, true
	b.nQueried++
	g := b.groups[msg.Res.Finding] // answers come in any order; the group stays in id order
	at, _ := slices.BinarySearch(g, i)
	b.groups[msg.Res.Finding] = slices.Insert(g, at, i)
	if msg.Res.Call.ID != 0 && msg.Res.Call.State != "" {
		it.call = msg.Res.Call
	}
	b.out--
	cmd = b.fill()
	if b.out == 0 && (b.cancelled || b.next == len(b.items)) {
		b.running = false
		b.cancel(nil) // the run's context is done with
		b.group = b.firstGroup()
		return cmd, true
	}
	return cmd, false
}

// firstGroup is the first group with calls, found first.
func (b *bulkScreen) firstGroup() int {
	for i, f := range guard.Findings {
		if b.groupSize(f) > 0 {
			return i
		}
	}
	return 0
}

// stop cancels the run: no query is sent after this, and those out end
// with the operator's cancel as their cause. over: nothing is out.
func (b *bulkScreen) stop() (over bool) {
	if !b.running {
		return false
	}
	b.cancelled = true
	b.cancel(errBulkCancelled)
	if b.out == 0 {
		b.running = false
		return true
	}
	return false
}

// startAccept marks the calls ids (of this run) applied, Concurrency at
// a time, each with its own query's evidence.
func (b *bulkScreen) startAccept(run int, ids []int64) tea.Cmd {
	if run != b.run || b.acceptRun {
		return nil
	}
	b.accepting, b.acceptRun, b.acceptDone, b.acceptNo = slices.Clone(ids), true, 0, 0
	return b.fillAccept()
}

func (b *bulkScreen) fillAccept() tea.Cmd {
	var cmds []tea.Cmd
	for b.acceptOut < b.concurrency() && len(b.accepting) > 0 {
		id := b.accepting[0]
		b.accepting = b.accepting[1:]
		cmds = append(cmds, acceptCmd(b.sh.opts.Context, b.sh.opts.Engine, b.run, id))
		b.acceptOut++
	}
	return tea.Batch(cmds...)
}

// onAccepted keeps one accept's outcome; over: the accept has ended.
func (b *bulkScreen) onAccepted(msg acceptedMsg) (cmd tea.Cmd, over bool) {
	it, ok := b.item(msg.ID)
	if msg.Run != b.run || !ok || !b.acceptRun {
		return nil, false
	}
	b.acceptOut--
	if msg.Call.ID != 0 {
		it.call = msg.Call
	}
	if msg.Err != nil {
		it.refused = errLine(msg.Err)
		b.acceptNo++
	} else {
		it.marked = true
		b.acceptDone++
	}
	cmd = b.fillAccept()
	if b.acceptOut == 0 && len(b.accepting) == 0 {
		b.acceptRun = false
		return cmd, true
	}
	return cmd, false
}

// summary is the status line of a run that has ended.
func (b *bulkScreen) summary() string {
	n := b.queried()
	s := fmt.Sprintf("queried %s", plural(n, "call"))
	if b.cancelled && n < len(b.items) {
		s = fmt.Sprintf("cancelled: queried %d of %d calls (%d not queried)", n, len(b.items), len(b.items)-n)
	}
	s += ": " + b.countsLine()
	if k := b.acceptableCount(); k > 0 {
		s += fmt.Sprintf("; A marks the %d found applied, after a dialog listing them", k)
	}
	return s
}

// countsLine is the findings so far, one count each.
func (b *bulkScreen) countsLine() string {
	parts := make([]string, len(guard.Findings))
	for i, f := range guard.Findings {
		parts[i] = fmt.Sprintf("%s %d", f, b.groupSize(f))
	}
	return strings.Join(parts, ", ")
}

// Update moves between the groups and scrolls a group's calls; esc and A
// are the root's (they say what they did, or open a dialog).
func (b *bulkScreen) Update(msg tea.Msg) (screen, tea.Cmd) {
	k, ok := msg.(tea.KeyMsg)
	if !ok {
		return b, nil
	}
	switch {
	case key.Matches(k, b.keys.Down):
		b.group, b.offset = (b.group+1)%len(guard.Findings), 0
	case key.Matches(k, b.keys.Up):
		b.group, b.offset = (b.group+len(guard.Findings)-1)%len(guard.Findings), 0
	case key.Matches(k, b.keys.PageDown):
		b.offset = max(0, min(b.offset+b.callRows(), len(b.pickedGroup())-b.callRows()))
	case key.Matches(k, b.keys.PageUp):
		b.offset = max(0, b.offset-b.callRows())
	}
	return b, nil
}

// syncKeys enables the keys that can act now, so help shows only those.
func (b *bulkScreen) syncKeys() {
	b.keys.Cancel.SetEnabled(b.running || b.retryRun)
	b.keys.Back.SetEnabled(!b.running && !b.retryRun)
	b.keys.Accept.SetEnabled(!b.busy() && b.finding() == guard.FindingFound && b.acceptableCount() > 0)
	b.keys.Retry.SetEnabled(!b.busy() && b.hasRetryable())
}

func (b *bulkScreen) ShortHelp() []key.Binding {
	b.syncKeys()
	k := b.keys
	if b.running || b.retryRun {
		return []key.Binding{k.Cancel, k.Down, k.Up}
	}
	return []key.Binding{k.Accept, k.Retry, k.Back, k.Down, k.Up, k.PageDown}
}

func (b *bulkScreen) FullHelp() [][]key.Binding {
	b.syncKeys()
	k := b.keys
	return [][]key.Binding{{k.Up, k.Down, k.PageUp, k.PageDown}, {k.Accept, k.Retry, k.Cancel, k.Back}}
}

// headerRows is what the screen draws above the group's calls: the title,
// the bar, the counts, a gap, one line per group, a gap, and the group's
// rule.
func (b *bulkScreen) headerRows() int { return 3 + 1 + len(guard.Findings) + 1 + 1 }

// callRows is how many of the group's calls fit.
func (b *bulkScreen) callRows() int { return max(1, b.h-b.headerRows()) }

// groupAdvice says what a group's calls need next.
func (b *bulkScreen) groupAdvice(f guard.Finding) string {
	switch f {
	case guard.FindingFound:
		n := b.acceptableCount()
		if n == 0 && b.groupSize(f) > 0 {
			return "proposal applied: accepted"
		}
		return "proposal applied: A marks them applied, with their evidence"
	case guard.FindingNotFound:
		return "no sign they took effect: they stay unknown; R retries the safe ones (same keys)"
	case guard.FindingQueryFailed:
		return "no usable answer: they stay unknown; R retries the safe ones, or select them and S again"
	}
	return "the policy names no query_tool for their tool"
}

// View draws the progress, the groups and the calls of the group under
// the cursor (only those that fit).
func (b *bulkScreen) View() string {
	st := b.sh.st
	if !b.hasRun() {
		return st.Subtle.Render(trunc("   No bulk query yet: on the list, space selects calls (* all shown), S queries them.", b.w))
	}
	var lines []string
	n, total := b.queried(), len(b.items)
	title := fmt.Sprintf("Querying %s, %d at a time: %d done", plural(total, "selected call"), b.concurrency(), n)
	switch {
	case b.running && b.cancelled:
		title = fmt.Sprintf("Cancelling: waiting for %d queries out (%d of %d done)", b.out, n, total)
	case b.cancelled:
		title = fmt.Sprintf("Cancelled: %d of %d calls queried; %d not queried", n, total, total-n)
	case !b.running:
		title = fmt.Sprintf("Queried %s; each answer is kept as evidence on its call", plural(total, "call"))
	}
	lines = append(lines, st.Bold.Render(trunc(title, b.w)))
	barW := max(10, min(40, b.w-20))
	lines = append(lines, progressBar(st, float64(n), float64(total), barW)+st.Subtle.Render(fmt.Sprintf("  %d/%d", n, total)))
	lines = append(lines, st.Subtle.Render(trunc(b.countsLine(), b.w)))
	lines = append(lines, "")
	for i, f := range guard.Findings {
		marker := "  "
		if i == b.group {
			marker = GlyphSelected + " "
		}
		label := st.Finding[f].Render(pad(findingGlyph(f)+" "+string(f), 21))
		row := marker + label + " " + padLeft(fmt.Sprint(b.groupSize(f)), 4) + "   " + st.Subtle.Render(b.groupAdvice(f))
		if i == b.group {
			row = st.Row.Selected.Render(pad(ansi.Strip(row), b.w))
		}
		lines = append(lines, trunc(row, b.w))
	}
	lines = append(lines, "")
	f := b.finding()
	members := b.pickedGroup()
	rule := fmt.Sprintf("%s %s (%d) ", GlyphRule, f, len(members))
	lines = append(lines, st.Faint.Render(rule+strings.Repeat(GlyphRule, max(0, b.w-ansi.StringWidth(rule)))))
	rows := b.callRows()
	if len(members) == 0 {
		lines = append(lines, st.Subtle.Render("   none"))
	}
	for j := b.offset; j < len(members) && j < b.offset+rows; j++ {
		if j == b.offset+rows-1 && j < len(members)-1 {
			lines = append(lines, st.Faint.Render(fmt.Sprintf("   … %d more (pgdn)", len(members)-j)))
			break
		}
		lines = append(lines, b.callLine(b.items[members[j]]))
	}
	return strings.Join(lines, "\n")
}

// callLine is one call of a group: id, tool, key tail, state, and the
// evidence in short (sanitised: it is the server's text).
func (b *bulkScreen) callLine(it bulkItem) string {
	st := b.sh.st
	c := it.call
	ev := clean(it.res.Evidence)
	if it.res.Err != nil && ev == "" {
		ev = errLine(it.res.Err)
	}
	if it.res.AlreadyDecided {
		ev = "decided elsewhere meanwhile; " + ev
	}
	state := st.stateLabel(c.State)
	switch {
	case it.marked:
		state = st.stateLabel(pending.StateApplied) + st.Subtle.Render(" now")
	case it.refused != "":
		ev = "not marked: " + it.refused
	case it.retried != "":
		state = st.stateLabel(it.call.State) + st.Subtle.Render(" now")
		ev = it.retried
	}
	head := fmt.Sprintf("   call %-5d %s %s ", c.ID, pad(displayName(c.Tool), 14), pad(keyTail(c.Key), 7))
	line := head + state + "  " + ev
	return trunc(line, b.w)
}

// The root's side of a bulk run: the keys that start, cancel and accept it
// and say what they did, and the handlers of its results.

// reconcileKey (S on the list) queries the selected calls on the reconcile
// screen; with none selected it shows the last run, if there is one.
func (m *Model) reconcileKey(k tea.KeyMsg) (tea.Cmd, bool) {
	if !key.Matches(k, m.list.keys.Reconcile) {
		return nil, false
	}
	switch {
	case m.bulk.busy():
		m.showBulk()
		m.whyNot("a bulk query is running; esc cancels it, or wait for it to end")
		return nil, true
	case len(m.list.picked) == 0 && m.bulk.hasRun():
		m.showBulk()
		m.setMessage("the last bulk query's findings (select calls with space, then S, for a new one)", false)
		return nil, true
	case len(m.list.picked) == 0:
		m.whyNot("no call selected for a bulk query; space selects the call under the cursor, * all shown")
		return nil, true
	}
	calls := m.list.takePicked()
	m.showBulk()
	m.setMessage(fmt.Sprintf("querying %s, %d at a time (reads only; esc cancels)…", plural(len(calls), "call"), m.sh.opts.Concurrency), false)
	m.busy = true
	return m.bulk.start(calls), true
}

// bulkKey handles esc (cancel a run, or back to the list) and A (accept the
// found group) on the reconcile screen.
func (m *Model) bulkKey(k tea.KeyMsg) (tea.Cmd, bool) {
	b := m.bulk
	b.syncKeys()
	switch {
	case b.retryRun && key.Matches(k, b.keys.Cancel):
		return m.stopBulkRetry(), true
	case key.Matches(k, b.keys.Retry) || pressedDisabled(k, b.keys.Retry):
		return m.bulkRetryKey(), true
	case b.running && key.Matches(k, b.keys.Cancel):
		if b.cancelled {
			m.whyNot(fmt.Sprintf("cancelling already: waiting for the %d queries out to end", b.out))
			return nil, true
		}
		if b.stop() {
			return m.bulkOver(), true
		}
		m.setMessage(fmt.Sprintf("cancelling: no more queries are sent; waiting for the %d out…", b.out), false)
		m.busy = true
		return nil, true
	case !b.running && !b.retryRun && key.Matches(k, b.keys.Back):
		return m.show(screenList, ""), true
	case key.Matches(k, b.keys.Accept) || pressedDisabled(k, b.keys.Accept):
		return m.acceptKey(), true
	}
	return nil, false
}

// acceptKey opens the accept dialog for the found group, or says why not.
func (m *Model) acceptKey() tea.Cmd {
	b := m.bulk
	switch {
	case !b.hasRun():
		m.whyNot("no bulk query yet: on the list, space selects calls and S queries them")
		return nil
	case b.running:
		m.whyNot("the bulk query is still running; A accepts once it has ended")
		return nil
	case b.acceptRun:
		m.whyNot("marking the found calls already")
		return nil
	case b.finding() != guard.FindingFound:
		m.whyNot(fmt.Sprintf("%q proposes nothing to accept: only found calls have a proposal (applied); ↑/↓ picks the found group", string(b.finding())))
		return nil
	}
	calls := b.acceptable()
	if len(calls) == 0 {
		m.whyNot("no found call is left to mark: each is marked applied (or was refused)")
		return nil
	}
	lines := make([]acceptLine, len(calls))
	ids := make([]int64, len(calls))
	for i, c := range calls {
		it, _ := b.item(c.ID)
		lines[i], ids[i] = acceptLine{Call: c, Evidence: it.res.Evidence}, c.ID
	}
	run := b.run
	m.message = ""
	m.dialog = newAcceptDialog(m.sh, m.nextDialogID(), lines, func() tea.Cmd {
		return func() tea.Msg { return acceptConfirmedMsg{Run: run, IDs: ids} }
	})
	return nil
}

// onPickedAll applies select-all and says what it did.
func (m *Model) onPickedAll(msg pickedAllMsg) {
	if msg.Err != nil {
		m.setMessage("cannot read the calls to select: "+errLine(msg.Err), true)
		return
	}
	if len(msg.Calls) == 0 {
		m.whyNot("no call in this list to select (tab changes the state shown)")
		return
	}
	what := "calls shown"
	if st := tabs[m.list.tab].State; st != "" {
		what = stateWord(st) + " calls"
	}
	if m.list.tool != "" {
		what += " of " + displayName(m.list.tool)
	}
	n, selected := m.list.onPickedAll(msg.Calls)
	s := fmt.Sprintf("unselected the %d %s; %d selected", n, what, len(m.list.picked))
	if selected {
		s = fmt.Sprintf("selected %d more of the %s; %d selected (S queries them, * again unselects them)", n, what, len(m.list.picked))
	}
	if msg.Capped {
		s += fmt.Sprintf("; only the first %d were read", maxPickAll)
	}
	m.setMessage(s, false)
}

// onReconciled takes one query of a run; at the end of the run it says what
// the run found and reloads the list (the proposals changed).
func (m *Model) onReconciled(msg reconciledMsg) tea.Cmd {
	cmd, over := m.bulk.onReconciled(msg)
	if !over {
		return cmd
	}
	return tea.Batch(cmd, m.bulkOver())
}

// bulkOver says what a run that has ended found and reloads the list.
func (m *Model) bulkOver() tea.Cmd {
	m.setMessage(m.bulk.summary(), false)
	cmds := []tea.Cmd{m.list.refresh(), m.scanLate()}
	// Over several servers, each server the run queried lists its tools
	// (once), so that R can tell which of its calls a retry is safe for.
	for _, it := range m.bulk.items {
		if it.call.State == pending.StateUnknown {
			cmds = append(cmds, m.sh.callToolsCmd(it.call))
		}
	}
	return tea.Batch(cmds...)
}

// onAccepted takes one mark of an accept; at its end it says how many
// were marked and reloads the list.
func (m *Model) onAccepted(msg acceptedMsg) tea.Cmd {
	cmd, over := m.bulk.onAccepted(msg)
	if !over {
		return cmd
	}
	b := m.bulk
	s := fmt.Sprintf("marked %s applied, each with its query's evidence", plural(b.acceptDone, "call"))
	if b.acceptNo > 0 {
		s += fmt.Sprintf("; %d refused (see the found group: decided elsewhere, or queried again meanwhile)", b.acceptNo)
	}
	m.setMessage(s, b.acceptNo > 0)
	return tea.Batch(cmd, m.list.refresh(), m.scanLate())
}
