package tui

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/viewport"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// detailScreen is one call's whole journal history: arguments, key,
// server, every attempt on a timeline, every decision with its evidence,
// the proposed resolution, the conflict flag and whether a retry is known
// to be safe.
type detailScreen struct {
	sh     *shared
	keys   detailKeys
	vp     viewport.Model
	call   pending.Call
	loaded bool // call has attempts and decisions
	err    error
	part   resultPart // which part of each result is shown (v switches)
	w, h   int
}

func newDetailScreen(sh *shared) *detailScreen {
	vp := viewport.New(80, 10)
	vp.KeyMap = viewport.KeyMap{} // keys come from detailKeys
	return &detailScreen{sh: sh, keys: defaultDetailKeys(), vp: vp}
}

func (d *detailScreen) SetSize(w, h int) {
	d.w, d.h = w, h
	d.vp.Width, d.vp.Height = w, max(1, h-1) // the last line says where you are
	d.refresh()
}

func (d *detailScreen) Title() string   { return "call detail" }
func (d *detailScreen) Capturing() bool { return false }

// Selected is the call shown: the decision keys act on it.
func (d *detailScreen) Selected() (pending.Call, bool) { return d.call, d.call.ID != 0 }
func (d *detailScreen) decisions() *decisionKeys       { return &d.keys.decisionKeys }

// loadedID is the call whose full record the screen holds (and reloads
// when the journal changes), 0 before the first one is read.
func (d *detailScreen) loadedID() int64 {
	if !d.loaded {
		return 0
	}
	return d.call.ID
}

// open shows a list row at once; the full call follows (callLoadedMsg).
func (d *detailScreen) open(c pending.Call) {
	d.call, d.loaded, d.err = c, false, nil
	d.vp.GotoTop()
	d.refresh()
}

// refresh re-renders the content (new data, new size, a clock tick).
func (d *detailScreen) refresh() {
	if d.call.ID == 0 {
		return
	}
	d.keys.Result.SetEnabled(d.hasBothParts())
	if d.part == partText {
		d.keys.Result.SetHelp("v", "results as structured")
	} else {
		d.keys.Result.SetHelp("v", "results as text")
	}
	d.vp.SetContent(d.content())
}

// hasBothParts: some result on screen has a structured and a text part,
// so v has something to switch.
func (d *detailScreen) hasBothParts() bool {
	for _, a := range d.call.Attempts {
		if parseResult(a.Result).both() {
			return true
		}
	}
	for _, dc := range d.call.Decisions {
		if _, r, _ := queryEvidence(dc.Evidence); parseResult(r).both() {
			return true
		}
	}
	return false
}

func (d *detailScreen) Update(msg tea.Msg) (screen, tea.Cmd) {
	switch msg := msg.(type) {
	case callLoadedMsg:
		if msg.ID != d.call.ID {
			return d, nil
		}
		if msg.Err != nil {
			d.err = msg.Err
		} else {
			d.call, d.loaded, d.err = msg.Call, true, nil
		}
		d.refresh()
		return d, nil
	case tea.KeyMsg:
		switch {
		case key.Matches(msg, d.keys.Back):
			return d, showScreen(screenList, "")
		case key.Matches(msg, d.keys.Down):
			d.vp.ScrollDown(1)
		case key.Matches(msg, d.keys.Up):
			d.vp.ScrollUp(1)
		case key.Matches(msg, d.keys.PageDown):
			d.vp.PageDown()
		case key.Matches(msg, d.keys.PageUp):
			d.vp.PageUp()
		case key.Matches(msg, d.keys.Result):
			d.part = 1 - d.part
			d.refresh()
		}
	}
	return d, nil
}

func (d *detailScreen) View() string {
	more := d.sh.st.Faint.Render(GlyphRule + " end of the journal record")
	if !d.vp.AtBottom() {
		more = d.sh.st.Faint.Render(fmt.Sprintf("↓ more below (j, pgdn) · %d%%", int(d.vp.ScrollPercent()*100)))
	}
	return d.vp.View() + "\n" + more
}

func (d *detailScreen) ShortHelp() []key.Binding {
	k := d.keys
	return []key.Binding{k.Ack, k.Query, k.Retry, k.Abandon, k.Mark, k.Compensate, k.Note, k.Back, k.Result, k.Down}
}

func (d *detailScreen) FullHelp() [][]key.Binding {
	k := d.keys
	return [][]key.Binding{{k.Up, k.Down, k.PageUp, k.PageDown, k.Result, k.Back}, {k.Query, k.Retry, k.Abandon, k.Mark, k.Note, k.Ack, k.Compensate}}
}

