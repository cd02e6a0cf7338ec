package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/spinner"
	"github.com/charmbracelet/bubbles/textarea"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// formScreen is the new-call editor: a tool's arguments as JSON, pre-filled
// from its input schema, validated before anything is sent, then sent
// through the guard with a spinner, the elapsed time and, when the server
// reports it, a progress bar.
type formScreen struct {
	sh   *shared
	keys formKeys
	tool toolInfo
	ta   textarea.Model
	spin spinner.Model

	// check is the validation of the text as it stands, redone after
	// every edit (never in View): the guide line and the demo's hint
	// follow it. checked is the text it is of.
	check    []string
	checked  string
	problems []string // what the last ctrl+s refused, nil when none was refused

	run        int // increments per send; results of older runs are ignored here
	sending    bool
	started    time.Time
	now        time.Time // from the spinner's ticks while sending
	progress   *mcpclient.Progress
	progressCh <-chan progressMsg
	done       *callDoneMsg
	w, h       int
}

func newFormScreen(sh *shared) *formScreen {
	ta := textarea.New()
	ta.ShowLineNumbers = false
	ta.Prompt = "│ "
	ta.CharLimit = 64 << 10
	ta.MaxHeight = 0
	ta.Cursor.SetMode(cursor.CursorStatic) // no blink: steady for the eye, screenshots and tests
	sp := spinner.New()
	sp.Spinner = spinner.Dot
	sp.Style = sh.st.Accent
	return &formScreen{sh: sh, keys: defaultFormKeys(), ta: ta, spin: sp}
}

func (f *formScreen) SetSize(w, h int) {
	f.w, f.h = w, h
	f.ta.SetWidth(max(10, w-2))
	f.ta.SetHeight(max(3, h-10))
}

func (f *formScreen) Title() string { return "new call" }

// Capturing: the editor has the keys (q is a letter, not quit).
func (f *formScreen) Capturing() bool { return !f.sending && f.done == nil }

// Selected: the form has no call to decide on (its outcome shows in the
// list).
func (f *formScreen) Selected() (pending.Call, bool) { return pending.Call{}, false }
func (f *formScreen) decisions() *decisionKeys       { return nil }

// inFlight is the tool of the call being sent, if one is.
func (f *formScreen) inFlight() (toolInfo, bool) { return f.tool, f.sending }

// open starts editing a call of t.
func (f *formScreen) open(t toolInfo) tea.Cmd {
	if f.sending {
		return nil // one call at a time; the form shows the one in flight
	}
	f.tool, f.problems, f.done, f.progress = t, nil, nil, nil
	f.ta.SetValue(prefill(t, f.sh.opts.Prefill[t.Tool.Name]))
	f.revalidate()
	return f.ta.Focus()
}

// revalidate checks the text again if it changed since the last check.
// After a refused send the list of problems follows the edits too.
func (f *formScreen) revalidate() {
	v := f.ta.Value()
	if f.check != nil && v == f.checked {
		return
	}
	_, probs := validate(f.tool, v)
	f.check, f.checked = probs, v
	if f.check == nil {
		f.check = []string{}
	}
	if f.problems != nil { // non-nil, empty: refused once, fine now
		f.problems = append([]string{}, probs...)
	}
}

func (f *formScreen) Update(msg tea.Msg) (screen, tea.Cmd) {
	switch msg := msg.(type) {
	case spinner.TickMsg:
		if !f.sending {
			return f, nil
		}
		f.now = msg.Time
		var cmd tea.Cmd
		f.spin, cmd = f.spin.Update(msg)
		return f, cmd
	case progressMsg:
		if msg.Run == f.run {
			p := msg.Progress
			f.progress = &p
		}
		return f, listenProgressCmd(msg.Run, msg.ch)
	case progressClosedMsg:
		return f, nil
	case tea.KeyMsg:
		return f, f.onKey(msg)
	}
	if f.Capturing() {
		var cmd tea.Cmd
		f.ta, cmd = f.ta.Update(msg)
		f.revalidate()
		return f, cmd
	}
	return f, nil
}

