package tui

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// demoFake plays the demo server: create_order loses its first answer
// (after committing the order, or before, with commit false) and replays
// the stored order to a retry with the same key; find_orders answers from
// the orders it holds, or fails (findFails).
type demoFake struct {
	mu        sync.Mutex
	commit    bool
	findFails bool
	orders    []string // one idempotency key per order
}

func (d *demoFake) answer(tool string, args map[string]any, o mcpclient.CallOptions, n int) mcpclient.Delivery {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch tool {
	case "create_order":
		had := slices.Contains(d.orders, o.Key)
		if n == 1 {
			if d.commit {
				d.orders = append(d.orders, o.Key)
			}
			return mcpclient.Delivery{Kind: mcpclient.DeliveryUnknown, Reason: mcpclient.ReasonIdleTimeout, Session: 1, Err: mcpclient.ErrIdleTimeout}
		}
		meta := ""
		if had {
			meta = `,"_meta":{"io.github.mcp-confirm/replayed":true}`
		} else {
			d.orders = append(d.orders, o.Key)
		}
		return mcpclient.Delivery{Kind: mcpclient.DeliveryResult, Session: 1,
			ResultJSON: json.RawMessage(`{"content":[{"type":"text","text":"order 1"}],"structuredContent":{"order_id":1}` + meta + `}`)}
	case "find_orders":
		if d.findFails {
			return mcpclient.Delivery{Kind: mcpclient.DeliveryRPCError, Session: 1, RPCError: &mcpclient.RPCError{Code: -32603, Message: "orders database is locked"}}
		}
		want, _ := args["idempotency_key"].(string)
		var os []map[string]any
		for i, k := range d.orders {
			if want == "" || k == want {
				os = append(os, map[string]any{"order_id": i + 1, "idempotency_key": k})
			}
		}
		b, _ := json.Marshal(map[string]any{"orders": append([]map[string]any{}, os...)})
		return mcpclient.Delivery{Kind: mcpclient.DeliveryResult, Session: 1,
			ResultJSON: json.RawMessage(`{"content":[{"type":"text","text":"orders"}],"structuredContent":` + string(b) + `}`)}
	}
	return mcpclient.Delivery{Kind: mcpclient.DeliveryNotSent, Err: fmt.Errorf("no tool %s", tool)}
}

func (d *demoFake) count() int { d.mu.Lock(); defer d.mu.Unlock(); return len(d.orders) }

// demoOptions are the guided demo's options on env with the demo fake.
func demoOptions(e *env, d *demoFake) Options {
	e.srv.answer = d.answer
	o := e.options()
	o.Demo = true
	o.Prefill = map[string]map[string]any{"create_order": {"item": "widget", "quantity": 2, "buyer": "alice"}}
	return o
}

func demoModel(t *testing.T, e *env, d *demoFake) Model {
	t.Helper()
	m := New(demoOptions(e, d))
	m = step(t, m, tea.WindowSizeMsg{Width: 100, Height: 30})
	return settle(t, m, m.Init())
}

// guide is the guided demo's guide line as shown (the message lines, flat).
func guide(m Model) string {
	v := strings.Split(m.View(), "\n")
	return flat(strings.Join(v[len(v)-2-m.messageLines():len(v)-2], " "))
}

func wantGuide(t *testing.T, m Model, want string, never ...string) {
	t.Helper()
	g := guide(m)
	if !strings.Contains(g, "→ "+want) {
		t.Fatalf("guide %q, want %q; screen:\n%s", g, want, m.View())
	}
	for _, n := range never {
		if strings.Contains(g, n) {
			t.Fatalf("guide %q says %q, which it must not here", g, n)
		}
	}
}

// toUnknown creates an order from the console and lets its answer be lost;
// the outcome-unknown dialog is open (and armed) afterwards.
func toUnknown(t *testing.T, m Model) Model {
	t.Helper()
	m = press(t, m, m.list.keys.NewCall)
	m = press(t, m, m.tools.keys.Select)
	nm, cmd := m.Update(keyMsg("ctrl+s"))
	m = nm.(Model)
	// In flight: the guide says wait, and proposes no other write.
	wantGuide(t, m, "The server commits the order but never answers", "ctrl+s", "Press c", "r then y")
	m = settle(t, m, cmd)
	if _, ok := m.dialog.(*unknownDialog); !ok {
		t.Fatalf("no outcome-unknown dialog:\n%s", m.View())
	}
	return m
}

