package tui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// Bulk reconciliation in the console (issue 21): pick calls, S queries them
// all, the findings come in groups, A accepts the found group.

// findsOnly makes find_orders find the orders of the keys in found and
// nothing under any other key.
func (e *env) findsOnly(found ...string) {
	e.srv.mu.Lock()
	defer e.srv.mu.Unlock()
	e.srv.answer = func(tool string, args map[string]any, o mcpclient.CallOptions, n int) mcpclient.Delivery {
		if tool != "find_orders" {
			return ordersAnswer(tool, args, o, n)
		}
		for _, k := range found {
			if args["idempotency_key"] == k {
				return ordersAnswer(tool, args, o, n)
			}
		}
		return mcpclient.Delivery{Kind: mcpclient.DeliveryResult, Session: 1,
			ResultJSON: json.RawMessage(`{"content":[{"type":"text","text":"0 orders"}],"structuredContent":{"orders":[]}}`)}
	}
}

// pickAllUnknown selects the three unknown calls of the seed with space.
func pickAllUnknown(t *testing.T, m Model) Model {
	t.Helper()
	m = press(t, m, m.list.keys.Top)
	for range 3 {
		m = press(t, m, m.list.keys.Pick)
	}
	if len(m.list.picked) != 3 {
		t.Fatalf("%d calls picked, want 3", len(m.list.picked))
	}
	return m
}

func (b *bulkScreen) groupIDs(f guard.Finding) []int64 {
	var out []int64
	for _, i := range b.members(f) {
		out = append(out, b.items[i].call.ID)
	}
	return out
}

func TestSpaceSelectsAndSQueriesTheSelectionIntoGroups(t *testing.T) {
	e := newEnv(t)
	e.seed()
	alice, bob := e.find(pending.StateUnknown, "create_order"), e.get(3)
	email := e.find(pending.StateUnknown, "send_email")
	e.findsOnly(alice.Key)
	m := e.model(100, 30)

	m = press(t, m, m.list.keys.Pick)
	if v := m.View(); !strings.Contains(v, GlyphPicked+" 1 selected") || !strings.Contains(v, " "+GlyphPicked+"● 42m") {
		t.Fatalf("one pick does not show:\n%s", v)
	}
	if c, _ := m.list.Selected(); c.ID != email.ID {
		t.Fatalf("space did not move to the next call: on %d", c.ID)
	}
	m = press(t, m, m.list.keys.Pick)
	m = press(t, m, m.list.keys.Pick)
	if v := m.View(); !strings.Contains(v, "S query 3 selected") {
		t.Fatalf("help does not lead with the query of the selection:\n%s", v)
	}
	writes := len(e.srv.sends("create_order"))

	m = press(t, m, m.list.keys.Reconcile)
	if m.active != screenBulk || len(m.list.picked) != 0 {
		t.Fatalf("after S: screen %d, %d still picked", m.active, len(m.list.picked))
	}
	b := m.bulk
	if b.running || b.queried() != 3 {
		t.Fatalf("run not over: running %v, %d queried", b.running, b.queried())
	}
	for f, want := range map[guard.Finding][]int64{
		guard.FindingFound: {alice.ID}, guard.FindingNotFound: {bob.ID}, guard.FindingNoQuery: {email.ID}, guard.FindingQueryFailed: nil,
	} {
		if got := b.groupIDs(f); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v", f, got, want)
		}
	}
	if !strings.Contains(m.message, "queried 3 calls: found 1, not found 1, query failed 0, no query configured 1; A marks the 1 found applied") {
		t.Errorf("message %q", m.message)
	}
	v := m.View()
	for _, want := range []string{"Queried 3 calls", "3/3", GlyphFound + " found", GlyphNotFound + " not found", "orders: 1 (order_id 7)", "A accept the group's proposals"} {
		if !strings.Contains(v, want) {
			t.Errorf("view lacks %q:\n%s", want, v)
		}
	}
	// Each query is kept on its call, which stays unknown; nothing is resent.
	for _, id := range []int64{alice.ID, bob.ID} {
		c := e.get(id)
		if c.State != pending.StateUnknown || c.Decisions[len(c.Decisions)-1].Action != pending.ActionQuery {
			t.Errorf("call %d after the bulk query: %s, decisions %v", id, c.State, c.Decisions)
		}
	}
	if got := e.get(bob.ID).Proposal; got != guard.ProposalNotFound {
		t.Errorf("bob's proposal %q", got)
	}
	if n := len(e.srv.sends("create_order")); n != writes {
		t.Fatalf("the bulk query sent %d writes", n-writes)
	}

	// esc goes back to the list; S with nothing picked shows the findings again.
	m = press(t, m, m.bulk.keys.Back)
	if m.active != screenList {
		t.Fatalf("esc: screen %d", m.active)
	}
	m = press(t, m, m.list.keys.Reconcile)
	if m.active != screenBulk || m.bulk.queried() != 3 {
		t.Fatalf("S with nothing picked: screen %d", m.active)
	}
}

