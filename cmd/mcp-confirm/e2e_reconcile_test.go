package main

// Reconciliation in bulk (issue 21), end to end: the built binary's
// `reconcile` over a journal of a few hundred unknown calls made on real
// demo servers, which really hold (or lack) each call's order.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/demo"
	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// seededCall is one unknown call seedUnknown wrote.
type seededCall struct {
	id    int64
	key   string
	tool  string
	found bool // its order is on the server it was made on
}

// seedSpec says what seedUnknown makes: n create_order calls on the
// built-in demo server over demoDB, made unknown; found(i) says which of
// them really took effect there.
type seedSpec struct {
	journal string
	bin     string
	demoDB  string
	n       int
	found   func(i int) bool
	prefix  string // of the keys, so that two seeds never share one
}

// seedUnknown writes the calls through the pending package, as the guard
// would have (intent, then a lost attempt), and makes the orders of the
// found ones on their server through the server itself, under the call's
// key: what a write whose answer was lost leaves behind. It returns the
// calls in id order.
func seedUnknown(t testing.TB, s seedSpec) []seededCall {
	t.Helper()
	ctx := context.Background()
	if _, err := demo.CountOrders(ctx, s.demoDB, ""); err != nil { // creates the file
		t.Fatal(err)
	}
	calls := make([]seededCall, s.n)
	for i := range calls {
		calls[i] = seededCall{key: fmt.Sprintf("%s-%05d", s.prefix, i), tool: "create_order", found: s.found(i)}
	}
	makeOrders(t, s.bin, s.demoDB, calls)
	identity := guard.ServerIdentity{Builtin: guard.BuiltinDemo, DemoDB: s.demoDB}.JSON()
	recordUnknown(t, s.journal, demo.Name, identity, calls)
	return calls
}