// Every guide line follows from the evidence on screen, one test per state
// of the demo.
func TestDemoGuideFollowsTheEvidence(t *testing.T) {
	t.Run("fresh", func(t *testing.T) {
		m := demoModel(t, newEnv(t), &demoFake{commit: true})
		wantGuide(t, m, "Press c, then enter on create_order, then ctrl+s")
		m = press(t, m, m.list.keys.NewCall)
		wantGuide(t, m, "Pick create_order")
		m = press(t, m, m.tools.keys.Select)
		wantGuide(t, m, "The arguments are filled in from the schema")
	})
	t.Run("editor_invalid_json", func(t *testing.T) {
		m := demoModel(t, newEnv(t), &demoFake{commit: true})
		m = press(t, m, m.list.keys.NewCall)
		m = press(t, m, m.tools.keys.Select)
		m = typeText(t, m, "{{")
		wantGuide(t, m, "The arguments do not fit the schema", "ready", "filled in")
	})
	t.Run("auto_query_found", func(t *testing.T) {
		m := toUnknown(t, demoModel(t, newEnv(t), &demoFake{commit: true}))
		wantGuide(t, m, "The query found the order: enter takes the highlighted step (retry, same key)", "Press s")
		m = step(t, m, keyMsg("esc"))
		wantGuide(t, m, "find_orders found the order: it was made. Press r then y", "Press s")
	})
	t.Run("auto_query_not_found", func(t *testing.T) {
		m := toUnknown(t, demoModel(t, newEnv(t), &demoFake{commit: false}))
		wantGuide(t, m, "The query found no order: enter takes the highlighted step (retry, same key)", "found the order")
		m = step(t, m, keyMsg("esc"))
		wantGuide(t, m, "find_orders found no order under its key. Press r then y", "The order exists", "found the order")
	})
	t.Run("query_failed", func(t *testing.T) {
		d := &demoFake{commit: true, findFails: true}
		m := toUnknown(t, demoModel(t, newEnv(t), d))
		wantGuide(t, m, "Press s (or enter): ask the server whether the order exists", "found")
		m = step(t, m, keyMsg("esc"))
		m = press(t, m, m.list.keys.Query)
		m = press(t, m, defaultDialogKeys().Yes)
		wantGuide(t, m, "The query got no answer (see above): press s then y to ask again", "found", "r then y")
		d.mu.Lock()
		d.findFails = false
		d.mu.Unlock()
		m = press(t, m, m.list.keys.Query)
		m = press(t, m, defaultDialogKeys().Yes)
		wantGuide(t, m, "find_orders found the order")
	})
	t.Run("retry_in_flight_then_done", func(t *testing.T) {
		e := newEnv(t)
		d := &demoFake{commit: true}
		m := toUnknown(t, demoModel(t, e, d))
		m = step(t, m, keyMsg("esc"))
		m = press(t, m, m.list.keys.Retry)
		nm, cmd := m.Update(keyMsg("y"))
		m = nm.(Model)
		wantGuide(t, m, "The retry is in flight with the same key", "Press c", "ctrl+s", "r then y")
		m = settle(t, m, cmd)
		wantGuide(t, m, "Done: the demo server has one order under key", "Press c")
		if !strings.Contains(guide(m), "sent 2 times: nothing done twice") {
			t.Fatalf("guide %q does not say how often it was sent", guide(m))
		}
		if d.count() != 1 {
			t.Fatalf("the demo server holds %d orders", d.count())
		}
	})
	t.Run("done_from_the_server_not_the_counts", func(t *testing.T) {
		// The server made two orders under the key (it does not dedupe):
		// the counts alone would say done; the guide says what it holds.
		e := newEnv(t)
		d := &demoFake{commit: true}
		m := toUnknown(t, demoModel(t, e, d))
		d.mu.Lock()
		d.orders = append(d.orders, d.orders[0])
		d.mu.Unlock()
		m = step(t, m, keyMsg("esc"))
		m = press(t, m, m.list.keys.Retry)
		m = press(t, m, defaultDialogKeys().Yes)
		wantGuide(t, m, "The demo server has 2 orders under key", "Done", "one order")
	})
}