func TestSWithNothingSelectedSaysHow(t *testing.T) {
	e := newEnv(t)
	e.seed()
	m := e.model(80, 24)
	m = press(t, m, m.list.keys.Reconcile)
	if m.active != screenList || !strings.Contains(m.message, "space selects the call under the cursor, * all shown") {
		t.Fatalf("screen %d, message %q", m.active, m.message)
	}
}

func TestStarSelectsTheFilteredListThenNone(t *testing.T) {
	e := newEnv(t)
	e.seed()
	m := e.model(80, 24)
	m = press(t, m, m.list.keys.PickAll)
	if len(m.list.picked) != 3 || !strings.Contains(m.message, "selected 3 more of the unknown calls; 3 selected") {
		t.Fatalf("*: %d picked, message %q", len(m.list.picked), m.message)
	}
	m = press(t, m, m.list.keys.PickAll)
	if len(m.list.picked) != 0 || !strings.Contains(m.message, "unselected the 3 unknown calls") {
		t.Fatalf("* again: %d picked, message %q", len(m.list.picked), m.message)
	}
	// With a tool filter, only that tool's calls.
	m = press(t, m, m.list.keys.Filter)
	m = typeText(t, m, "create_order")
	m = step(t, m, keyMsg("enter"))
	m = press(t, m, m.list.keys.PickAll)
	for _, c := range m.list.picked {
		if c.Tool != "create_order" || c.State != pending.StateUnknown {
			t.Fatalf("picked %d %s %s", c.ID, c.Tool, c.State)
		}
	}
	if len(m.list.picked) != 2 || !strings.Contains(m.message, "unknown calls of create_order") {
		t.Fatalf("filtered *: %d picked, %q", len(m.list.picked), m.message)
	}
}

