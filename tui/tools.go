package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// toolsScreen lists the server's tools with their kind (read or write) and
// where the kind came from; enter opens the new-call editor for one.
type toolsScreen struct {
	sh          *shared
	keys        toolsKeys
	sc          scroller // the selected and first visible tools
	ssc         scroller // the selected server, over several (serverPicker)
	pickForCall bool     // opened by c: the title says to pick a tool
	w, h        int
}

func newToolsScreen(sh *shared) *toolsScreen {
	return &toolsScreen{sh: sh, keys: defaultToolsKeys()}
}

// pickingServer: over several servers, none is picked yet, so the screen
// lists the servers; enter picks one and lists its tools.
func (t *toolsScreen) pickingServer() bool { return t.sh.multi() && t.sh.picked == "" }

func (t *toolsScreen) Title() string {
	if t.pickingServer() {
		return "new call: pick a server"
	}
	if t.pickForCall {
		return "new call: pick a tool"
	}
	return "tools"
}

func (t *toolsScreen) Capturing() bool                { return false }
func (t *toolsScreen) Selected() (pending.Call, bool) { return pending.Call{}, false }
func (t *toolsScreen) decisions() *decisionKeys       { return nil }

// open shows the tools; pick: to choose one for a new call (c).
func (t *toolsScreen) open(pick bool) { t.pickForCall = pick }

func (t *toolsScreen) SetSize(w, h int) {
	t.w, t.h = w, h
	t.clamp()
}

// onTools keeps the cursor in range after the tools are (re)listed. In
// the guided demo it starts on create_order, the tool the guide says to
// press enter on (the demo lists cancel_order before it).
func (t *toolsScreen) onTools() {
	if t.sh.opts.Demo && t.sc.cur == 0 {
		for i, ti := range t.sh.tools {
			if ti.Tool.Name == "create_order" {
				t.sc.cur = i
			}
		}
	}
	t.clamp()
}

// clamp keeps the cursor on a tool, and its row on screen.
func (t *toolsScreen) clamp() { t.sc.clamp(len(t.sh.tools), t.page()) }

// descHeight is the lines under the list that describe the selected tool.
const descHeight = 7

// page is the number of tools visible: the height less the heading, its
// blank line, the rule and the description.
func (t *toolsScreen) page() int { return max(1, t.h-2-descHeight-1) }

func (t *toolsScreen) Update(msg tea.Msg) (screen, tea.Cmd) {
	k, ok := msg.(tea.KeyMsg)
	if !ok {
		return t, nil
	}
	if t.pickingServer() {
		return t, t.updatePicker(k)
	}
	n := len(t.sh.tools)
	switch {
	case key.Matches(k, t.keys.Back) && t.sh.multi():
		// Back to the servers, to pick another.
		t.sh.picked = ""
		return t, nil
	case key.Matches(k, t.keys.Down):
		t.sc.move(1, n, t.page())
	case key.Matches(k, t.keys.Up):
		t.sc.move(-1, n, t.page())
	case key.Matches(k, t.keys.Select) && n > 0:
		return t, showScreen(screenForm, t.sh.tools[t.sc.cur].Tool.Name)
	case key.Matches(k, t.keys.Back):
		return t, showScreen(screenList, "")
	}
	return t, nil
}

// updatePicker moves over the servers, and picks one with enter.
func (t *toolsScreen) updatePicker(k tea.KeyMsg) tea.Cmd {
	names := t.sh.opts.Servers.Names()
	n := len(names)
	switch {
	case key.Matches(k, t.keys.Down):
		t.ssc.move(1, n, t.page())
	case key.Matches(k, t.keys.Up):
		t.ssc.move(-1, n, t.page())
	case key.Matches(k, t.keys.Select) && n > 0:
		t.ssc.clamp(n, t.page())
		t.sc = scroller{}
		return t.sh.pick(names[t.ssc.cur])
	case key.Matches(k, t.keys.Back):
		return showScreen(screenList, "")
	}
	return nil
}

// serverState is a server's state as the picker and status bar say it.
func serverState(s serverSnap) string {
	switch s.State {
	case "", mcpclient.StateNew:
		return "not started"
	case mcpclient.StateStarting:
		return "starting"
	case mcpclient.StateExited:
		if s.Session == 0 { // it never ran: "exited" would say it had
			return "start failed"
		}
	}
	return string(s.State)
}

// pickerView lists the servers, each with its state and session.
func (t *toolsScreen) pickerView() string {
	st := t.sh.st
	names := t.sh.opts.Servers.Names()
	var b strings.Builder
	b.WriteString(st.Subtle.Render(trunc(fmt.Sprintf("Pick the server for the new call (enter): %d servers. Each starts when first used.", len(names)), t.w)) + "\n\n")
	if len(names) == 0 {
		return b.String() + st.Subtle.Render("no servers to call")
	}
	t.ssc.clamp(len(names), t.page())
	state := map[string]serverSnap{}
	for _, s := range t.sh.servers {
		state[s.Name] = s
	}
	nameW := 4
	for _, n := range names {
		nameW = max(nameW, min(24, ansi.StringWidth(displayName(n))))
	}
	top, end := t.ssc.window(len(names), t.page())
	for i := top; i < end; i++ {
		marker, rs := "  ", st.Row.Normal
		if i == t.ssc.cur {
			marker, rs = GlyphSelected+" ", st.Row.Selected
		}
		s := state[names[i]]
		info := serverState(s)
		if s.Session > 0 {
			info += fmt.Sprintf(" · session %d", s.Session)
		}
		line := rs.Render(marker+pad(displayName(names[i]), nameW)+"  ") + st.Faint.Render(info)
		b.WriteString(trunc(line, t.w) + "\n")
	}
	return b.String()
}