func (f *formScreen) onKey(k tea.KeyMsg) tea.Cmd {
	switch {
	case key.Matches(k, f.keys.Back):
		if f.sending {
			return showScreen(screenList, "") // the call goes on; its outcome will show
		}
		f.done = nil
		return showScreen(screenTools, "")
	case f.done != nil:
		if k.Type == tea.KeyEnter {
			f.done = nil
			return showScreen(screenList, "")
		}
		return nil
	case f.sending:
		return nil
	case key.Matches(k, f.keys.Reset):
		f.ta.SetValue(prefill(f.tool, f.sh.opts.Prefill[f.tool.Tool.Name]))
		f.problems = nil
		f.revalidate()
		return nil
	case key.Matches(k, f.keys.Send):
		return f.send()
	}
	var cmd tea.Cmd
	f.ta, cmd = f.ta.Update(k)
	f.revalidate()
	return cmd
}

// valid: the arguments as typed fit the tool's schema (as last checked,
// after the last edit).
func (f *formScreen) valid() bool { return len(f.check) == 0 }

// send validates, then starts the guarded call. Nothing is sent when the
// arguments do not fit the schema.
func (f *formScreen) send() tea.Cmd {
	args, probs := validate(f.tool, f.ta.Value())
	f.check, f.checked = append([]string{}, probs...), f.ta.Value()
	f.problems = nil
	if len(probs) > 0 {
		f.problems = probs
		return nil
	}
	f.run++
	f.sending, f.progress, f.done = true, nil, nil
	f.started = f.sh.opts.Now()
	f.now = f.started
	f.ta.Blur()
	ch := make(chan progressMsg, 1)
	f.progressCh = ch
	req := guard.Request{Tool: f.tool.Tool.Name, Args: args}
	return tea.Batch(callCmd(f.sh.opts.Context, f.sh.newCallEngine(), f.run, req, ch), listenProgressCmd(f.run, ch), f.spin.Tick)
}

// onDone records a finished call; the root decides what the operator sees.
func (f *formScreen) onDone(msg callDoneMsg) bool {
	if msg.Run == f.run {
		f.sending = false
		d := msg
		f.done = &d
	}
	return true
}

func (f *formScreen) ShortHelp() []key.Binding {
	if f.sending || f.done != nil {
		return []key.Binding{f.keys.Back}
	}
	return []key.Binding{f.keys.Send, f.keys.Reset, f.keys.Back}
}

func (f *formScreen) FullHelp() [][]key.Binding { return [][]key.Binding{f.ShortHelp()} }