// makeOrders orders, on the demo server over demoDB, every found call's
// order under its key (alice's budget raised to pay for them all).
func makeOrders(t testing.TB, bin, demoDB string, calls []seededCall) {
	t.Helper()
	ctx := context.Background()
	w := &world{t: t, demoDB: demoDB}
	if _, err := w.db().Exec("UPDATE budgets SET budget_left = 100000000 WHERE buyer = 'alice'"); err != nil {
		t.Fatal(err)
	}
	c := mcpclient.New(mcpclient.ServerSpec{Command: bin, Args: []string{"demo-server", "--db", demoDB}}, mcpclient.Options{})
	defer c.Close()
	work := make(chan seededCall)
	var wg sync.WaitGroup
	errs := make(chan error, len(calls))
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sc := range work {
				d := c.Call(ctx, "create_order", map[string]any{"item": "widget", "quantity": 1, "buyer": "alice"},
					mcpclient.CallOptions{Key: sc.key, KeyArg: "idempotency_key", MaxTotal: 30 * time.Second})
				if d.Kind != mcpclient.DeliveryResult || strings.Contains(string(d.ResultJSON), `"isError":true`) {
					errs <- fmt.Errorf("order for %s: %v %v %s", sc.key, d.Kind, d.Err, d.ResultJSON)
				}
			}
		}()
	}
	for _, sc := range calls {
		if sc.found {
			work <- sc
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// recordUnknown journals calls as made on the server of identity and lost
// (idle timeout), setting each one's id.
func recordUnknown(t testing.TB, journal, server string, identity json.RawMessage, calls []seededCall) {
	t.Helper()
	recordUnknownWith(t, journal, pending.Options{}, server, identity, calls)
}

// recordUnknownWith is recordUnknown with the journal opened with opts (a
// clock in the past).
func recordUnknownWith(t testing.TB, journal string, opts pending.Options, server string, identity json.RawMessage, calls []seededCall) {
	t.Helper()
	ctx := context.Background()
	j, err := pending.Open(ctx, journal, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var wg sync.WaitGroup
	errs := make(chan error, len(calls))
	next := make(chan int)
	// Concurrent intents share one fsync: 16 at a time make a thousand calls
	// in a second or two.
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				args := map[string]any{"item": "widget", "quantity": 1, "buyer": "alice", "idempotency_key": calls[i].key}
				raw, _ := json.Marshal(args)
				c, err := j.RecordIntent(ctx, pending.Intent{
					Server: server, ServerIdentity: identity, Tool: calls[i].tool,
					Kind: pending.KindWrite, KindSource: pending.KindFromDefault, Key: calls[i].key, Args: raw,
					Fingerprint: guard.Fingerprint(args, "idempotency_key"), Session: 1,
				})
				if err == nil {
					err = j.RecordOutcome(ctx, c.ID, 1, pending.Outcome{Event: pending.EventLost, Reason: "idle timeout", Clock: "idle"})
				}
				if err != nil {
					errs <- err
					continue
				}
				calls[i].id = c.ID
			}
		}()
	}
	for i := range calls {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

const reconcilePolicy = `[tools.create_order]
query_tool = "find_orders"
query_args = { idempotency_key = "{key}" }
`

// reconcileOut is reconcile --json.
type reconcileOut struct {
	Calls []struct {
		ID       int64  `json:"id"`
		Tool     string `json:"tool"`
		Key      string `json:"key"`
		State    string `json:"state"`
		Proposal string `json:"proposal"`
		Evidence string `json:"evidence"`
		Applied  bool   `json:"applied"`
		Error    string `json:"error"`
	} `json:"calls"`
	Summary struct {
		Calls     int            `json:"calls"`
		Proposals map[string]int `json:"proposals"`
		Applied   int            `json:"applied"`
		Unknown   int            `json:"left_unknown"`
		Servers   int            `json:"servers"`
	} `json:"summary"`
}

func parseReconcile(t testing.TB, r cliResult) reconcileOut {
	t.Helper()
	var out reconcileOut
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("reconcile --json: %v\n%s", err, r)
	}
	return out
}

// TestReconcileBulk: 200 unknown calls on two demo servers (each holding
// the orders of its own found calls, and the orders of the other's "not
// found" keys, so that a query sent to the wrong server would find them),
// plus calls with no query configured and calls whose server cannot start.
// reconcile proposes the right thing for each, on one session per server,
// sends no write, and --apply-found marks exactly the found ones applied.
func TestReconcileBulk(t *testing.T) {
	dir := t.TempDir()
	w := newWorld(t, dir)
	dbA, dbB := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
	foundA := func(i int) bool { return i%3 != 0 }
	foundB := func(i int) bool { return i%2 == 0 }
	a := seedUnknown(t, seedSpec{journal: w.journal, bin: w.bin, demoDB: dbA, n: 100, found: foundA, prefix: "keyA"})
	b := seedUnknown(t, seedSpec{journal: w.journal, bin: w.bin, demoDB: dbB, n: 100, found: foundB, prefix: "keyB"})
	// The decoys: each server also holds the orders of the other's calls
	// that it lacks itself.
	decoys := func(cs []seededCall) []seededCall {
		var out []seededCall
		for _, c := range cs {
			if !c.found {
				c.found = true
				out = append(out, c)
			}
		}
		return out
	}
	makeOrders(t, w.bin, dbB, decoys(a))
	makeOrders(t, w.bin, dbA, decoys(b))
	// No query for this tool in the policy; and a server that cannot start.
	noQuery := []seededCall{{key: "nq-000000001", tool: "cancel_order"}, {key: "nq-000000002", tool: "cancel_order"}}
	recordUnknown(t, w.journal, demo.Name, guard.ServerIdentity{Builtin: guard.BuiltinDemo, DemoDB: dbA}.JSON(), noQuery)
	gone := []seededCall{{key: "gone-0000001", tool: "create_order"}, {key: "gone-0000002", tool: "create_order"}}
	recordUnknown(t, w.journal, "orders", guard.ServerIdentity{Command: filepath.Join(dir, "no-such-server")}.JSON(), gone)

	policy := filepath.Join(dir, "policy.toml")
	if err := os.WriteFile(policy, []byte(reconcilePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	ordersBefore := totalOrders(t, (&world{t: t, demoDB: dbA}).db()) + totalOrders(t, (&world{t: t, demoDB: dbB}).db())

	want := map[int64]string{}
	for _, c := range append(a, b...) {
		want[c.id] = map[bool]string{true: "found", false: "not found"}[c.found]
	}
	for _, c := range noQuery {
		want[c.id] = "no query configured"
	}
	for _, c := range gone {
		want[c.id] = "query failed"
	}

	r := w.run("reconcile", "--policy", policy, "--json")
	wantExit(t, r, 3, "reconcile with calls left unknown")
	if strings.Contains(r.stderr, "queried") {
		t.Errorf("a progress line on a stderr that is not a terminal:\n%s", r.stderr)
	}
	out := parseReconcile(t, r)
	if len(out.Calls) != len(want) {
		t.Fatalf("reconcile reported %d calls, want %d", len(out.Calls), len(want))
	}
	for _, c := range out.Calls {
		if c.Proposal != want[c.ID] {
			t.Errorf("call %d (%s): proposal %q, want %q (evidence %q, error %q)", c.ID, c.Key, c.Proposal, want[c.ID], c.Evidence, c.Error)
		}
		if c.State != "unknown" || c.Applied {
			t.Errorf("call %d: state %s, applied %v; without --apply-found nothing is decided", c.ID, c.State, c.Applied)
		}
		if c.Proposal == "found" && !strings.Contains(c.Evidence, "orders: 1") {
			t.Errorf("call %d: evidence %q should say the order was found", c.ID, c.Evidence)
		}
	}
	nFound := 0
	for _, p := range want {
		if p == "found" {
			nFound++
		}
	}
	if s := out.Summary; s.Proposals["found"] != nFound || s.Unknown != len(want) || s.Servers != 3 {
		t.Errorf("summary %+v: want %d found, %d left unknown, 3 servers", s, nFound, len(want))
	}
	// One session per server that could start, shared by its 100 queries.
	st := w.run("stats", "--json")
	wantExit(t, st, 0, "stats")
	var stats struct {
		SessionsStarted int `json:"sessions_started"`
	}
	json.Unmarshal([]byte(st.stdout), &stats)
	if stats.SessionsStarted != 2 {
		t.Errorf("sessions started: %d, want 2 (one per server)", stats.SessionsStarted)
	}
	// Every answered query is evidence on its call; nothing was ordered.
	if c := w.show(a[1].id); len(c.Decisions) != 1 || c.Decisions[0].Action != "query" || c.Proposal == "" {
		t.Errorf("call %d after reconcile: decisions %+v, proposal %q; want one query with its proposal", a[1].id, c.Decisions, c.Proposal)
	}
	after := totalOrders(t, (&world{t: t, demoDB: dbA}).db()) + totalOrders(t, (&world{t: t, demoDB: dbB}).db())
	if after != ordersBefore {
		t.Fatalf("orders %d before reconcile, %d after: reconcile sent a write", ordersBefore, after)
	}

	// --apply-found marks the found ones applied, with the evidence; the
	// rest stay unknown, so the exit is still 3.
	r = w.run("reconcile", "--policy", policy, "--apply-found", "--concurrency", "4")
	wantExit(t, r, 3, "reconcile --apply-found")
	if !strings.Contains(r.stdout, fmt.Sprintf("found %d,", nFound)) || !strings.Contains(r.stdout, fmt.Sprintf("marked applied %d,", nFound)) {
		t.Errorf("summary line should count %d found and marked:\n%s", nFound, r.stdout)
	}
	for _, c := range w.list() {
		wantState := "unknown"
		if want[c.ID] == "found" {
			wantState = "applied"
		}
		if c.State != wantState {
			t.Errorf("call %d (%s): %s after --apply-found, want %s", c.ID, want[c.ID], c.State, wantState)
		}
	}
	c := w.show(a[1].id)
	last := c.Decisions[len(c.Decisions)-1]
	if last.Action != "mark" || !strings.Contains(string(last.Evidence), a[1].key) || !strings.Contains(last.Note, "orders: 1") {
		t.Errorf("the mark should carry the query's evidence and say so: %+v", last)
	}
	if after := totalOrders(t, (&world{t: t, demoDB: dbA}).db()) + totalOrders(t, (&world{t: t, demoDB: dbB}).db()); after != ordersBefore {
		t.Fatalf("orders %d before, %d after --apply-found: a write was sent", ordersBefore, after)
	}

	// Filters: one tool, one server; nothing left unknown among them is 0.
	r = w.run("reconcile", "--policy", policy, "--state", "applied", "--tool", "create_order", "--json")
	wantExit(t, r, 0, "reconcile of applied calls")
	if n := len(parseReconcile(t, r).Calls); n != nFound {
		t.Errorf("--state applied selected %d calls, want %d", n, nFound)
	}
	r = w.run("reconcile", "--policy", policy, "--server", "orders", "--json")
	wantExit(t, r, 3, "reconcile --server orders")
	if got := parseReconcile(t, r); len(got.Calls) != len(gone) || got.Calls[0].Proposal != "query failed" || got.Calls[0].Error == "" {
		t.Errorf("--server orders: %+v, want the %d calls of the server that cannot start, failed with the reason", got.Calls, len(gone))
	}
	r = w.run("reconcile", "--policy", policy, "--since", "1h", "--tool", "no_such_tool")
	wantExit(t, r, 0, "reconcile with nothing selected")
}

func TestReconcileBadInput(t *testing.T) {
	w := newWorld(t, t.TempDir())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"reconcile", "--concurrency", "0"}, "--concurrency must be"},
		{[]string{"reconcile", "--state", "lost"}, `no state "lost"`},
		{[]string{"reconcile", "--since", "yesterday"}, `--since "yesterday"`},
		{[]string{"reconcile", "17"}, `unexpected argument "17"`},
		{[]string{"reconcile", "--", "node", "server.js"}, "no server after --"},
		{[]string{"reconcile", "--timeout", "5s"}, "--timeout does not apply"},
	} {
		r := w.run(tc.args...)
		wantExit(t, r, 2, strings.Join(tc.args, " "))
		stderrLines(t, r, strings.Join(tc.args, " "))
		if !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: stderr should say %q:\n%s", tc.args, tc.want, r.stderr)
		}
	}
}

