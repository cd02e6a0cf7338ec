// The bulk retry of the reconcile screen (issue 21): R resends, each with
// its own key, the calls of the group under the cursor whose retry is known
// safe (the tool declares a key argument, from its schema or the policy's
// key_arg, and the key's retention has not passed), after a dialog that
// asks for their count to be typed. Each is guard.Retry, as r is; found
// calls are never retried (A marks them), nor are calls no longer unknown.

package tui

import (
	"fmt"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// retrySafe: a retry of c is known not to do it twice.
func retrySafe(sh *shared, c pending.Call) bool {
	t, ok := sh.toolOf(c, c.Tool)
	return ok && t.KeyArg != "" && !keyRetentionPast(sh, c)
}

// retryable are the calls of the group under the cursor a bulk retry may
// resend, and how many others of it are unknown but not known safe.
func (b *bulkScreen) retryable() (safe []pending.Call, unsafe int) {
	if !b.hasRun() || b.finding() == guard.FindingFound {
		return nil, 0
	}
	for _, i := range b.pickedGroup() {
		it := &b.items[i]
		if it.retried != "" || it.call.State != pending.StateUnknown {
			continue
		}
		if retrySafe(b.sh, it.call) {
			safe = append(safe, it.call)
		} else {
			unsafe++
		}
	}
	return safe, unsafe
}

// hasRetryable: retryable would find a safe call (help asks it each frame,
// so it stops at the first and copies nothing).
func (b *bulkScreen) hasRetryable() bool {
	if !b.hasRun() || b.finding() == guard.FindingFound {
		return false
	}
	for _, i := range b.pickedGroup() {
		if it := &b.items[i]; it.retried == "" && it.call.State == pending.StateUnknown && retrySafe(b.sh, it.call) {
			return true
		}
	}
	return false
}

// bulkRetryKey opens the bulk retry dialog, or says why not.
func (m *Model) bulkRetryKey() tea.Cmd {
	b := m.bulk
	switch {
	case !b.hasRun():
		m.whyNot("no bulk query yet: on the list, space selects calls and S queries them")
		return nil
	case b.busy():
		m.whyNot("wait for what runs to end (esc cancels it); R retries after")
		return nil
	case b.finding() == guard.FindingFound:
		m.whyNot("the found calls took effect: A marks them applied (a retry would only be replayed)")
		return nil
	}
	safe, unsafe := b.retryable()
	if len(safe) == 0 {
		if unsafe > 0 {
			m.whyNot(fmt.Sprintf("none of the %s here is known safe to retry (no key argument, or past the key's retention); retry each with r on the list, which asks you to type retry",
				plural(unsafe, "unknown call")))
		} else {
			m.whyNot(fmt.Sprintf("no unknown call in %q is left to retry", string(b.finding())))
		}
		return nil
	}
	st := m.sh.st
	ids := make([]int64, len(safe))
	var list strings.Builder
	rows := max(1, min(6, m.sh.bodyH-16))
	for i, c := range safe {
		ids[i] = c.ID
		if i < rows {
			t, _ := m.sh.toolOf(c, c.Tool)
			list.WriteString(fmt.Sprintf("  call %-5d %s %s  %s declares %s\n", c.ID, pad(displayName(c.Tool), 14), pad(keyTail(c.Key), 7), t.Name, clean(t.KeyArg)))
		}
	}
	if n := len(safe) - rows; n > 0 {
		list.WriteString(st.Faint.Render(fmt.Sprintf("  … and %d more", n)) + "\n")
	}
	body := []string{
		st.Dialog.Body.Render("Resend each once, as its next attempt, with the key it was first sent with. Each tool declares a key argument, so a first attempt that took effect is replayed by the server, not repeated."),
		strings.TrimSuffix(list.String(), "\n"),
	}
	if unsafe > 0 {
		body = append(body, st.Dialog.Warning.Render(fmt.Sprintf("Left out: %s not known safe to retry (decide each on the list).", plural(unsafe, "call"))))
	}
	n := fmt.Sprint(len(safe))
	run := b.run
	d := newConfirm(m.sh, m.nextDialogID(), fmt.Sprintf("Retry %s with their same keys?", plural(len(safe), "call")), body, "Yes, retry",
		func(string) tea.Cmd { return func() tea.Msg { return bulkRetryConfirmedMsg{Run: run, IDs: ids} } })
	d.typed = n
	d.withInput("type "+n+" to retry them: ", "")
	d.busy = fmt.Sprintf("retrying %s with their same keys…", plural(len(safe), "call"))
	m.message = ""
	m.dialog = d
	return nil
}

// startBulkRetry starts the retries the operator confirmed.
func (m *Model) startBulkRetry(msg bulkRetryConfirmedMsg) tea.Cmd {
	b := m.bulk
	if msg.Run != b.run || b.busy() || m.quitting {
		return nil
	}
	b.retryQueue, b.retryRun, b.retryStop, b.retryOK, b.retryNot = append([]int64(nil), msg.IDs...), true, false, 0, 0
	return m.fillBulkRetry()
}

// fillBulkRetry sends retries until Concurrency are out, none is left, or
// the operator stopped them or quit. Each is a write in flight for quit.
func (m *Model) fillBulkRetry() tea.Cmd {
	b := m.bulk
	var cmds []tea.Cmd
	for !b.retryStop && !m.quitting && m.sh.opts.Context.Err() == nil && b.retryOut < b.concurrency() && len(b.retryQueue) > 0 {
		id := b.retryQueue[0]
		b.retryQueue = b.retryQueue[1:]
		m.retrying[id] = true
		cmds = append(cmds, bulkRetryCmd(m.sh.opts.Context, m.sh.opts.Engine, b.run, id))
		b.retryOut++
	}
	return tea.Batch(cmds...)
}

// stopBulkRetry (esc): no more retries are sent; those out end on their
// own clocks (cutting a write short would only make it unknown again).
func (m *Model) stopBulkRetry() tea.Cmd {
	b := m.bulk
	b.retryStop = true
	m.setMessage(fmt.Sprintf("stopping: no more retries are sent; waiting for the %d out (%d not sent)", b.retryOut, len(b.retryQueue)), false)
	m.busy = true
	return nil
}

// onBulkRetried takes one retry's outcome, sends the next, and at the end
// says what the retries came to.
func (m *Model) onBulkRetried(msg bulkRetriedMsg) tea.Cmd {
	delete(m.retrying, msg.ID)
	b := m.bulk
	if m.quitting && !m.writeInFlight() {
		return tea.Quit
	}
	m.dropQuitDialog()
	it, ok := b.item(msg.ID)
	if msg.Run != b.run || !ok || !b.retryRun {
		return nil
	}
	b.retryOut--
	switch {
	case msg.Err != nil:
		it.retried = "retry: " + errLine(msg.Err)
		b.retryNot++
	default:
		if msg.Result.Call.ID != 0 {
			it.call = msg.Result.Call
		}
		it.retried = "retried: " + stateWord(msg.Result.State)
		if msg.Result.Replayed {
			it.retried += ", replayed by the server (nothing done twice)"
		}
		if msg.Result.State == pending.StateSucceeded {
			b.retryOK++
		} else {
			b.retryNot++
		}
	}
	cmd := m.fillBulkRetry()
	if b.retryOut > 0 || (len(b.retryQueue) > 0 && !b.retryStop) {
		return cmd
	}
	b.retryRun = false
	s := fmt.Sprintf("retried %s with their same keys: %d succeeded, %d not (see the group)", plural(b.retryOK+b.retryNot, "call"), b.retryOK, b.retryNot)
	if n := len(b.retryQueue); n > 0 {
		s += fmt.Sprintf("; %d not sent (stopped)", n)
		b.retryQueue = nil
	}
	m.setMessage(s, false)
	m.messageWarn = b.retryNot > 0
	return tea.Batch(cmd, m.list.refresh(), m.scanLate())
}