// q with a write in flight asks first; n keeps it; y quits, the call is
// unknown with the operator's quit as its reason, and the next launch's
// guide starts from that.
func TestQuitMidFlightAsksAndRecordsWhy(t *testing.T) {
	e := newEnv(t)
	d := &demoFake{commit: true}
	e.srv.block = func(tool string, n int) bool { return tool == "create_order" && n == 1 }
	o := demoOptions(e, d)
	o.Tick = 50 * time.Millisecond
	tm := newTestProgram(t, New(o), 100, 30)
	waitText(t, tm, "Press c")
	tm.Send(keyMsg("c"))
	waitText(t, tm, "Pick create_order")
	tm.Send(keyMsg("enter"))
	waitText(t, tm, "ctrl+s checks")
	tm.Send(keyMsg("ctrl+s"))
	waitText(t, tm, "in flight")
	tm.Send(keyMsg("q"))
	waitText(t, tm, "Quit with a write in flight?", "quitting leaves it unknown")
	tm.Send(keyMsg("n")) // No: the console stays, the call goes on
	waitText(t, tm, "The server commits the order but never answers")
	tm.Send(keyMsg("q"))
	waitText(t, tm, "Quit with a write in flight?")
	tm.Send(keyMsg("y"))
	tm.WaitFinished(t, teatestFinal())
	c := e.find(pending.StateUnknown, "create_order")
	if want := "cancelled: the operator quit the console"; c.Reason != want {
		t.Fatalf("reason %q, want %q", c.Reason, want)
	}
	// Relaunch: the call waits in the unknown list, and the guide reads the
	// evidence the journal holds: the fake was cancelled before it
	// committed, and the automatic query (run as it became unknown) found
	// no order.
	m := demoModel(t, e, d)
	if got, ok := m.list.Selected(); !ok || got.ID != c.ID {
		t.Fatalf("relaunch: call %d not selected:\n%s", c.ID, m.View())
	}
	wantGuide(t, m, "find_orders found no order under its key. Press r then y", "Press c", "found the order")
	if !strings.Contains(m.View(), "operator quit") {
		t.Fatalf("the reason is not on screen:\n%s", m.View())
	}
}

// q with nothing in flight quits at once.
func TestQuitWithNothingInFlightQuits(t *testing.T) {
	m := demoModel(t, newEnv(t), &demoFake{commit: true})
	_, cmd := m.Update(keyMsg("q"))
	if cmd == nil || cmd() != tea.Quit() {
		t.Fatal("q did not quit")
	}
}

// The outcome-unknown dialog shows what the automatic query found and
// highlights the next step; enter does what the highlight says.
func TestUnknownDialogShowsTheAutomaticQuery(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fake   *demoFake
		says   string
		opens  string // the dialog enter opens
		golden bool
	}{
		{"found", &demoFake{commit: true}, "find_orders ran on its own as the call became unknown, and found it under this key", "Retry create_order with the same key?", true},
		{"not_found", &demoFake{commit: false}, "and found nothing under this key", "Retry create_order with the same key?", false},
		{"failed", &demoFake{commit: true, findFails: true}, "find_orders was to run on its own as the call became unknown, but got no answer", "Query create_order key", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := toUnknown(t, demoModel(t, newEnv(t), tc.fake))
			m = step(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
			if v := flat(m.View()); !strings.Contains(v, tc.says) {
				t.Fatalf("dialog does not say %q:\n%s", tc.says, m.View())
			}
			if tc.golden {
				v := m.View()
				checkFits(t, v, 80, 24)
				golden.RequireEqual(t, v)
			}
			m = press(t, m, m.dialog.(*unknownDialog).choose)
			if v := flat(m.View()); !strings.Contains(v, tc.opens) {
				t.Fatalf("enter did not open %q:\n%s", tc.opens, m.View())
			}
		})
	}
}

func newTestProgram(t *testing.T, m Model, w, h int) *teatest.TestModel {
	t.Helper()
	return teatest.NewTestModel(t, m, teatest.WithInitialTermSize(w, h))
}

func teatestFinal() teatest.FinalOpt { return teatest.WithFinalTimeout(10 * time.Second) }

// The quit question, over the form with the order in flight.
func TestGoldenQuitDialog(t *testing.T) {
	m := demoModel(t, newEnv(t), &demoFake{commit: true})
	m = step(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	m = press(t, m, m.list.keys.NewCall)
	m = press(t, m, m.tools.keys.Select)
	nm, _ := m.Update(keyMsg("ctrl+s")) // in flight: its command is not run
	nm, cmd := nm.(Model).Update(keyMsg("q"))
	m = nm.(Model)
	if cmd != nil {
		t.Fatal("q with a write in flight must ask, not quit")
	}
	v := m.View()
	checkFits(t, v, 80, 24)
	golden.RequireEqual(t, v)
	// enter alone is No: the console stays, the write goes on.
	nm, cmd = m.Update(keyMsg("enter"))
	if m = nm.(Model); m.dialog != nil || cmd != nil || m.quitting {
		t.Fatalf("enter on No quit or kept the dialog (quitting %v)", m.quitting)
	}
}
