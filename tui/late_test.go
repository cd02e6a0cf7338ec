package tui

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// Late settles (SPEC §9): a call its caller was told is unknown that then
// settles holds identical calls until an operator acknowledges it. The
// console shows such calls until then, and A acknowledges one.

// lateEnv is the goldens' journal with alice's widget order (call 1)
// answered late, two minutes before t0, and a console on it whose Ack
// calls are recorded.
func lateEnv(t *testing.T, w, h int) (*env, *ackRecorder, Model, pending.Call) {
	t.Helper()
	e := newEnv(t)
	e.seed()
	late := e.settleLate(e.get(1), 2*time.Minute)
	rec := &ackRecorder{Engine: e.g}
	o := e.options()
	o.Engine = rec
	m := New(o)
	m = step(t, m, tea.WindowSizeMsg{Width: w, Height: h})
	m = settle(t, m, m.Init())
	return e, rec, m, late
}

func TestLateSettleIsCountedFromTheUnknownTab(t *testing.T) {
	_, _, m, late := lateEnv(t, 80, 24)
	if got := tabs[m.list.tab].State; got != pending.StateUnknown {
		t.Fatalf("start tab %q", got)
	}
	if len(m.sh.late) != 1 || m.sh.late[0].ID != late.ID {
		t.Fatalf("late calls %v, want call %d", m.sh.late, late.ID)
	}
	v := m.View()
	for _, want := range []string{"⚑ 1 settled late (L)", "2 unknown · ⚑ 1 settled late"} {
		if !strings.Contains(v, want) {
			t.Errorf("the unknown tab lacks %q:\n%s", want, v)
		}
	}
	if !m.list.keys.Late.Enabled() {
		t.Fatal("L is disabled with a late call waiting")
	}
	// The unknown calls hold nothing late: A says why and opens nothing.
	if m.list.keys.Ack.Enabled() {
		t.Fatal("A is enabled on an unknown call")
	}
	c, _ := m.list.Selected()
	m = step(t, m, keyMsg(m.list.keys.Ack.Keys()[0]))
	if m.dialog != nil || !strings.Contains(m.message, fmt.Sprintf("call %d (%s) did not settle late", c.ID, c.Tool)) {
		t.Fatalf("A on an unknown call: dialog %v, message %q", m.dialog != nil, m.message)
	}

	// L goes to the call, in its state's tab, with its row marked.
	m = press(t, m, m.list.keys.Late)
	sel, ok := m.list.Selected()
	if !ok || sel.ID != late.ID || tabs[m.list.tab].State != pending.StateSucceeded {
		t.Fatalf("L selected %d in the %q tab, want call %d in succeeded", sel.ID, tabs[m.list.tab].State, late.ID)
	}
	v = m.View()
	if !strings.Contains(v, "⚑ late") || !strings.Contains(m.message, "late settle 1 of 1: call 1 (create_order) succeeded late, 2m ago") {
		t.Fatalf("no marker or message after L (%q):\n%s", m.message, v)
	}
	if !m.list.keys.Ack.Enabled() || !strings.Contains(v, "A acknowledge late settle") {
		t.Fatalf("A is not offered on the late call:\n%s", v)
	}
	// L again cycles back to the same one (the only one).
	m = press(t, m, m.list.keys.Late)
	if sel, _ := m.list.Selected(); sel.ID != late.ID {
		t.Fatalf("second L selected %d", sel.ID)
	}
}

