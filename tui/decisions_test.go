package tui

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// Update tests, one per decision path: keys in, journal and server
// checked, the returned commands run and their messages fed back.

func selectTool(t *testing.T, m Model, tool string) Model {
	t.Helper()
	for range 20 {
		if c, ok := m.list.Selected(); ok && c.Tool == tool {
			return m
		}
		m = press(t, m, m.list.keys.Down)
	}
	t.Fatalf("no %s row in the list", tool)
	return m
}

func TestListStartsOnUnknownOldestFirst(t *testing.T) {
	e := newEnv(t)
	e.seed()
	m := e.model(80, 24)
	if got := tabs[m.list.tab].State; got != pending.StateUnknown {
		t.Fatalf("start tab = %q, want unknown", got)
	}
	var tools []string
	for _, c := range m.list.rows {
		if c.State != pending.StateUnknown {
			t.Fatalf("row %d is %s in the unknown tab", c.ID, c.State)
		}
		tools = append(tools, c.Tool)
	}
	if want := "create_order send_email create_order"; strings.Join(tools, " ") != want {
		t.Fatalf("rows = %v, want oldest first: %s", tools, want)
	}
	c, _ := m.list.Selected()
	if c.Args == nil || !strings.Contains(string(c.Args), "alice") {
		t.Fatalf("selected %v, want the oldest (alice's widget)", c)
	}
	v := m.View()
	for _, want := range []string{"unknown 3", "42m", "idle timeout", "connection lost", "applied: the query found it"} {
		if !strings.Contains(v, want) {
			t.Errorf("view lacks %q:\n%s", want, v)
		}
	}
}

func TestRetryWithKeyArgProceedsOnYAndSendsTheSameKeyOnce(t *testing.T) {
	e := newEnv(t)
	e.seed()
	m := e.model(80, 24)
	c, _ := m.list.Selected()
	before := len(e.srv.sends("create_order"))

	nm, cmd := m.Update(keyMsg(m.list.keys.Retry.Keys()[0]))
	m = nm.(Model)
	if cmd != nil || m.dialog == nil {
		t.Fatalf("r must open a dialog and run nothing (cmd=%v dialog=%v)", cmd != nil, m.dialog != nil)
	}
	v := m.View()
	for _, want := range []string{"Retry create_order with the same key?", "Resend create_order with key " + keyTail(c.Key),
		"declares idempotency_key, so a completed first attempt will be replayed, not repeated", c.Key, "this is attempt 2", "orders-test"} {
		if !strings.Contains(flat(v), want) {
			t.Errorf("retry dialog lacks %q:\n%s", want, v)
		}
	}
	if n := len(e.srv.sends("create_order")); n != before {
		t.Fatalf("opening the dialog sent something (%d sends)", n-before)
	}
	m = press(t, m, defaultDialogKeys().Yes)
	if m.dialog != nil {
		t.Fatal("y did not close the dialog")
	}
	sends := e.srv.sends("create_order")
	if len(sends) != before+1 || sends[len(sends)-1] != "create_order "+c.Key {
		t.Fatalf("sends = %v, want one more with key %s", sends, c.Key)
	}
	got := e.get(c.ID)
	if got.State != pending.StateSucceeded || len(got.Attempts) != 2 {
		t.Fatalf("after retry: %s with %d attempts", got.State, len(got.Attempts))
	}
	if !strings.Contains(m.message, "retried create_order key "+keyTail(c.Key)) || !strings.Contains(m.message, "replayed") {
		t.Fatalf("message = %q", m.message)
	}
	if m.list.cnt[pending.StateUnknown] != 2 {
		t.Fatalf("counts not reloaded: %v", m.list.cnt)
	}
}