func TestAAcceptsTheFoundGroupAfterADialogThatListsIt(t *testing.T) {
	e := newEnv(t)
	e.seed()
	alice := e.find(pending.StateUnknown, "create_order")
	e.findsOnly() // nothing found yet
	m := e.model(100, 30)
	m = pickAllUnknown(t, m)
	m = press(t, m, m.list.keys.Reconcile)
	// The cursor starts on the first group with calls; A there proposes
	// nothing.
	if m.bulk.finding() != guard.FindingNotFound {
		t.Fatalf("cursor on %s", m.bulk.finding())
	}
	m = press(t, m, m.bulk.keys.Accept)
	if m.dialog != nil || !strings.Contains(m.message, `"not found" proposes nothing to accept`) {
		t.Fatalf("A on not found: %q", m.message)
	}
	// The found group is empty: A says why, and opens nothing.
	m = press(t, m, m.bulk.keys.Up)
	m = press(t, m, m.bulk.keys.Accept)
	if m.dialog != nil || !strings.Contains(m.message, "no found call is left to mark") {
		t.Fatalf("A on an empty found group: dialog %v, %q", m.dialog != nil, m.message)
	}

	// The orders turn up: query all three again, found two.
	e.findsOnly(alice.Key, e.get(3).Key)
	m = press(t, m, m.bulk.keys.Back)
	m = pickAllUnknown(t, m)
	m = press(t, m, m.list.keys.Reconcile)
	if got := m.bulk.groupIDs(guard.FindingFound); fmt.Sprint(got) != "[1 3]" {
		t.Fatalf("found %v", got)
	}
	if m.bulk.finding() != guard.FindingFound {
		t.Fatalf("cursor on %s, want the found group", m.bulk.finding())
	}
	m = press(t, m, m.bulk.keys.Accept)
	if m.dialog == nil {
		t.Fatalf("A opened no dialog: %q", m.message)
	}
	v := flat(m.View())
	for _, want := range []string{"Mark 2 found calls applied?", "call 1 create_order", "call 3 create_order", "orders: 1 (order_id 7)", "calls 1–2 of 2", "No", "Yes, mark them applied"} {
		if !strings.Contains(v, want) {
			t.Errorf("dialog lacks %q:\n%s", want, m.View())
		}
	}
	// n cancels: nothing is marked.
	m = step(t, m, keyMsg("n"))
	if m.dialog != nil || e.get(alice.ID).State != pending.StateUnknown {
		t.Fatalf("n: dialog %v, state %s", m.dialog != nil, e.get(alice.ID).State)
	}
	// enter alone is No.
	m = press(t, m, m.bulk.keys.Accept)
	m = step(t, m, keyMsg("enter"))
	if m.dialog != nil || e.get(alice.ID).State != pending.StateUnknown {
		t.Fatalf("enter: dialog %v, state %s", m.dialog != nil, e.get(alice.ID).State)
	}
	m = press(t, m, m.bulk.keys.Accept)
	m = step(t, m, keyMsg("y"))
	if !strings.Contains(m.message, "marked 2 calls applied, each with its query's evidence") {
		t.Fatalf("message %q", m.message)
	}
	for _, id := range []int64{1, 3} {
		c := e.get(id)
		var query, mark pending.Decision
		for _, d := range c.Decisions {
			switch d.Action {
			case pending.ActionQuery:
				query = d
			case pending.ActionMark:
				mark = d
			}
		}
		if c.State != pending.StateApplied || !bytes.Equal(mark.Evidence, query.Evidence) || mark.Operator != "ops" ||
			!strings.Contains(mark.Note, "the query found it (orders: 1 (order_id 7))") {
			t.Errorf("call %d: %s, mark %+v", id, c.State, mark)
		}
	}
	if e.get(2).State != pending.StateUnknown {
		t.Errorf("the call with no query was marked too")
	}
	if v := m.View(); !strings.Contains(v, "proposal applied: accepted") || !strings.Contains(v, "☑ applied now") {
		t.Errorf("the found group does not say it was accepted:\n%s", v)
	}
	m = press(t, m, m.bulk.keys.Accept)
	if m.dialog != nil || !strings.Contains(m.message, "no found call is left to mark") {
		t.Fatalf("A again: %q", m.message)
	}
}

// A call decided elsewhere between the query and the accept is refused,
// and said so; the others are marked.
func TestAcceptSaysWhichCallsWereRefused(t *testing.T) {
	e := newEnv(t)
	e.seed()
	e.findsOnly(e.get(1).Key, e.get(3).Key)
	m := e.model(100, 30)
	m = pickAllUnknown(t, m)
	m = press(t, m, m.list.keys.Reconcile)
	m = press(t, m, m.bulk.keys.Accept)
	if err := e.g.Abandon(context.Background(), 3, "by another operator"); err != nil {
		t.Fatal(err)
	}
	m = step(t, m, keyMsg("y"))
	if !m.messageErr || !strings.Contains(m.message, "marked 1 call applied") || !strings.Contains(m.message, "1 refused") {
		t.Fatalf("message %q", m.message)
	}
	if e.get(1).State != pending.StateApplied || e.get(3).State != pending.StateAbandoned {
		t.Fatalf("states %s %s", e.get(1).State, e.get(3).State)
	}
	if v := m.View(); !strings.Contains(v, "not marked:") {
		t.Errorf("the refusal does not show:\n%s", v)
	}
}