func TestAckDialogSafeAnswers(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys []string
	}{
		{"enter starts on No", []string{"enter"}},
		{"n cancels", defaultDialogKeys().No.Keys()[:1]},
		{"esc cancels", []string{"esc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, rec, m, late := lateEnv(t, 80, 24)
			m = press(t, m, m.list.keys.Late)
			nm, cmd := m.Update(keyMsg(m.list.keys.Ack.Keys()[0]))
			m = nm.(Model)
			d, ok := m.dialog.(*confirmDialog)
			if cmd != nil || !ok {
				t.Fatalf("A must open a dialog and run nothing (cmd %v, dialog %T)", cmd != nil, m.dialog)
			}
			if d.choice != 0 {
				t.Fatal("the ack dialog does not start on No")
			}
			if v := flat(m.View()); !strings.Contains(v, "identical calls will be sent again from now on") ||
				!strings.Contains(v, "Acknowledge the late settle of create_order?") {
				t.Fatalf("the dialog does not say what ack means:\n%s", m.View())
			}
			for _, k := range tc.keys {
				m = step(t, m, keyMsg(k))
			}
			if m.dialog != nil {
				t.Fatal("dialog still open")
			}
			if len(rec.acked()) != 0 || !e.get(late.ID).HoldsLate() {
				t.Fatalf("a safe answer acknowledged the call (acks %v)", rec.acked())
			}
		})
	}
}

func TestAckProceedsOnYAndTheMarkerGoes(t *testing.T) {
	e, rec, m, late := lateEnv(t, 80, 24)
	m = press(t, m, m.list.keys.Late)
	m = press(t, m, m.list.keys.Ack)
	m = press(t, m, defaultDialogKeys().Yes)
	if m.dialog != nil {
		t.Fatal("y did not close the dialog")
	}
	if got := rec.acked(); len(got) != 1 || got[0] != late.ID {
		t.Fatalf("Engine.Ack calls %v, want [%d]", got, late.ID)
	}
	want := fmt.Sprintf("acknowledged call %d (create_order)", late.ID)
	if !strings.HasPrefix(m.message, want) || m.messageErr {
		t.Fatalf("message %q, want it to start %q", m.message, want)
	}
	got := e.get(late.ID)
	last := got.Decisions[len(got.Decisions)-1]
	if got.HoldsLate() || got.AckedAt == nil || last.Action != pending.ActionAck || last.Operator != "ops" {
		t.Fatalf("journal after ack: acked %v, last decision %+v", got.AckedAt, last)
	}
	if got.State != pending.StateSucceeded {
		t.Fatalf("ack changed the state to %s", got.State)
	}
	v := m.View()
	for _, gone := range []string{"⚑ late", "settled late (L)", "⚑ 1 settled late"} {
		if strings.Contains(v, gone) {
			t.Errorf("%q still shown after the ack:\n%s", gone, v)
		}
	}
	if sel, _ := m.list.Selected(); sel.ID != late.ID || sel.HoldsLate() {
		t.Fatalf("the row was not reloaded: %+v", sel)
	}
	if m.list.keys.Ack.Enabled() || m.list.keys.Late.Enabled() || len(m.sh.late) != 0 {
		t.Fatal("A or L still enabled after the ack")
	}
	m = step(t, m, keyMsg(m.list.keys.Ack.Keys()[0]))
	if m.dialog != nil || !strings.Contains(m.message, "was acknowledged already") {
		t.Fatalf("A on an acknowledged call: %q", m.message)
	}
	m = step(t, m, keyMsg(m.list.keys.Late.Keys()[0]))
	if !strings.Contains(m.message, "no call is waiting for an acknowledgement") {
		t.Fatalf("L with none left: %q", m.message)
	}
}

