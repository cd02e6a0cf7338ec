package tui

import (
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// R retries the calls of a group known safe to retry (their tool declares
// a key argument), each with its own key, once their count is typed; the
// others are left out and said so.
func TestBulkRetryResendsTheSafeCallsAfterTheirCountIsTyped(t *testing.T) {
	e := newEnv(t)
	e.seed()
	e.findsOnly() // the server has none of them
	m := e.model(100, 30)
	m = pickAllUnknown(t, m)
	m = press(t, m, m.list.keys.Reconcile)
	if m.bulk.finding() != guard.FindingNotFound {
		t.Fatalf("cursor on %s", m.bulk.finding())
	}
	writes := len(e.srv.sends("create_order"))

	m = press(t, m, m.bulk.keys.Retry)
	if m.dialog == nil {
		t.Fatalf("R opened no dialog: %q", m.message)
	}
	v := flat(m.View())
	for _, want := range []string{"Retry 2 calls with their same keys?", "call 1 create_order", "call 3 create_order", "create_order declares idempotency_key", "type 2 to retry them"} {
		if !strings.Contains(v, want) {
			t.Errorf("dialog lacks %q:\n%s", want, m.View())
		}
	}
	// y is not enough, nor a wrong count.
	m = step(t, m, keyMsg("y"))
	m = typeText(t, m, "3")
	m = step(t, m, keyMsg("enter"))
	if m.dialog == nil || len(e.srv.sends("create_order")) != writes {
		t.Fatal("a wrong count retried")
	}
	m = step(t, m, keyMsg("backspace"))
	m = step(t, m, keyMsg("backspace"))
	m = typeText(t, m, "2")
	m = step(t, m, keyMsg("enter"))
	if m.dialog != nil || !strings.Contains(m.message, "retried 2 calls with their same keys: 2 succeeded, 0 not") {
		t.Fatalf("after typing 2: dialog %v, %q", m.dialog != nil, m.message)
	}
	if got := len(e.srv.sends("create_order")) - writes; got != 2 {
		t.Fatalf("%d retries sent, want 2", got)
	}
	for _, id := range []int64{1, 3} {
		c := e.get(id)
		var actions []pending.Action
		for _, d := range c.Decisions {
			actions = append(actions, d.Action)
		}
		if c.State != pending.StateSucceeded || len(c.Attempts) != 2 || actions[len(actions)-1] != pending.ActionRetry {
			t.Errorf("call %d: %s, %d attempts, decisions %v", id, c.State, len(c.Attempts), actions)
		}
		n := 0
		for _, s := range e.srv.sends("create_order") {
			if s == "create_order "+c.Key {
				n++
			}
		}
		if n != 2 {
			t.Errorf("call %d: its key was sent %d times, want 2 (first attempt and retry)", id, n)
		}
	}
	if vv := m.View(); !strings.Contains(vv, "retried: succeeded, replayed by the server") {
		t.Errorf("the outcome does not show:\n%s", vv)
	}
	// Nothing is left to retry in the group; send_email (no key argument)
	// is never retried in bulk; the found group is A's.
	m = press(t, m, m.bulk.keys.Retry)
	if m.dialog != nil || !strings.Contains(m.message, `no unknown call in "not found" is left to retry`) {
		t.Fatalf("R again: %q", m.message)
	}
	m = press(t, m, m.bulk.keys.Down)
	m = press(t, m, m.bulk.keys.Down)
	if m.bulk.finding() != guard.FindingNoQuery {
		t.Fatalf("cursor on %s", m.bulk.finding())
	}
	m = press(t, m, m.bulk.keys.Retry)
	if m.dialog != nil || !strings.Contains(m.message, "none of the 1 unknown call here is known safe to retry") {
		t.Fatalf("R on send_email: %q", m.message)
	}
	m = press(t, m, m.bulk.keys.Down)
	m = press(t, m, m.bulk.keys.Retry)
	if m.dialog != nil || !strings.Contains(m.message, "the found calls took effect: A marks them applied") {
		t.Fatalf("R on found: %q", m.message)
	}
	if e.get(2).State != pending.StateUnknown || len(e.srv.sends("send_email")) != 1 {
		t.Fatal("send_email was resent")
	}
}

// esc stops a bulk retry: no more are sent; the ones out finish.
func TestEscStopsABulkRetry(t *testing.T) {
	e := newEnv(t)
	e.unknownOrders(6)
	e.findsOnly()
	o := e.options()
	o.Concurrency = 2
	m := New(o)
	m = step(t, m, tea.WindowSizeMsg{Width: 100, Height: 30})
	m = settle(t, m, m.Init())
	m = press(t, m, m.list.keys.PickAll)
	m = press(t, m, m.list.keys.Reconcile)
	m = press(t, m, m.bulk.keys.Retry)
	m = typeText(t, m, "6")
	writes := len(e.srv.sends("create_order"))
	r := newRunner(t)
	nm, cmd := m.Update(keyMsg("enter"))
	m = nm.(Model)
	if n := r.launch(cmd); n != 1 { // the confirmation
		t.Fatalf("enter started %d commands", n)
	}
	nm, cmd = m.Update(r.next())
	m = nm.(Model)
	if n := r.launch(cmd); n != 2 || len(m.retrying) != 2 || !m.writeInFlight() {
		t.Fatalf("%d retries out, %d in flight, want 2", n, len(m.retrying))
	}
	nm, _ = m.Update(keyMsg("esc"))
	m = nm.(Model)
	if !strings.Contains(m.message, "stopping: no more retries are sent; waiting for the 2 out (4 not sent)") {
		t.Fatalf("esc: %q", m.message)
	}
	for m.bulk.retryRun {
		msg := r.next()
		if _, ok := msg.(bulkRetriedMsg); !ok {
			continue
		}
		nm, cmd := m.Update(msg)
		m = nm.(Model)
		r.launch(cmd)
	}
	if got := len(e.srv.sends("create_order")) - writes; got != 2 || len(m.retrying) != 0 {
		t.Fatalf("%d retries sent after esc, want the 2 out; %d in flight", got, len(m.retrying))
	}
	if !strings.Contains(m.message, "retried 2 calls with their same keys: 2 succeeded, 0 not (see the group); 4 not sent (stopped)") {
		t.Fatalf("message %q", m.message)
	}
}

// q during a bulk retry asks first, as for one retry; quitting sends no
// more, and quits once the retries out are recorded (unknown again).
func TestQuitDuringABulkRetryWaitsForTheRetriesOut(t *testing.T) {
	e := newEnv(t)
	e.unknownOrders(5)
	e.findsOnly()
	e.srv.block = func(tool string, n int) bool { return tool == "create_order" && n == 2 }
	o := e.options()
	o.Concurrency = 2
	m := New(o)
	m = step(t, m, tea.WindowSizeMsg{Width: 100, Height: 30})
	m = settle(t, m, m.Init())
	m = press(t, m, m.list.keys.PickAll)
	m = press(t, m, m.list.keys.Reconcile)
	m = press(t, m, m.bulk.keys.Retry)
	m = typeText(t, m, "5")
	writes := len(e.srv.sends("create_order"))
	r := newRunner(t)
	nm, cmd := m.Update(keyMsg("enter"))
	m = nm.(Model)
	r.launch(cmd)
	nm, cmd = m.Update(r.next())
	m = nm.(Model)
	if n := r.launch(cmd); n != 2 {
		t.Fatalf("%d retries out", n)
	}
	for deadline := time.Now().Add(10 * time.Second); len(e.srv.sends("create_order"))-writes < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the retries did not reach the server")
		}
	}
	nm, _ = m.Update(keyMsg("q"))
	m = nm.(Model)
	if m.dialog == nil || !strings.Contains(flat(m.View()), "Quit with a write in flight?") {
		t.Fatalf("q did not ask:\n%s", m.View())
	}
	nm, cmd = m.Update(keyMsg("y"))
	m = nm.(Model)
	nm, _ = m.Update(cmd()) // quitConfirmedMsg: cancels the writes out
	m = nm.(Model)
	quit := false
	for !quit {
		msg := r.next()
		if _, ok := msg.(bulkRetriedMsg); !ok {
			continue
		}
		nm, cmd := m.Update(msg)
		m = nm.(Model)
		if cmd != nil {
			_, quit = cmd().(tea.QuitMsg)
		}
	}
	if got := len(e.srv.sends("create_order")) - writes; got != 2 {
		t.Fatalf("%d retries sent, want the 2 out before q", got)
	}
	unknown := 0
	for id := int64(1); id <= 5; id++ {
		if c := e.get(id); c.State == pending.StateUnknown {
			unknown++
		}
	}
	if unknown != 5 {
		t.Fatalf("%d of 5 calls unknown after quitting, want all (2 cancelled, 3 never sent)", unknown)
	}
}