// Server text in the evidence is data: no escape sequence reaches the
// screen, on the reconcile screen or in the accept dialog.
func TestBulkEvidenceIsSanitised(t *testing.T) {
	e := newEnv(t)
	e.seed()
	e.srv.mu.Lock()
	e.srv.answer = func(tool string, args map[string]any, o mcpclient.CallOptions, n int) mcpclient.Delivery {
		if tool == "find_orders" {
			return mcpclient.Delivery{Kind: mcpclient.DeliveryResult, Session: 1, ResultJSON: json.RawMessage(
				`{"content":[],"structuredContent":{"ord\u001b]52;c;aGk=\u0007ers\u001b[2J":[{"order_id":"7\u001b[31m\u202e"}]}}`)}
		}
		return ordersAnswer(tool, args, o, n)
	}
	e.srv.mu.Unlock()
	m := e.model(100, 30)
	m = pickAllUnknown(t, m)
	m = press(t, m, m.list.keys.Reconcile)
	screen, dialog := m.View(), press(t, m, m.bulk.keys.Accept).View()
	for _, v := range []string{screen, dialog} {
		for _, bad := range []string{"\x1b]52", "\x1b[2J", "\x1b[31m", "\u202e", "\a"} {
			if strings.Contains(v, bad) {
				t.Fatalf("view holds %q:\n%q", bad, v)
			}
		}
	}
	if !strings.Contains(screen, ": 1 (order_id 7") || !strings.Contains(dialog, "create_order   …EBTX9G  ord") {
		t.Fatalf("the evidence is gone:\n%s\n%s", screen, dialog)
	}
}

// unknownOrders makes n more unknown create_order calls.
func (e *env) unknownOrders(n int) {
	for i := range n {
		e.call(time.Duration(n-i)*time.Second, "create_order", map[string]any{"item": "widget", "quantity": 10 + i, "buyer": "alice"})
	}
}

// runner runs a model's commands as the program would, each in its own
// goroutine, and hands their messages back one at a time.
type runner struct {
	t    *testing.T
	msgs chan tea.Msg
}

func newRunner(t *testing.T) *runner { return &runner{t: t, msgs: make(chan tea.Msg, 1000)} }

// launch starts cmd (a batch is started command by command) and returns
// how many commands it started.
func (r *runner) launch(cmd tea.Cmd) int {
	if cmd == nil {
		return 0
	}
	msg := cmd()
	if b, ok := msg.(tea.BatchMsg); ok {
		n := 0
		for _, c := range b {
			if c != nil {
				n++
				go func() { r.msgs <- c() }()
			}
		}
		return n
	}
	r.msgs <- msg
	return 1
}

func (r *runner) next() tea.Msg {
	r.t.Helper()
	select {
	case msg := <-r.msgs:
		return msg
	case <-time.After(30 * time.Second):
		r.t.Fatal("no message came")
	}
	return nil
}

// At most Concurrency queries are out at once, and each one that ends
// sends the next; the console takes keys all along.
func TestBulkQueryHasAtMostConcurrencyOut(t *testing.T) {
	e := newEnv(t)
	e.unknownOrders(20)
	var mu sync.Mutex
	out, most := 0, 0
	e.srv.mu.Lock()
	e.srv.answer = func(tool string, args map[string]any, o mcpclient.CallOptions, n int) mcpclient.Delivery {
		if tool == "find_orders" {
			mu.Lock()
			out++
			most = max(most, out)
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
			mu.Lock()
			out--
			mu.Unlock()
		}
		return ordersAnswer(tool, args, o, n)
	}
	e.srv.mu.Unlock()
	o := e.options()
	o.Concurrency = 3
	m := New(o)
	m = step(t, m, tea.WindowSizeMsg{Width: 100, Height: 30})
	m = settle(t, m, m.Init())
	m = press(t, m, m.list.keys.PickAll)
	if len(m.list.picked) != 20 {
		t.Fatalf("%d picked", len(m.list.picked))
	}
	r := newRunner(t)
	nm, cmd := m.Update(keyMsg("S"))
	m = nm.(Model)
	if n := r.launch(cmd); n != 3 {
		t.Fatalf("S sent %d queries at once, want 3", n)
	}
	unsent := 17
	for m.bulk.running {
		msg := r.next()
		if _, ok := msg.(reconciledMsg); !ok {
			continue // the reloads the end of the run asks for
		}
		nm, cmd := m.Update(msg)
		m = nm.(Model)
		want := 0
		if unsent > 0 {
			want, unsent = 1, unsent-1
		}
		if n := r.launch(cmd); m.bulk.running && n != want {
			t.Fatalf("an answer sent %d more queries, want %d", n, want)
		}
		// Keys still work while it runs.
		nm, _ = m.Update(keyMsg("j"))
		m = nm.(Model)
		if v := m.View(); m.bulk.running && !strings.Contains(v, "Querying 20 selected calls, 3 at a time") {
			t.Fatalf("progress does not show:\n%s", v)
		}
	}
	if most > 3 || m.bulk.groupSize(guard.FindingFound) != 20 {
		t.Fatalf("at most %d out (want ≤ 3); %d found", most, m.bulk.groupSize(guard.FindingFound))
	}
}