func TestDetailShowsServerIdentityAndLateSettle(t *testing.T) {
	_, rec, m, late := lateEnv(t, 100, 40)
	m = press(t, m, m.list.keys.Late)
	m = press(t, m, m.list.keys.Detail)
	v := flat(m.View())
	for _, want := range []string{"succeeded ⚑ late", "reached as orders-server --stdio",
		"⚑ settled late 2026-03-14 09:28:00 UTC (2m ago), after its caller was told it was unknown",
		"(answer came late)", "A acknowledge late settle"} {
		if !strings.Contains(v, want) {
			t.Errorf("detail lacks %q:\n%s", want, v)
		}
	}
	m = press(t, m, m.detail.keys.Ack)
	m = press(t, m, defaultDialogKeys().Yes)
	if got := rec.acked(); len(got) != 1 || got[0] != late.ID {
		t.Fatalf("Engine.Ack calls %v", got)
	}
	v = m.View()
	for i := 0; i < 5 && !strings.Contains(v, "ack by ops"); i++ {
		m = press(t, m, m.detail.keys.PageDown)
		v += m.View()
	}
	for _, want := range []string{"settled late 2026-03-14 09:28:00 UTC, acknowledged 2026-03-14 09:30:00 UTC", "ack by ops", "Decisions (2)"} {
		if !strings.Contains(flat(v), want) {
			t.Errorf("detail after the ack lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "⚑ late") {
		t.Errorf("the detail still marks the call late:\n%s", v)
	}
}

// A late settle that happens while the console runs (another process, a
// late answer) appears when the journal changes.
func TestLateSettleAppearsWhenTheJournalChanges(t *testing.T) {
	e := newEnv(t)
	e.seed()
	m := e.model(80, 24)
	if len(m.sh.late) != 0 || strings.Contains(m.View(), GlyphLate) {
		t.Fatal("late calls shown before any settled late")
	}
	e.settleLate(e.get(2), time.Minute)
	m = step(t, m, journalChangedMsg{})
	if len(m.sh.late) != 1 || !strings.Contains(m.View(), "⚑ 1 settled late (L)") {
		t.Fatalf("the late settle is not shown:\n%s", m.View())
	}
}

// lateListerJournal is a journal that lists its late calls itself.
type lateListerJournal struct {
	*pending.Journal
	asked atomic.Int32
}

func (j *lateListerJournal) HoldingLate(ctx context.Context) ([]pending.Call, error) {
	j.asked.Add(1)
	var out []pending.Call
	all, err := j.List(ctx, pending.Filter{})
	for _, c := range all {
		if c.HoldsLate() {
			out = append(out, c)
		}
	}
	return out, err
}

func TestLateCallsComeFromTheJournalsOwnListWhenItHasOne(t *testing.T) {
	e := newEnv(t)
	e.seed()
	e.settleLate(e.get(1), time.Minute)
	lj := &lateListerJournal{Journal: e.j}
	o := e.options()
	o.Journal = lj
	m := New(o)
	m = step(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	m = settle(t, m, m.Init())
	if lj.asked.Load() != 1 || len(m.sh.late) != 1 {
		t.Fatalf("HoldingLate asked %d times, %d late calls", lj.asked.Load(), len(m.sh.late))
	}
}

func TestLatePauseKeepsWholeJournalReadsRare(t *testing.T) {
	for _, tc := range []struct{ took, want time.Duration }{
		{0, 0},
		{2 * time.Millisecond, 18 * time.Millisecond},
		{time.Second, 9 * time.Second},
		{11 * time.Second, time.Minute},
	} {
		if got := latePause(tc.took); got != tc.want {
			t.Errorf("latePause(%v) = %v, want %v", tc.took, got, tc.want)
		}
	}
}

// A query or retry refused because the call was made on another server
// says where it was made and what to run instead; nothing is sent.
func TestServerMismatchSaysWhatToRun(t *testing.T) {
	e := newEnv(t)
	e.seed()
	var seed [32]byte
	other := guard.New(e.j, e.srv, guard.Options{Policy: e.policy, Operator: "ops", Keys: guard.SeededKeys(rand.NewChaCha8(seed)),
		Server: guard.ServerIdentity{Command: "orders-server", Args: []string{"--stdio", "--db", "/srv/other.db"}}})
	o := e.options()
	o.Engine = other
	m := New(o)
	m = step(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	m = settle(t, m, m.Init())
	c, _ := m.list.Selected()
	sends := len(e.srv.sent)
	for _, tc := range []struct {
		action  string
		binding func() tea.KeyMsg
	}{
		{"retry", func() tea.KeyMsg { return keyMsg(m.list.keys.Retry.Keys()[0]) }},
		{"query", func() tea.KeyMsg { return keyMsg(m.list.keys.Query.Keys()[0]) }},
	} {
		m = step(t, m, tc.binding())
		m = press(t, m, defaultDialogKeys().Yes)
		want := fmt.Sprintf("not sent: call %d was made on orders-server --stdio; run 'mcp-confirm %s %d' (it uses the call's own server)", c.ID, tc.action, c.ID)
		if m.message != want || !m.messageErr {
			t.Errorf("%s: message %q, want %q", tc.action, m.message, want)
		}
		if v := flat(m.View()); !strings.Contains(v, fmt.Sprintf("run 'mcp-confirm %s %d'", tc.action, c.ID)) {
			t.Errorf("%s: the advice is not on screen:\n%s", tc.action, m.View())
		}
	}
	if len(e.srv.sent) != sends {
		t.Fatalf("a refused call sent %v", e.srv.sent[sends:])
	}
}

// Server identity is server-controlled text (a config's server name, a
// command's arguments): it is shown inert.
func TestHostileServerIdentityIsShownInert(t *testing.T) {
	e := newEnv(t)
	var seed [32]byte
	e.g = guard.New(e.j, e.srv, guard.Options{Policy: e.policy, Operator: "ops", Keys: guard.SeededKeys(rand.NewChaCha8(seed)),
		Server: guard.ServerIdentity{Command: "orders\x1b]52;c;aGk=\x07\x1b[2J\u202e-server", Args: []string{"\x1b[31m--stdio"}}})
	e.call(time.Minute, "create_order", map[string]any{"item": "widget", "quantity": 1, "buyer": "eve"})
	m := e.model(100, 30)
	m = press(t, m, m.list.keys.Detail)
	v := m.View()
	assertInert(t, "detail", v)
	if !strings.Contains(v, "reached as orders-server --stdio") {
		t.Fatalf("no identity in the detail:\n%s", v)
	}
}

// Goldens of the late-settle screens: the operator's starting view with the
// count, the call's row after L, its detail, and the ack dialog.
func TestGoldenLateViews(t *testing.T) {
	for _, tc := range []struct {
		name string
		w, h int
		keys func(m Model) []string
	}{
		{"unknown_tab_80x24", 80, 24, func(Model) []string { return nil }},
		{"late_row_80x24", 80, 24, func(m Model) []string { return m.list.keys.Late.Keys()[:1] }},
		{"late_row_60x20", 60, 20, func(m Model) []string { return m.list.keys.Late.Keys()[:1] }},
		{"detail_80x24", 80, 24, func(m Model) []string { return []string{m.list.keys.Late.Keys()[0], m.list.keys.Detail.Keys()[0]} }},
		{"detail_60x20", 60, 20, func(m Model) []string { return []string{m.list.keys.Late.Keys()[0], m.list.keys.Detail.Keys()[0]} }},
		{"ack_dialog_80x24", 80, 24, func(m Model) []string { return []string{m.list.keys.Late.Keys()[0], m.list.keys.Ack.Keys()[0]} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, m, _ := lateEnv(t, tc.w, tc.h)
			for _, k := range tc.keys(m) {
				m = step(t, m, keyMsg(k))
			}
			v := m.View()
			checkFits(t, v, tc.w, tc.h)
			golden.RequireEqual(t, v)
		})
	}
}

func TestLateRowFitsEverySize(t *testing.T) {
	_, _, m, _ := lateEnv(t, 80, 24)
	m = press(t, m, m.list.keys.Late)
	for _, sz := range [][2]int{{40, 12}, {200, 60}, {60, 20}, {30, 8}} {
		m = step(t, m, tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
		checkFits(t, m.View(), sz[0], sz[1])
	}
}