func (t *toolsScreen) ShortHelp() []key.Binding {
	if t.pickingServer() {
		pick := key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "pick"))
		return []key.Binding{t.keys.Up, t.keys.Down, pick, t.keys.Back}
	}
	return []key.Binding{t.keys.Up, t.keys.Down, t.keys.Select, t.keys.Back}
}

func (t *toolsScreen) FullHelp() [][]key.Binding { return [][]key.Binding{t.ShortHelp()} }

// kindBadge is "W write" or "R read": a letter and a word, in colour.
func kindBadge(st *Styles, k pending.Kind) string {
	if k == pending.KindRead {
		return st.Badge.Read.Render(GlyphRead + " read ")
	}
	return st.Badge.Write.Render(GlyphWrite + " write")
}

func (t *toolsScreen) View() string {
	st := t.sh.st
	if t.pickingServer() {
		return t.pickerView()
	}
	var b strings.Builder
	name := displayName(t.sh.server.Name)
	if t.sh.multi() {
		name = displayName(t.sh.picked)
	}
	if name == "" {
		name = "the server"
	}
	switch {
	case t.sh.toolsErr != nil:
		b.WriteString(st.ErrorLine.Render(trunc("cannot list the tools of "+name+": "+errLine(t.sh.toolsErr), t.w)))
		if o, ok := loginOfferOf(t.sh.toolsErr); ok && t.sh.opts.Login != nil {
			b.WriteString("\n\n" + wrap(fmt.Sprintf("It wants authorization: %s logs in to %s here, as mcp-confirm login does, then lists its tools again.",
				defaultAppKeys().Login.Help().Key, clean(o.url)), t.w))
		}
		return b.String()
	case !t.sh.toolsLoaded:
		return st.Subtle.Render("starting " + name + " and listing its tools…")
	case len(t.sh.tools) == 0:
		return st.Subtle.Render(name + " lists no tools.")
	}
	head := fmt.Sprintf("%d tools on %s", len(t.sh.tools), name)
	if t.pickForCall {
		head = "Pick the tool to call (enter). Writes get an idempotency key and a journal entry before they are sent."
		if t.sh.multi() {
			head = "Pick the tool to call on " + name + " (enter; esc: another server). Writes get a key and a journal entry first."
		}
	}
	b.WriteString(st.Subtle.Render(trunc(head, t.w)) + "\n\n")
	nameW := 4
	for _, ti := range t.sh.tools {
		nameW = max(nameW, min(24, ansi.StringWidth(ti.Name)))
	}
	listH := t.page()
	top, end := t.sc.window(len(t.sh.tools), listH)
	for i := top; i < end; i++ {
		ti := t.sh.tools[i]
		marker := "  "
		rs := st.Row.Normal
		if i == t.sc.cur {
			marker, rs = GlyphSelected+" ", st.Row.Selected
		}
		from := "kind from " + string(ti.KindSource)
		if ti.KeyArg != "" {
			from += " · key arg " + clean(ti.KeyArg)
		}
		line := rs.Render(marker) + kindBadge(st, ti.Kind) + rs.Render(" "+pad(ti.Name, nameW)+"  ") + st.Faint.Render(from)
		b.WriteString(trunc(line, t.w) + "\n")
	}
	for i := end - top; i < listH; i++ {
		b.WriteString("\n")
	}
	ti := t.sh.tools[t.sc.cur]
	rule := GlyphRule + " " + ti.Name + " "
	b.WriteString(st.Faint.Render(rule+strings.Repeat(GlyphRule, max(0, t.w-ansi.StringWidth(rule)))) + "\n")
	desc := cleanBlock(ti.Tool.Description)
	if desc == "" {
		desc = "(no description)"
	}
	var kind string
	switch ti.KindSource {
	case pending.KindFromPolicy:
		kind = "the policy says it is a " + string(ti.Kind)
	case pending.KindFromAnnotation:
		kind = "the server's readOnlyHint says " + string(ti.Kind) + " (an untrusted hint; the policy can override it)"
	default:
		kind = "no policy and no readOnlyHint: treated as a write, the safe default"
	}
	var bottom []string
	bottom = append(bottom, firstLines(wrap(st.Label.Render("arguments: ")+argsSummary(ti), t.w), 2)...)
	bottom = append(bottom, firstLines(wrap(st.Label.Render("kind: ")+kind, t.w), 2)...)
	lines := firstLines(wrap(desc, t.w), max(1, descHeight-len(bottom)))
	lines = append(lines, bottom...)
	for i := range lines {
		lines[i] = trunc(lines[i], t.w)
	}
	b.WriteString(strings.Join(lines, "\n"))
	return b.String()
}

// firstLines keeps the first n lines of s, marking a cut with "…".
func firstLines(s string, n int) []string {
	ls := strings.Split(s, "\n")
	if len(ls) > n {
		ls = ls[:n]
		ls[n-1] += "…"
	}
	return ls
}