func (f *formScreen) View() string {
	st := f.sh.st
	t := f.tool
	var b strings.Builder
	b.WriteString(kindBadge(st, t.Kind) + " " + st.Bold.Render(t.Name) + st.Faint.Render(" (kind from "+string(t.KindSource)+")") + "\n")
	var what string
	switch {
	case t.Kind == pending.KindRead:
		what = "A read: sent as is, retried on its own if it times out, not journaled."
	case t.KeyArg != "":
		what = "A write: it gets a fresh idempotency key (also sent as " + clean(t.KeyArg) + "), journaled before it is sent; never resent without you."
	default:
		what = "A write: it gets a fresh idempotency key (in _meta only: the tool declares no key argument), journaled before it is sent."
	}
	b.WriteString(st.Subtle.Render(trunc(what, f.w)) + "\n")
	for _, l := range firstLines(wrap(st.Label.Render("arguments: ")+argsSummary(t), f.w), 2) {
		b.WriteString(trunc(l, f.w) + "\n")
	}
	b.WriteString(f.ta.View() + "\n")
	switch {
	case f.sending:
		b.WriteString(f.inFlightView())
	case f.done != nil:
		b.WriteString(f.doneView())
	case len(f.problems) > 0:
		b.WriteString(st.ErrorLine.Render("Not sent; fix the arguments:") + "\n")
		for _, p := range f.problems[:min(3, len(f.problems))] {
			b.WriteString(st.ErrorLine.Render(trunc("  • "+p, f.w)) + "\n")
		}
	default:
		b.WriteString(f.guideLine() + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// guideLine says under the editor whether the arguments, as they stand,
// fit the schema: "ready" only when they do, else the first problem.
func (f *formScreen) guideLine() string {
	st := f.sh.st
	switch n := len(f.check); {
	case n == 0 && f.problems != nil:
		return st.Good.Render(trunc("✓ fixed: the arguments fit the schema now; ctrl+s sends, esc goes back.", f.w))
	case n == 0:
		return st.Good.Render(trunc("✓ ready: the arguments fit the schema; ctrl+s sends, esc goes back.", f.w))
	case n == 1:
		return st.Warn.Render(trunc("not ready: "+f.check[0]+" (ctrl+s sends nothing until it fits)", f.w))
	default:
		return st.Warn.Render(trunc(fmt.Sprintf("not ready: %s, and %d more (ctrl+s lists them; nothing is sent)", f.check[0], n-1), f.w))
	}
}

// inFlightView: spinner, elapsed time, and progress when the server sends it.
func (f *formScreen) inFlightView() string {
	st := f.sh.st
	el := f.now.Sub(f.started)
	line := f.spin.View() + " " + st.Bold.Render("in flight") + st.Subtle.Render(fmt.Sprintf("  %s  waiting for %s", elapsed(el), f.tool.Name))
	if f.tool.Kind == pending.KindWrite {
		line += st.Faint.Render(fmt.Sprintf(" (no answer and no progress for %s → unknown)", f.sh.writeClock(f.tool.Tool.Name)))
	}
	out := trunc(line, f.w) + "\n"
	if p := f.progress; p != nil {
		w := max(10, min(40, f.w-30))
		out += progressBar(st, p.Progress, p.Total, w)
		if p.Message != "" {
			out += st.Subtle.Render("  " + trunc(clean(p.Message), f.w-w-14))
		}
		out += "\n"
	}
	return out
}

// progressBar draws progress; without a total it shows the count only.
func progressBar(st *Styles, done, total float64, w int) string {
	if total <= 0 {
		return st.Accent.Render(fmt.Sprintf("progress %.0f", done))
	}
	frac := min(1, max(0, done/total))
	full := int(frac * float64(w))
	return st.BarFull.Render(strings.Repeat(BarFull, full)) + st.BarEmpty.Render(strings.Repeat(BarEmpty, w-full)) + fmt.Sprintf(" %3.0f%%", frac*100)
}

func (f *formScreen) doneView() string {
	st := f.sh.st
	d := f.done
	if d.Err != nil {
		return st.ErrorLine.Render(trunc("not sent: "+errLine(d.Err), f.w)) + "\n" + st.Faint.Render("esc: back to the tools") + "\n"
	}
	r := d.Result
	head := stateWord(r.State)
	if r.Call.ID != 0 {
		head = fmt.Sprintf("call %d %s · key %s", r.Call.ID, stateWord(r.State), keyTail(r.Key))
	}
	if r.Replayed {
		head += " · replayed by the server"
	}
	s := st.State[r.State]
	out := s.Render(stateGlyph(r.State)+" "+head) + "\n"
	text := resultText(r.Result, partStructured)
	if text == "" {
		text = rpcErrorText(r.Error)
	}
	for _, l := range strings.Split(wrap(text, f.w-2), "\n")[:min(3, len(strings.Split(wrap(text, f.w-2), "\n")))] {
		out += "  " + l + "\n"
	}
	return out + st.Faint.Render("enter: to the calls list · esc: back to the tools") + "\n"
}