// content is the whole history as text, wrapped to the width.
func (d *detailScreen) content() string {
	st := d.sh.st
	c := d.call
	w := max(20, d.w)
	var b strings.Builder
	line := func(s string) { b.WriteString(wrap(s, w)); b.WriteByte('\n') }
	// field is a label and a value wrapped with a hanging indent.
	field := func(name, value string) {
		ls := strings.Split(wrap(value, w-11), "\n")
		b.WriteString(st.Label.Render(pad(name, 11)) + ls[0] + "\n")
		for _, l := range ls[1:] {
			b.WriteString(strings.Repeat(" ", 11) + l + "\n")
		}
	}

	late := ""
	if c.HoldsLate() {
		late = " " + st.Late.Render(GlyphLate+" late")
	}
	line(st.Bold.Render(displayName(c.Tool)) + st.Faint.Render(fmt.Sprintf("  call %d  ", c.ID)) + d.sh.st.stateLabel(c.State) + late + st.Subtle.Render(reasonSuffix(c)))
	if d.err != nil {
		line(st.ErrorLine.Render("cannot read the call: " + errLine(d.err)))
	}
	if c.Conflict {
		line(st.Bad.Render(wrap("CONFLICT: "+clean(c.ConflictNote), w)))
	}
	line("")
	field("key", clean(c.Key))
	srv := displayName(c.Server)
	if c.ServerAlias != "" {
		srv += " (config name " + displayName(c.ServerAlias) + ")"
	}
	field("server", srv+st.Faint.Render(" · ")+string(c.Kind)+st.Faint.Render(" (kind from "+string(c.KindSource)+")"))
	if id, ok := guard.ParseServerIdentity(c.ServerIdentity); ok {
		field("", "reached as "+clean(id.String()))
	} else {
		field("", st.Faint.Render("how the server was reached was not recorded"))
	}
	switch {
	case c.HoldsLate():
		field("late", st.Late.Render(fmt.Sprintf("%s settled late %s (%s ago), after its caller was told it was unknown; until you acknowledge it (A) or the policy's late_hold passes, identical calls are not sent and get this outcome",
			GlyphLate, stamp(*c.LateSettledAt), age(d.sh.now.Sub(*c.LateSettledAt)))))
	case c.LateSettledAt != nil && c.AckedAt != nil:
		field("late", fmt.Sprintf("settled late %s, acknowledged %s: identical calls are sent again", stamp(*c.LateSettledAt), stamp(*c.AckedAt)))
	}
	// Compensation (issue 21) is shown on both calls: the cancel names
	// the call it undoes, the call the cancels made for it.
	if c.Compensates != 0 {
		field("undoes", fmt.Sprintf("compensates call %d: sent to undo it; this call's outcome says whether it did", c.Compensates))
	}
	if len(c.CompensatedBy) > 0 {
		field("undone", st.Info.Render("compensated by "+callList(c.CompensatedBy))+st.Faint.Render(" · whether it was undone is the cancel's outcome; this call keeps its state"))
	}
	field("retry", retrySafety(d.sh, c))
	if left, ok := d.sh.opts.Policy.KeyRetentionLeft(c, d.sh.now); ok && c.State.Allows(pending.EventRetry) {
		r := d.sh.opts.Policy.KeyRetention(c.Tool)
		if left <= 0 {
			field("key", st.Warn.Render(fmt.Sprintf("past the server's key retention (%s, policy key_retention): it may no longer recognise the key; a retry may do it twice (r asks you to type retry)", age(r))))
		} else {
			field("key", fmt.Sprintf("kept by the server %s more (key_retention %s); a retry after that may do it twice", age(left), age(r)))
		}
	}
	prop := st.Faint.Render("none yet: s runs the query")
	if c.Proposal != "" {
		prop = st.Info.Render(clean(c.Proposal))
	}
	field("proposal", prop)
	field("created", stamp(c.CreatedAt)+st.Faint.Render(" ("+age(d.sh.now.Sub(c.CreatedAt))+" ago) · updated "+clock(c.UpdatedAt)))
	line("")
	line(st.Section.Render("Arguments") + st.Faint.Render("  (as journaled; redacted fields show "+guard.Redacted+")"))
	for _, l := range strings.Split(prettyJSON(c.Args), "\n") {
		line("  " + l)
	}
	line("")
	if !d.loaded {
		line(st.Faint.Render("reading attempts and decisions…"))
		return b.String()
	}
	line(st.Section.Render(fmt.Sprintf("Attempts (%d)", len(c.Attempts))))
	for _, a := range c.Attempts {
		for _, l := range d.attemptLines(a, w) {
			line(l)
		}
	}
	line("")
	line(st.Section.Render(fmt.Sprintf("Decisions (%d)", len(c.Decisions))))
	if len(c.Decisions) == 0 {
		line(st.Faint.Render("  none yet"))
	}
	for _, dc := range c.Decisions {
		for _, l := range d.decisionLines(dc, w) {
			line(l)
		}
	}
	return b.String()
}