func TestRetryDialogSafeAnswers(t *testing.T) {
	dk := defaultDialogKeys()
	for _, tc := range []struct {
		name string
		keys []string
	}{
		{"enter starts on No", []string{"enter"}},
		{"n cancels", []string{"n"}},
		{"esc cancels", []string{"esc"}},
		{"q cancels", []string{"q"}},
		{"toggle twice then enter is No", []string{dk.Toggle.Keys()[0], dk.Toggle.Keys()[0], "enter"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.seed()
			m := e.model(80, 24)
			c, _ := m.list.Selected()
			before := len(e.srv.sends("create_order"))
			m = press(t, m, m.list.keys.Retry)
			for _, k := range tc.keys {
				m = step(t, m, keyMsg(k))
			}
			if m.dialog != nil {
				t.Fatal("dialog still open")
			}
			if n := len(e.srv.sends("create_order")); n != before {
				t.Fatalf("%d sends after a safe answer", n-before)
			}
			if got := e.get(c.ID); got.State != pending.StateUnknown || len(got.Decisions) != 1 {
				t.Fatalf("call is %s with %d decisions; want unknown, only the automatic query", got.State, len(got.Decisions))
			}
		})
	}
	t.Run("toggle then enter is Yes", func(t *testing.T) {
		e := newEnv(t)
		e.seed()
		m := e.model(80, 24)
		c, _ := m.list.Selected()
		m = press(t, m, m.list.keys.Retry)
		m = step(t, m, keyMsg(dk.Toggle.Keys()[0]))
		m = step(t, m, keyMsg("enter"))
		if got := e.get(c.ID); got.State != pending.StateSucceeded {
			t.Fatalf("state %s after Yes", got.State)
		}
	})
}

func TestRetryWithoutKeyArgNeedsTypedRetry(t *testing.T) {
	e := newEnv(t)
	e.seed()
	m := e.model(80, 24)
	m = selectTool(t, m, "send_email")
	c, _ := m.list.Selected()
	m = press(t, m, m.list.keys.Retry)
	v := flat(m.View())
	for _, want := range []string{"send_email declares no key argument", "may do it twice", "type retry"} {
		if !strings.Contains(v, want) {
			t.Errorf("dialog lacks %q:\n%s", want, m.View())
		}
	}
	m = step(t, m, keyMsg("enter")) // nothing typed
	m = typeText(t, m, "y")         // y is a letter here, not yes
	m = step(t, m, keyMsg("enter"))
	if m.dialog == nil || len(e.srv.sends("send_email")) != 1 {
		t.Fatalf("sent without typing retry (dialog open=%v, sends=%v)", m.dialog != nil, e.srv.sends("send_email"))
	}
	m = step(t, m, keyMsg("backspace"))
	m = typeText(t, m, "retry")
	m = step(t, m, keyMsg("enter"))
	if m.dialog != nil {
		t.Fatal("typed retry + enter did not proceed")
	}
	if s := e.srv.sends("send_email"); len(s) != 2 || s[1] != "send_email "+c.Key {
		t.Fatalf("sends = %v", s)
	}
}

func TestQueryRunsTheConfiguredReadAndStoresEvidence(t *testing.T) {
	e := newEnv(t)
	e.seed()
	m := e.model(80, 24)
	c, _ := m.list.Selected()
	m = press(t, m, m.list.keys.Query)
	v := flat(m.View())
	if !strings.Contains(v, `Run find_orders {"idempotency_key":"`+c.Key+`"}`) || !strings.Contains(v, "nothing is resent") {
		t.Fatalf("query dialog:\n%s", m.View())
	}
	finds := len(e.srv.sends("find_orders"))
	m = press(t, m, defaultDialogKeys().Yes)
	if n := len(e.srv.sends("find_orders")); n != finds+1 {
		t.Fatalf("find_orders sent %d times, want once", n-finds)
	}
	if n := len(e.srv.sends("create_order")); n != 3 {
		t.Fatalf("a query resent the write: %v", e.srv.sends("create_order"))
	}
	got := e.get(c.ID)
	last := got.Decisions[len(got.Decisions)-1]
	if got.State != pending.StateUnknown || last.Action != pending.ActionQuery || last.Operator != "ops" {
		t.Fatalf("after query: %s, last decision %+v", got.State, last)
	}
	if !strings.Contains(m.message, "the server has it") {
		t.Fatalf("message = %q", m.message)
	}
}