// TestReconcileProgressOnATerminal: with stderr on a terminal (script(1)
// gives it one), reconcile counts its queries on stderr as it goes; its
// stdout stays the report alone.
func TestReconcileProgressOnATerminal(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("no script(1) to give the command a terminal")
	}
	dir := t.TempDir()
	w := newWorld(t, dir)
	seedUnknown(t, seedSpec{journal: w.journal, bin: w.bin, demoDB: w.demoDB, n: 20, found: func(i int) bool { return i < 5 }, prefix: "tty"})
	policy := filepath.Join(dir, "policy.toml")
	if err := os.WriteFile(policy, []byte(reconcilePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "report.json")
	line := fmt.Sprintf("%s reconcile --db %s --policy %s --json > %s", shellQuote(w.bin), shellQuote(w.journal), shellQuote(policy), shellQuote(out))
	r := cliIn(t, script, dir, "", "-qec", line, "/dev/null")
	if !strings.Contains(r.stdout, "reconcile: 20/20 queried; found 5, not found 15") {
		t.Errorf("no progress line on the terminal:\n%s", r)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep reconcileOut
	if err := json.Unmarshal(b, &rep); err != nil || rep.Summary.Calls != 20 {
		t.Errorf("stdout should be the report alone: %v\n%s", err, b)
	}
}