func reasonSuffix(c pending.Call) string {
	if c.Reason == "" {
		return ""
	}
	return " — " + clean(c.Reason)
}

// attemptLines is one attempt on the timeline: session, JSON-RPC id, sent,
// ended, duration, outcome, which clock fired, and what came back.
func (d *detailScreen) attemptLines(a pending.Attempt, w int) []string {
	st := d.sh.st
	out := fmt.Sprintf("  #%d  session %d", a.N, a.Session)
	if a.RPCID != "" {
		out += " · rpc id " + clean(a.RPCID)
	}
	out += " · sent " + clock(a.SentAt)
	if a.EndedAt != nil {
		out += " · ended " + clock(*a.EndedAt) + " (" + elapsed(a.EndedAt.Sub(a.SentAt)) + ")"
	} else {
		out += " · not ended"
	}
	outcome := string(a.Outcome)
	if a.Reason != "" {
		outcome += ": " + clean(a.Reason)
	}
	if a.Clock != "" {
		outcome += " [" + clean(a.Clock) + " clock fired]"
	}
	if a.Late {
		outcome += " (answer came late)"
	}
	os := st.Subtle
	switch a.Outcome {
	case pending.OutcomeUnknown:
		os = st.State[pending.StateUnknown]
	case pending.OutcomeSucceeded:
		os = st.State[pending.StateSucceeded]
	case pending.OutcomeFailed:
		os = st.State[pending.StateFailed]
	}
	lines := []string{trunc(out, w), "      " + os.Render(trunc(outcome, w-6))}
	if r := d.resultLabel("result", a.Result); r != "" {
		lines = append(lines, indent(wrap(r, w-6), "      ")...)
	}
	if e := rpcErrorText(a.Error); e != "" {
		lines = append(lines, indent(wrap(e, w-6), "      ")...)
	}
	return lines
}

// decisionLines is one decision: who, when, note, evidence.
func (d *detailScreen) decisionLines(dc pending.Decision, w int) []string {
	st := d.sh.st
	head := fmt.Sprintf("  %s  %s by %s", stamp(dc.At), dc.Action, clean(dc.Operator))
	if dc.Host != "" {
		head += " on " + clean(dc.Host)
	}
	if dc.Attempt > 0 {
		head += fmt.Sprintf(" → attempt #%d", dc.Attempt)
	}
	lines := []string{st.Bold.Render(trunc(head, w))}
	if dc.Note != "" {
		lines = append(lines, indent(wrap("note: "+cleanBlock(dc.Note), w-6), "      ")...)
	}
	if ev := d.evidenceText(dc.Evidence); ev != "" {
		lines = append(lines, indent(wrap("evidence: "+ev, w-6), "      ")...)
	}
	return lines
}

// resultLabel is "name: " and the part of a result shown; when the result
// has both parts, the label says which one this is and that v shows the
// other.
func (d *detailScreen) resultLabel(name string, raw json.RawMessage) string {
	p := parseResult(raw)
	r := p.show(d.part)
	switch {
	case r == "":
		return ""
	case !p.both():
		return name + ": " + r
	case d.part == partText:
		return name + " " + d.sh.st.Faint.Render("(text; v: structured)") + ": " + r
	}
	return name + " " + d.sh.st.Faint.Render("(structured; v: text)") + ": " + r
}

// queryEvidence reads a query decision's evidence: the read's tool and
// arguments, its result, its error; head is "" for other evidence.
func queryEvidence(raw json.RawMessage) (head string, result, rpcErr json.RawMessage) {
	if len(raw) == 0 {
		return "", nil, nil
	}
	var q struct {
		Tool   string          `json:"tool"`
		Args   json.RawMessage `json:"args"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &q) != nil || q.Tool == "" {
		return "", nil, nil
	}
	return displayName(q.Tool) + " " + cleanJSON(q.Args, ""), q.Result, q.Error
}

// evidenceText summarises a decision's evidence: a query's tool, arguments
// and result (the part v chose), or whatever JSON was stored.
func (d *detailScreen) evidenceText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	head, result, rpcErr := queryEvidence(raw)
	if head == "" {
		return prettyJSON(raw)
	}
	if r := d.resultLabel("result", result); r != "" {
		return head + " → " + r
	}
	return head + " → " + rpcErrorText(rpcErr)
}

func indent(s, prefix string) []string {
	ls := strings.Split(s, "\n")
	for i := range ls {
		ls[i] = prefix + ls[i]
	}
	return ls
}

// stamp is a time as the journal means it: UTC, to the second. Its parts
// are joined by no-break spaces, so wrap keeps it on one line.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02\u00a015:04:05\u00a0UTC") }

// clock is a time of day with milliseconds, for the attempt timeline.
func clock(t time.Time) string { return t.UTC().Format("15:04:05.000") }