func TestQueryWithoutPolicyPicksAReadTool(t *testing.T) {
	e := newEnv(t)
	e.seed()
	o := e.options()
	o.Policy = nil
	m := New(o)
	m = step(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	m = settle(t, m, m.Init())
	m = selectTool(t, m, "send_email")
	c, _ := m.list.Selected()
	m = press(t, m, m.list.keys.Query)
	if v := m.View(); !strings.Contains(v, "find_orders") || !strings.Contains(v, "with which read tool") {
		t.Fatalf("pick dialog:\n%s", v)
	}
	m = press(t, m, defaultDialogKeys().Yes)
	got := e.get(c.ID)
	if d := got.Decisions[len(got.Decisions)-1]; d.Action != pending.ActionQuery || !strings.Contains(string(d.Evidence), c.Key) {
		t.Fatalf("decision %+v, want a query by key %s", d, c.Key)
	}
}

func TestAbandonTakesANoteAndNeedsY(t *testing.T) {
	e := newEnv(t)
	e.seed()
	m := e.model(80, 24)
	c, _ := m.list.Selected()
	m = press(t, m, m.list.keys.Abandon)
	m = typeText(t, m, "customer cancelled by phone") // y and n here are letters
	if m.dialog == nil {
		t.Fatal("typing the note closed the dialog")
	}
	m = step(t, m, keyMsg("enter")) // done with the note: buttons, on No
	if got := e.get(c.ID); got.State != pending.StateUnknown {
		t.Fatalf("abandoned before y: %s", got.State)
	}
	m = press(t, m, defaultDialogKeys().Yes)
	got := e.get(c.ID)
	d := got.Decisions[len(got.Decisions)-1]
	if got.State != pending.StateAbandoned || d.Action != pending.ActionAbandon || d.Note != "customer cancelled by phone" {
		t.Fatalf("after abandon: %s, %+v", got.State, d)
	}
	if !strings.Contains(m.message, "abandoned create_order key "+keyTail(c.Key)) {
		t.Fatalf("message = %q", m.message)
	}
}

func TestAbandonEscapeCancels(t *testing.T) {
	e := newEnv(t)
	e.seed()
	m := e.model(80, 24)
	c, _ := m.list.Selected()
	m = press(t, m, m.list.keys.Abandon)
	m = typeText(t, m, "nah")
	m = step(t, m, keyMsg("esc"))
	if m.dialog != nil || e.get(c.ID).State != pending.StateUnknown {
		t.Fatal("esc did not cancel the abandon")
	}
}

func TestMarkAppliedWithoutNote(t *testing.T) {
	e := newEnv(t)
	e.seed()
	m := e.model(80, 24)
	c, _ := m.list.Selected()
	m = press(t, m, m.list.keys.Mark)
	if !strings.Contains(m.View(), "applied: the query found it") {
		t.Errorf("mark dialog does not show the query's proposal:\n%s", m.View())
	}
	m = step(t, m, keyMsg("enter")) // empty note: to the buttons
	m = step(t, m, keyMsg("enter")) // No is highlighted: cancel
	if e.get(c.ID).State != pending.StateUnknown {
		t.Fatal("enter, enter marked it")
	}
	m = press(t, m, m.list.keys.Mark)
	m = step(t, m, keyMsg("enter"))
	m = press(t, m, defaultDialogKeys().Yes)
	if got := e.get(c.ID); got.State != pending.StateApplied {
		t.Fatalf("state %s, want applied", got.State)
	}
	if !strings.Contains(m.message, "marked applied") {
		t.Fatalf("message = %q", m.message)
	}
}

func TestNoteChangesNothingButTheLog(t *testing.T) {
	e := newEnv(t)
	e.seed()
	m := e.model(80, 24)
	c, _ := m.list.Selected()
	m = press(t, m, m.list.keys.Note)
	m = step(t, m, keyMsg("enter")) // empty: refused
	if m.dialog == nil {
		t.Fatal("an empty note was accepted")
	}
	m = typeText(t, m, "asked bob to check the ERP")
	m = step(t, m, keyMsg("enter"))
	got := e.get(c.ID)
	d := got.Decisions[len(got.Decisions)-1]
	if got.State != pending.StateUnknown || d.Action != pending.ActionNote || d.Note != "asked bob to check the ERP" {
		t.Fatalf("after note: %s %+v", got.State, d)
	}
}

func TestDisabledActionSaysWhy(t *testing.T) {
	e := newEnv(t)
	e.seed()
	m := e.model(80, 24)
	for tabs[m.list.tab].State != pending.StateSucceeded {
		m = press(t, m, m.list.keys.NextTab)
	}
	c, ok := m.list.Selected()
	if !ok || c.State != pending.StateSucceeded {
		t.Fatalf("no succeeded call selected: %v", c)
	}
	if m.list.keys.Retry.Enabled() || m.list.keys.Abandon.Enabled() || !m.list.keys.Note.Enabled() {
		t.Fatal("bindings do not follow the selected call's state")
	}
	if strings.Contains(m.View(), "r retry") {
		t.Errorf("help offers retry on a succeeded call:\n%s", m.View())
	}
	sends := len(e.srv.sent)
	m = step(t, m, keyMsg("r"))
	if m.dialog != nil || len(e.srv.sent) != sends {
		t.Fatal("r on a succeeded call did something")
	}
	if !strings.Contains(m.message, "is succeeded; only unknown or failed calls can be retried") {
		t.Fatalf("message = %q", m.message)
	}
}

func TestDetailShowsTheWholeHistory(t *testing.T) {
	e := newEnv(t)
	e.seed()
	m := e.model(100, 40)
	c, _ := m.list.Selected()
	m = press(t, m, m.list.keys.Detail)
	if m.active != screenDetail || !m.detail.loaded {
		t.Fatal("enter did not open the loaded detail")
	}
	v := m.View()
	for _, want := range []string{c.Key, "Attempts (1)", "#1  session 1", "unknown: idle timeout [idle clock fired]",
		"Decisions (1)", "query by mcp-confirm (automatic query)", "evidence: find_orders", "applied: the query found it",
		`"buyer": "alice"`, "declares idempotency_key"} {
		if !strings.Contains(v, want) {
			t.Errorf("detail lacks %q:\n%s", want, v)
		}
	}
	// Decisions work from the detail too, and it reloads.
	m = press(t, m, m.detail.keys.Retry)
	m = press(t, m, defaultDialogKeys().Yes)
	if v := m.View(); !strings.Contains(v, "Attempts (2)") || !strings.Contains(v, "retry by ops on host-a → attempt #2") {
		t.Fatalf("detail not reloaded after retry:\n%s", v)
	}
	m = press(t, m, m.detail.keys.Back)
	if m.active != screenList {
		t.Fatal("esc did not go back")
	}
}

// A call started from the console that times out is put in front of the
// operator: unknown tab, the call selected, a dialog that ignores keys
// during the grace period.
func TestNewCallThatBecomesUnknownIsShownWithAGracePeriod(t *testing.T) {
	e := newEnv(t)
	o := e.options()
	o.Grace = time.Hour // armed by hand below
	m := New(o)
	m = step(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	m = settle(t, m, m.Init())
	m = press(t, m, m.list.keys.NewCall)
	if m.active != screenTools {
		t.Fatal("c did not open the tool picker")
	}
	m = press(t, m, m.tools.keys.Select) // create_order is first
	if m.active != screenForm || !strings.Contains(m.form.ta.Value(), `"item": "widget"`) || strings.Contains(m.form.ta.Value(), "idempotency_key") {
		t.Fatalf("form not pre-filled from the schema:\n%s", m.form.ta.Value())
	}
	m = typeText(t, m, "q") // a letter in the editor, not quit
	m = press(t, m, m.form.keys.Send)
	if len(m.form.problems) == 0 || len(e.srv.sent) != 0 {
		t.Fatalf("invalid JSON was sent (problems %v, sent %v)", m.form.problems, e.srv.sent)
	}
	m.form.ta.SetValue(`{"item": "widget", "quantity": 0, "buyer": "alice"}`)
	m = press(t, m, m.form.keys.Send)
	if len(m.form.problems) != 1 || !strings.Contains(m.form.problems[0], "quantity must be at least 1") || len(e.srv.sent) != 0 {
		t.Fatalf("schema not checked before sending: %v", m.form.problems)
	}
	m.form.ta.SetValue(`{"item": "widget", "quantity": 2, "buyer": "alice"}`)

	// Send, and run the call by hand so the grace period can be checked.
	nm, cmd := m.Update(keyMsg(m.form.keys.Send.Keys()[0]))
	m = nm.(Model)
	if !m.form.sending || !strings.Contains(m.View(), "in flight") {
		t.Fatalf("no in-flight view:\n%s", m.View())
	}
	var done callDoneMsg
	for _, c := range cmd().(tea.BatchMsg) {
		if msg, ok := c().(callDoneMsg); ok {
			done = msg
			break
		}
	}
	nm, _ = m.Update(done)
	m = nm.(Model)
	if m.active != screenList || tabs[m.list.tab].State != pending.StateUnknown {
		t.Fatal("the unknown call is not put in front of the operator")
	}
	if _, ok := m.dialog.(*unknownDialog); !ok {
		t.Fatalf("no outcome-unknown dialog: %T", m.dialog)
	}
	m = step(t, m, keyMsg("r")) // a stray key during the grace period
	if _, ok := m.dialog.(*unknownDialog); !ok || !strings.Contains(m.View(), "ignoring keys") {
		t.Fatalf("a key answered the dialog during its grace period:\n%s", m.View())
	}
	m = step(t, m, dialogArmedMsg{Dialog: m.dialog.ID()})
	m = step(t, m, keyMsg("r"))
	if _, ok := m.dialog.(*confirmDialog); !ok || !strings.Contains(m.View(), "Retry create_order") {
		t.Fatalf("r after the grace period did not open the retry dialog:\n%s", m.View())
	}
	if len(e.srv.sends("create_order")) != 1 {
		t.Fatalf("sends = %v, want the first attempt only", e.srv.sends("create_order"))
	}
}

func TestHeldCallIsNotSent(t *testing.T) {
	e := newEnv(t)
	e.seed()
	m := e.model(80, 24)
	m = press(t, m, m.list.keys.NewCall)
	m = press(t, m, m.tools.keys.Select)
	m.form.ta.SetValue(`{"item": "widget", "quantity": 2, "buyer": "alice"}`) // identical to an unknown call
	sends := len(e.srv.sends("create_order"))
	m = press(t, m, m.form.keys.Send)
	if len(e.srv.sends("create_order")) != sends {
		t.Fatal("an identical call was sent while the first is unknown")
	}
	if !strings.Contains(m.message, "held, nothing sent") {
		t.Fatalf("message = %q", m.message)
	}
}

func TestRecoveredCallsShowABanner(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	ctx := context.Background()
	j1, err := pending.Open(ctx, path, pending.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j1.RecordIntent(ctx, pending.Intent{Server: "s", Tool: "create_order", Kind: pending.KindWrite, KindSource: pending.KindFromDefault,
		Key: "key-0123456789abcdef", Args: []byte(`{}`), Fingerprint: "f", Session: 1}); err != nil {
		t.Fatal(err)
	}
	j1.Close() // in flight, and its owner gone: as after kill -9
	j2, err := pending.Open(ctx, path, pending.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	srv := &fakeServer{name: "s", tools: testTools(), answer: ordersAnswer, seen: map[string]int{}}
	m := New(Options{Journal: j2, Engine: guard.New(j2, srv, guard.Options{}), Server: srv, Tick: time.Millisecond})
	m = step(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	m = settle(t, m, m.Init())
	v := m.View()
	if !strings.Contains(v, "1 call recovered after an unclean shutdown") || !strings.Contains(v, "recovered after unclean") {
		t.Fatalf("no recovery banner or reason:\n%s", v)
	}
}

// Another process on the same journal (here: a second journal handle and
// guard, as a CLI call would be) shows up through guard.Watch without a key.
func TestChangesFromAnotherProcessAppearLive(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := e.options()
	o.Watch = guard.Watch(ctx, e.j, 5*time.Millisecond, 0, nil)
	m := New(o)
	m = step(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	nm, _ := m.Update(m.list.reload(anchorStart)())
	m = nm.(Model)
	if len(m.list.rows) != 0 {
		t.Fatal("journal not empty")
	}
	other, err := pending.Open(ctx, e.j.Path(), pending.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	g2 := guard.New(other, e.srv, guard.Options{})
	if _, err := g2.Call(ctx, guard.Request{Tool: "create_order", Args: map[string]any{"item": "gadget", "quantity": 1, "buyer": "dave"}}); err != nil {
		t.Fatal(err)
	}
	msg := watchCmd(o.Watch)() // blocks until the watch sees the change
	if _, ok := msg.(journalChangedMsg); !ok {
		t.Fatalf("watch gave %T", msg)
	}
	cancel() // the watch closes, so the re-armed watchCmd returns
	m = step(t, m, msg)
	if v := m.View(); !strings.Contains(v, "buyer=dave") || !strings.Contains(v, "unknown 1") {
		t.Fatalf("the other process's call is not shown:\n%s", v)
	}
}

func TestQuitKeys(t *testing.T) {
	e := newEnv(t)
	m := e.model(80, 24)
	if _, cmd := m.Update(keyMsg("q")); cmd == nil || cmd() != tea.Quit() {
		t.Fatal("q does not quit on the list")
	}
	m = press(t, m, m.list.keys.Note) // no call: says why, no dialog
	if m.dialog != nil {
		t.Fatal("a dialog opened with no call")
	}
	m = press(t, m, m.list.keys.NewCall)
	m = press(t, m, m.tools.keys.Select)
	if _, cmd := m.Update(keyMsg("q")); cmd != nil && cmd() == tea.Quit() {
		t.Fatal("q quit while typing in the editor")
	}
	if _, cmd := m.Update(keyMsg("ctrl+c")); cmd == nil || cmd() != tea.Quit() {
		t.Fatal("ctrl+c does not quit from the editor")
	}
}

func TestHelpToggles(t *testing.T) {
	e := newEnv(t)
	e.seed()
	m := e.model(80, 24)
	m = press(t, m, m.keys.Help)
	v := m.View()
	for _, want := range []string{"retry same key", "abandon", "mark applied", "filter by tool", "next state", "new call", "tools"} {
		if !strings.Contains(v, want) {
			t.Errorf("full help lacks %q:\n%s", want, v)
		}
	}
	m = press(t, m, m.keys.Help)
	if m.showHelp {
		t.Fatal("? did not close help")
	}
}

func TestToolFilter(t *testing.T) {
	e := newEnv(t)
	e.seed()
	m := e.model(80, 24)
	m = press(t, m, m.list.keys.Filter)
	m = typeText(t, m, "send_email")
	m = step(t, m, keyMsg("enter"))
	if len(m.list.rows) != 1 || m.list.rows[0].Tool != "send_email" {
		t.Fatalf("filter: %d rows", len(m.list.rows))
	}
	m = press(t, m, m.list.keys.Filter)
	m = step(t, m, keyMsg("esc"))
	if len(m.list.rows) != 3 {
		t.Fatalf("filter not cleared: %d rows", len(m.list.rows))
	}
}

// The README's key table is KeyTable's output, between its markers.
func TestREADMEKeyTableMatchesTheKeyMaps(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, "<!-- keys:begin -->\n"), strings.Index(s, "<!-- keys:end -->")
	if i < 0 || j < i {
		t.Fatal("README.md has no keys:begin/keys:end markers")
	}
	if got := s[i+len("<!-- keys:begin -->\n") : j]; got != KeyTable() {
		t.Fatalf("README key table is stale; paste tui.KeyTable():\n%s", KeyTable())
	}
}

// The guided demo's hints walk a newcomer through the whole story: create
// an order, watch it become unknown, read what the automatic query found,
// retry it with the same key, and see one order on the demo server.
func TestGuidedDemoWalkthrough(t *testing.T) {
	e := newEnv(t)
	d := &demoFake{commit: true}
	m := demoModel(t, e, d)
	hint := func(want string) {
		t.Helper()
		wantGuide(t, m, want)
	}
	hint("Press c, then enter on create_order, then ctrl+s")
	m = press(t, m, m.list.keys.NewCall)
	hint("Pick create_order")
	m = press(t, m, m.tools.keys.Select)
	hint("The arguments are filled in")
	m = press(t, m, m.form.keys.Send) // the fake server loses the answer; the dialog arms
	if _, ok := m.dialog.(*unknownDialog); !ok {
		t.Fatalf("no outcome-unknown dialog:\n%s", m.View())
	}
	hint("The query found the order: enter takes the highlighted step (retry, same key)")
	m = step(t, m, keyMsg("enter")) // the retry's own confirmation, on No
	m = press(t, m, defaultDialogKeys().Yes)
	hint("Done: the demo server has one order under key")
	if s := e.srv.sends("create_order"); len(s) != 2 || s[0] != s[1] {
		t.Fatalf("create_order sends %v: want the first attempt and one retry with the same key", s)
	}
}

// Past the policy's key_retention, even a tool that declares its key asks
// for "retry" typed: the server may have forgotten the key. Within the
// retention the dialog gives the time left and asks nothing more.
func TestRetryPastKeyRetentionNeedsTypedRetry(t *testing.T) {
	e := newEnvPolicy(t, testPolicy+"key_retention = \"30m\"\n")
	e.seed() // create_order calls made 42, 5 and 3 minutes ago
	m := e.model(100, 30)

	m = selectCall(t, m, func(c pending.Call) bool { return c.Tool == "create_order" && t0.Sub(c.CreatedAt) < 10*time.Minute })
	m = press(t, m, m.list.keys.Retry)
	if v := flat(m.View()); strings.Contains(v, "type retry") || !strings.Contains(v, "more by the server (key_retention 30m)") {
		t.Errorf("within the retention: want the time left and no typed retry:\n%s", m.View())
	}
	m = step(t, m, keyMsg("esc"))
	if m.dialog != nil {
		t.Fatal("esc did not close the dialog")
	}

	m = selectCall(t, m, func(c pending.Call) bool { return c.Tool == "create_order" && t0.Sub(c.CreatedAt) > 30*time.Minute })
	old, _ := m.list.Selected()
	m = press(t, m, m.list.keys.Retry)
	v := flat(m.View())
	for _, want := range []string{"may no longer recognise the key", "may do it twice", "type retry"} {
		if !strings.Contains(v, want) {
			t.Errorf("past the retention, the dialog lacks %q:\n%s", want, m.View())
		}
	}
	sends := len(e.srv.sends("create_order"))
	m = step(t, m, keyMsg("enter"))
	if m.dialog == nil || len(e.srv.sends("create_order")) != sends {
		t.Fatal("sent without typing retry")
	}
	m = typeText(t, m, "retry")
	m = step(t, m, keyMsg("enter"))
	if m.dialog != nil {
		t.Fatal("typed retry + enter did not proceed")
	}
	if s := e.srv.sends("create_order"); len(s) != sends+1 || s[len(s)-1] != "create_order "+old.Key {
		t.Fatalf("sends = %v, want one more with key %s", s, old.Key)
	}
}

// selectCall moves the selection to the first call that ok accepts, from
// the top of the list.
func selectCall(t *testing.T, m Model, ok func(pending.Call) bool) Model {
	t.Helper()
	for range 20 {
		m = press(t, m, m.list.keys.Up)
	}
	for range 20 {
		if c, sel := m.list.Selected(); sel && ok(c) {
			return m
		}
		m = press(t, m, m.list.keys.Down)
	}
	t.Fatal("no such call in the list")
	return m
}

// TestLoserOfARaceIsToldWhoWon: an operator at another console (another
// journal handle, on host-b) abandons the call this console shows as
// unknown; this console's abandon, confirmed a moment later, is refused
// with who decided it and where, and nothing more is written.
func TestLoserOfARaceIsToldWhoWon(t *testing.T) {
	e := newEnv(t)
	e.seed()
	m := e.model(100, 24)
	c, _ := m.list.Selected()
	m = press(t, m, m.list.keys.Abandon)
	m = step(t, m, keyMsg("enter")) // no note: buttons
	other, err := pending.Open(context.Background(), e.j.Path(), pending.Options{Host: "host-b"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Decide(context.Background(), c.ID, pending.DecisionInput{Action: pending.ActionAbandon, Operator: "bob"}); err != nil {
		t.Fatal(err)
	}
	m = press(t, m, defaultDialogKeys().Yes)
	want := fmt.Sprintf("call %d was just decided by bob on host-b (abandon, ", c.ID)
	if !strings.Contains(m.message, want) || !strings.Contains(m.message, "nothing was done") {
		t.Fatalf("message = %q, want it to say %q", m.message, want)
	}
	var abandons []pending.Decision
	for _, d := range e.get(c.ID).Decisions {
		if d.Action == pending.ActionAbandon {
			abandons = append(abandons, d)
		}
	}
	if len(abandons) != 1 || abandons[0].Operator != "bob" {
		t.Fatalf("abandons after the race: %+v, want bob's only", abandons)
	}
}
