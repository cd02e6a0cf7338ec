package tui

import (
	"fmt"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// newRetryDialog says exactly what a retry will do: resend the tool with
// the same key, as attempt n+1, and whether the server is known to dedupe
// it. A tool with no key argument asks the operator to type "retry".
func newRetryDialog(sh *shared, id int, c pending.Call, proceed func(note string) tea.Cmd) *confirmDialog {
	st := sh.st
	tool := displayName(c.Tool)
	tail := keyTail(c.Key)
	facts := st.Label.Render("key      ") + clean(c.Key) + "\n" +
		st.Label.Render("attempts ") + fmt.Sprintf("%d so far; this is attempt %d", c.AttemptCount, c.AttemptCount+1) + "\n" +
		st.Label.Render("age      ") + age(sh.now.Sub(c.CreatedAt)) + st.Label.Render("   state ") + stateWord(c.State) + reasonSuffix(c) + "\n" +
		st.Label.Render("server   ") + serverLabel(c)
	t, known := sh.toolOf(c, c.Tool)
	var what string
	typed := false
	switch {
	case known && t.KeyArg != "":
		what = fmt.Sprintf("Resend %s with key %s. The server declares %s, so a completed first attempt will be replayed, not repeated.", tool, tail, clean(t.KeyArg))
	case known:
		what = fmt.Sprintf("Resend %s with key %s. %s declares no key argument: the key goes only in _meta, which the server may ignore. If the first attempt took effect, this may do it twice.", tool, tail, tool)
		typed = true
	default:
		what = fmt.Sprintf("Resend %s with key %s. The server's tools are not known (it has not listed them), so it is not known whether it dedupes by key. If the first attempt took effect, this may do it twice.", tool, tail)
		typed = true
	}
	if left, ok := sh.opts.Policy.KeyRetentionLeft(c, sh.now); ok {
		r := sh.opts.Policy.KeyRetention(c.Tool)
		if left <= 0 {
			what += fmt.Sprintf(" And the server keeps keys %s (policy key_retention): this call was made %s ago, so it may no longer recognise the key, and this may do it twice.",
				age(r), age(sh.now.Sub(c.CreatedAt)))
			typed = true
		} else {
			facts += "\n" + st.Label.Render("key kept ") + fmt.Sprintf("%s more by the server (key_retention %s)", age(left), age(r))
		}
	}
	body := []string{facts, st.Dialog.Body.Render(what)}
	if typed {
		body = append(body, st.Dialog.Warning.Render("Check first with s (query) if you can."))
	} else {
		body = append(body, st.Faint.Render("Journaled before it is sent. Nothing else is resent."))
	}
	d := newConfirm(sh, id, fmt.Sprintf("Retry %s with the same key?", tool), body, "Yes, retry", proceed).forDecision(pending.ActionRetry, c)
	if typed {
		d.typed = "retry"
		d.withInput("type retry: ", "")
	}
	return d
}

// keyRetentionPast: the policy says how long the server keeps keys, and
// that time has passed since c was made.
func keyRetentionPast(sh *shared, c pending.Call) bool {
	left, ok := sh.opts.Policy.KeyRetentionLeft(c, sh.now)
	return ok && left <= 0
}