// esc cancels a run: nothing more is sent, the queries out end, and the
// calls never queried are counted apart.
func TestEscCancelsTheBulkQuery(t *testing.T) {
	e := newEnv(t)
	e.unknownOrders(10)
	e.srv.block = func(tool string, n int) bool { return tool == "find_orders" }
	o := e.options()
	o.Concurrency = 3
	m := New(o)
	m = step(t, m, tea.WindowSizeMsg{Width: 100, Height: 30})
	m = settle(t, m, m.Init())
	m = press(t, m, m.list.keys.PickAll)
	r := newRunner(t)
	before := len(e.srv.sends("find_orders")) // the automatic queries, as each call became unknown
	nm, cmd := m.Update(keyMsg("S"))
	m = nm.(Model)
	if n := r.launch(cmd); n != 3 {
		t.Fatalf("%d queries out", n)
	}
	for deadline := time.Now().Add(10 * time.Second); len(e.srv.sends("find_orders"))-before < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the queries did not reach the server")
		}
	}
	nm, _ = m.Update(keyMsg("esc"))
	m = nm.(Model)
	if !m.bulk.cancelled || !strings.Contains(m.message, "cancelling: no more queries are sent; waiting for the 3 out") {
		t.Fatalf("esc: %q", m.message)
	}
	for m.bulk.running {
		msg := r.next()
		if _, ok := msg.(reconciledMsg); !ok {
			continue
		}
		nm, cmd := m.Update(msg)
		m = nm.(Model)
		r.launch(cmd)
	}
	if got := len(e.srv.sends("find_orders")) - before; got != 3 {
		t.Fatalf("%d queries sent, want the 3 out before esc", got)
	}
	if !strings.Contains(m.message, "cancelled: queried 3 of 10 calls (7 not queried)") || m.bulk.groupSize(guard.FindingQueryFailed) != 3 {
		t.Fatalf("message %q; %d query failed", m.message, m.bulk.groupSize(guard.FindingQueryFailed))
	}
	if v := m.View(); !strings.Contains(v, "Cancelled: 3 of 10 calls queried; 7 not queried") {
		t.Fatalf("view:\n%s", v)
	}
	// esc now goes back to the list.
	nm, _ = m.Update(keyMsg("esc"))
	if nm.(Model).active != screenList {
		t.Fatal("esc after the run did not go back to the list")
	}
}

// The accept dialog lists every call it will mark: as many as fit, and
// ↑/↓ scroll the rest; the box always fits the window, buttons included.
func TestAcceptDialogScrollsAndFits(t *testing.T) {
	e := newEnv(t)
	e.unknownOrders(12)
	for _, sz := range [][2]int{{80, 24}, {60, 20}, {120, 40}} {
		m := e.model(sz[0], sz[1])
		m = press(t, m, m.list.keys.PickAll)
		m = press(t, m, m.list.keys.Reconcile)
		m = press(t, m, m.bulk.keys.Accept)
		v := m.View()
		checkFits(t, v, sz[0], sz[1])
		d := m.dialog.(*acceptDialog)
		if !strings.Contains(v, "Yes, mark them applied") || !strings.Contains(v, fmt.Sprintf("calls 1–%d of 12", d.rows)) {
			t.Fatalf("%v: dialog cut or list missing:\n%s", sz, v)
		}
		for range 20 {
			m = press(t, m, d.down)
		}
		if v := m.View(); !strings.Contains(v, fmt.Sprintf("calls %d–12 of 12", 13-d.rows)) || !strings.Contains(v, "call 12 ") {
			t.Fatalf("%v: scrolled to the end:\n%s", sz, v)
		}
		m = step(t, m, keyMsg("esc"))
		if m.dialog != nil || e.get(12).State != pending.StateUnknown {
			t.Fatal("esc did not cancel")
		}
	}
}

