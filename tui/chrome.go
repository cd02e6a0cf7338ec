// The root's chrome: the top bar, the recovery and policy banners, the message lines,
// the help footer and the status bar around the active screen, and the
// message state they show.

package tui

import (
	"fmt"
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/x/ansi"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// homeTilde writes a path under home as ~/….
func homeTilde(path, home string) string {
	if home != "" && strings.HasPrefix(path, home+"/") {
		return "~" + path[len(home):]
	}
	return path
}

// bodyHeight is what is left for the active screen: the window minus the
// top bar, the banners, the message lines, the help line and the status
// bar.
func (m *Model) bodyHeight() int {
	h := m.h - 3 - m.messageLines() - len(m.policyBanner())
	if m.recovered > 0 {
		h--
	}
	return max(h, 3)
}

// maxPolicyBannerLines bounds the policy banner, so that a long list of
// problems never pushes the calls off an 80×24 screen.
const maxPolicyBannerLines = 3

// policyBanner is the banner of the policy's problems (guard.Policy.Check)
// for the tools last listed, wrapped into at most three lines: the first
// problem, and how many more there are and where they are all listed.
func (m *Model) policyBanner() []string {
	p := m.sh.policyProblems
	if len(p) == 0 {
		return nil
	}
	text := "⚠ policy " + p[0]
	if n := len(p) - 1; n > 0 {
		text += fmt.Sprintf(" (+%d more: mcp-confirm policy check lists them all)", n)
	}
	lines := strings.Split(wrap(text, m.w-2), "\n")
	if len(lines) > maxPolicyBannerLines {
		lines = lines[:maxPolicyBannerLines]
		lines[len(lines)-1] = trunc(lines[len(lines)-1], m.w-3) + "…"
	}
	for i, l := range lines {
		lines[i] = m.sh.st.Banner.Render(pad(" "+l+" ", m.w))
	}
	return lines
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
	// O, while a server waits for a login, comes first: nothing on that
	// server can be done before it. Disabled, help leaves it out.
	return append(append([]key.Binding{m.keys.Login}, b...), m.keys.Help, m.keys.Quit)
}

// FullHelp is the ? view: the active screen's groups, then the app's.
func (m Model) FullHelp() [][]key.Binding {
	return append(m.activeScreen().FullHelp(), []key.Binding{m.keys.Login, m.keys.Help, m.keys.Quit, m.keys.ForceQuit})
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
	for _, l := range m.policyBanner() {
		b.WriteString(l)
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

// guideWide is the width from which the guided demo's outcome line and
// guide line fit in three lines; narrower, each may need two.
const guideWide = 120

// messageLines is how many lines the message area takes: two, and in the
// guided demo, whose guide has lines of its own, three, or four below
// guideWide columns, so that neither the outcome nor the guide is cut
// at 80 columns. It depends on the width only, so the screen above does
// not jump as messages come and go.
func (m *Model) messageLines() int {
	switch {
	case !m.sh.opts.Demo:
		return 2
	case m.w < guideWide:
		return 4
	}
	return 3
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
	case mcpclient.StateExited:
		state = serverState(srv) // "start failed" for one that never ran
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
	if m.sh.multi() {
		// The servers' states before the journal's path: the path gives
		// way (from its left) down to 24 cells.
		server = m.serversStatus(max(20, m.w-ansi.StringWidth(counts)-6-min(24, ansi.StringWidth(path))))
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

// serversStatus is the status bar's part for several servers: how many,
// then each one's name and state, in at most w cells.
func (m Model) serversStatus(w int) string {
	parts := make([]string, 0, len(m.sh.servers))
	for _, s := range m.sh.servers {
		state := serverState(s)
		if s.Session > 1 {
			state += fmt.Sprintf(" (session %d)", s.Session) // it was restarted
		}
		parts = append(parts, displayName(s.Name)+" "+state)
	}
	return trunc(fmt.Sprintf(" %d servers: %s", len(parts), strings.Join(parts, " · ")), w)
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