// syntheticRun starts a bulk run on a console over n calls that are not
// in its journal (nothing is sent: the queries S would start are not
// run) and feeds the answers of the calls order picks, as they would
// come back: findingOf says each one's finding.
func syntheticRun(t *testing.T, n int) Model {
	t.Helper()
	m := newEnv(t).model(120, 40)
	calls := make([]pending.Call, n)
	for i := range calls {
		calls[i] = pending.Call{ID: int64(i + 1), State: pending.StateUnknown, Tool: "create_order", Key: fmt.Sprintf("k-%05d", i)}
	}
	m.bulk.start(calls)
	m.showBulk()
	return m
}

func findingOf(id int64) guard.Finding {
	if id%7 == 0 {
		return guard.FindingNoQuery
	}
	return guard.Findings[id%3]
}

func answerOf(m Model, id int64) reconciledMsg {
	c, _ := m.bulk.item(id)
	return reconciledMsg{Run: m.bulk.run, ID: id, Res: guard.Reconciled{Call: c.call, Finding: findingOf(id), Evidence: "orders: 0"}}
}

// The groups are kept as the answers come (a frame must not scan the
// run): whatever order the answers come in, each group is its calls in id
// order, and the counts are those of the calls answered.
func TestBulkGroupsFollowTheAnswersInAnyOrder(t *testing.T) {
	const n = 500
	m := syntheticRun(t, n)
	order := make([]int64, n)
	for i := range order {
		order[i] = int64(i + 1)
	}
	mrand.New(mrand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
	for k, id := range order {
		for range 2 { // a second answer for a call is dropped
			nm, _ := m.Update(answerOf(m, id)) // the next queries it starts are not run
			m = nm.(Model)
		}
		if k%50 != 49 && k != n-1 {
			continue
		}
		b := m.bulk
		want := map[guard.Finding][]int64{}
		for _, done := range order[:k+1] {
			want[findingOf(done)] = append(want[findingOf(done)], done)
		}
		for _, f := range guard.Findings {
			slices.Sort(want[f])
			if got := b.groupIDs(f); fmt.Sprint(got) != fmt.Sprint(want[f]) {
				t.Fatalf("after %d answers, %s: %v\nwant %v", k+1, f, got, want[f])
			}
		}
		if b.queried() != k+1 {
			t.Fatalf("after %d answers: %d queried", k+1, b.queried())
		}
	}
	if m.bulk.running || !strings.Contains(m.View(), fmt.Sprintf("Queried %d calls", n)) {
		t.Fatalf("the run did not end:\n%s", m.View())
	}
	if got, want := m.bulk.acceptableCount(), len(m.bulk.acceptable()); got != want || got != len(m.bulk.groupIDs(guard.FindingFound)) {
		t.Fatalf("acceptableCount %d, acceptable %d", got, want)
	}
}

// A frame of a run costs the same over 10,000 calls as over 100: what
// View allocates does not grow with the run (it once scanned every call
// a dozen times a frame, copying each: milliseconds over 10,000). Bytes,
// not time, so that a busy machine cannot fail it.
func TestBulkFrameDoesNotGrowWithTheRun(t *testing.T) {
	perView := func(n int) uint64 {
		m := syntheticRun(t, n)
		for id := int64(1); id <= int64(n/2); id++ {
			nm, _ := m.Update(answerOf(m, id)) // the next queries it starts are not run
			m = nm.(Model)
		}
		if !m.bulk.running {
			t.Fatal("the run ended")
		}
		_ = m.View()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 20 {
			_ = m.View()
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / 20
	}
	small, big := perView(100), perView(10_000)
	t.Logf("View allocates %d bytes over 100 calls, %d over 10,000", small, big)
	if big > 2*small+16<<10 {
		t.Fatalf("View allocates %d bytes a frame over 10,000 calls, %d over 100: it grows with the run", big, small)
	}
}
