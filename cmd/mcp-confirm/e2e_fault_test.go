package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestE2ERandomFaults drives the binary through at least 200 randomized
// runs, each a create_order under one fault (lost response, slow write with
// a short timeout, definite failure, server crash, kill -9 of the client)
// followed by the operator's scripted decisions (query, then retry, mark
// applied or abandon). Each run checks what the journal, the wire and the
// demo database say; at the end every call is accounted for and no key
// ever holds two orders.
//
// MCP_CONFIRM_FAULT_SEED replays a seed (printed at the start and on
// failure); MCP_CONFIRM_FAULT_RUNS raises the run count.
func TestE2ERandomFaults(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("MCP_CONFIRM_FAULT_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("MCP_CONFIRM_FAULT_SEED: %v", err)
		}
		seed = v
	}
	runs := 200
	if s := os.Getenv("MCP_CONFIRM_FAULT_RUNS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 200 {
			t.Fatalf("MCP_CONFIRM_FAULT_RUNS=%q: give a number of at least 200", s)
		}
		runs = v
	}
	const workers = 3
	t.Logf("fault test: seed %d (replay with MCP_CONFIRM_FAULT_SEED=%d), %d runs on %d workers", seed, seed, runs, workers)
	start := time.Now()

	stats := newFaultStats()
	var wg sync.WaitGroup
	tbs := make([]*workerTB, workers)
	for k := 0; k < workers; k++ {
		tbs[k] = &workerTB{TB: t, name: fmt.Sprintf("worker %d (seed %d)", k, seed)}
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			defer tbs[k].recoverFatal()
			fw := newFaultWorker(tbs[k], t.TempDir(), k, seed, stats)
			for i := k; i < runs; i += workers {
				fw.run(i)
				if tbs[k].Failed() {
					return
				}
			}
			fw.finalCheck()
		}(k)
	}
	wg.Wait()
	for _, tb := range tbs {
		tb.report(t)
	}
	t.Logf("fault test: %s", stats)
	t.Logf("fault summary: seed=%d runs=%d workers=%d wall=%s %s", seed, stats.runs(), workers,
		time.Since(start).Round(time.Millisecond), stats.short())
	if n := stats.runs(); n < runs && !t.Failed() {
		t.Errorf("only %d of %d runs completed", n, runs)
	}
}

// workerTB lets a worker goroutine use the test helpers (which call Fatalf)
// off the test's goroutine: a failure is recorded and ends the worker with
// runtime.Goexit, and the test goroutine reports it.
type workerTB struct {
	testing.TB
	name   string
	mu     sync.Mutex
	msgs   []string
	failed bool
}

func (w *workerTB) Helper() {}

func (w *workerTB) Errorf(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failed = true
	w.msgs = append(w.msgs, fmt.Sprintf(format, args...))
}

func (w *workerTB) Error(args ...any) { w.Errorf("%s", fmt.Sprint(args...)) }

func (w *workerTB) Fatalf(format string, args ...any) {
	w.Errorf(format, args...)
	runtime.Goexit()
}

func (w *workerTB) Fatal(args ...any) { w.Fatalf("%s", fmt.Sprint(args...)) }

func (w *workerTB) FailNow() {
	w.Errorf("FailNow")
	runtime.Goexit()
}

func (w *workerTB) Fail() { w.Errorf("Fail") }

func (w *workerTB) Failed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

func (w *workerTB) recoverFatal() {
	if r := recover(); r != nil {
		w.Errorf("panic: %v", r)
	}
}

func (w *workerTB) report(t *testing.T) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.msgs {
		t.Errorf("%s: %s", w.name, m)
	}
}

// faultStats counts what happened, for the log and the summary line.
type faultStats struct {
	mu     sync.Mutex
	counts map[string]int
}

func newFaultStats() *faultStats { return &faultStats{counts: map[string]int{}} }

func (s *faultStats) add(name string) {
	s.mu.Lock()
	s.counts[name]++
	s.mu.Unlock()
}

func (s *faultStats) get(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[name]
}

func (s *faultStats) runs() int { return s.get("runs") }

func (s *faultStats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.counts))
	for n := range s.counts {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s=%d", n, s.counts[n])
	}
	return strings.Join(parts, " ")
}

func (s *faultStats) short() string {
	var parts []string
	for _, group := range []string{"fault.", "decision.", "final."} {
		var g []string
		s.mu.Lock()
		for n, c := range s.counts {
			if strings.HasPrefix(n, group) {
				g = append(g, fmt.Sprintf("%s=%d", strings.TrimPrefix(n, group), c))
			}
		}
		s.mu.Unlock()
		sort.Strings(g)
		parts = append(parts, strings.TrimSuffix(group, ".")+"s{"+strings.Join(g, " ")+"}")
	}
	return strings.Join(parts, " ") + fmt.Sprintf(" orders=%d duplicate_keys=%d", s.get("orders"), s.get("duplicate_keys"))
}

// faultWorker runs its share of the runs on its own journal and demo DB.
type faultWorker struct {
	t      testing.TB
	w      *world
	db     *sql.DB
	rng    *rand.Rand
	k      int
	seed   uint64
	stats  *faultStats
	calls  map[int64]*fcall
	budget map[string]int // what the test set each budget to
	what   string         // the current run's fault, for failure messages
	kills  int            // kill -9 runs: each leaves one call for recovery
}

// fcall is the test's model of one journal call.
type fcall struct {
	id    int64
	key   string
	args  string
	state string
}

var faultPrices = map[string]int{"widget": 25, "gadget": 40, "gizmo": 100}

func newFaultWorker(t testing.TB, dir string, k int, seed uint64, stats *faultStats) *faultWorker {
	w := newWorld(t, dir)
	if os.Getenv("MCP_CONFIRM_FAULT_RACE") != "1" {
		w.bin = e2eFastBin
	}
	fw := &faultWorker{t: t, w: w, db: w.db(), rng: rand.New(rand.NewPCG(seed, uint64(k))), k: k, seed: seed,
		stats: stats, calls: map[int64]*fcall{}, budget: map[string]int{}}
	// Budgets large enough that no run fails for want of money: every
	// failure in this test is an injected one.
	if _, err := fw.db.Exec("UPDATE budgets SET budget_left = 10000000"); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"alice", "bob", "carol"} {
		fw.budget[b] = 10000000
	}
	return fw
}

func (fw *faultWorker) pick(weights map[string]int) string {
	names := make([]string, 0, len(weights))
	total := 0
	for n, wt := range weights {
		names = append(names, n)
		total += wt
	}
	sort.Strings(names) // map order is random; the seed must replay
	x := fw.rng.IntN(total)
	for _, n := range names {
		if x < weights[n] {
			return n
		}
		x -= weights[n]
	}
	panic("unreachable")
}

func (fw *faultWorker) oneOf(xs ...string) string { return xs[fw.rng.IntN(len(xs))] }

// held returns the call that holds args back (unknown, same arguments), or 0.
func (fw *faultWorker) held(args string) int64 {
	var id int64
	for _, c := range fw.calls {
		if c.args == args && (c.state == "unknown" || c.state == "in_flight") && (id == 0 || c.id < id) {
			id = c.id
		}
	}
	return id
}

func (fw *faultWorker) fail(i int, format string, args ...any) {
	fw.t.Fatalf("run %d (%s): %s", i, fw.what, fmt.Sprintf(format, args...))
}

// run is one fault run and the operator's decisions after it.
func (fw *faultWorker) run(i int) {
	t, w := fw.t, fw.w
	// Every command reaps its server before it exits; a server left over
	// from the previous run would be a leak (kill -9 runs wait for theirs).
	if pids := demoPIDs(t, w.demoDB); len(pids) > 0 {
		fw.fail(i, "demo server(s) %v still running before the run", pids)
	}
	args := fmt.Sprintf(`{"item":%q,"quantity":%d,"buyer":%q}`,
		fw.oneOf("widget", "gadget", "gizmo"), 1+fw.rng.IntN(3), fw.oneOf("alice", "bob", "carol"))
	fault := fw.pick(map[string]int{"ok": 10, "lost": 25, "slow": 15, "fail": 15, "crash": 15, "kill_client": 20})
	var extra []string
	if fw.rng.IntN(5) == 0 {
		extra = append(extra, "--key", fmt.Sprintf("fault-%d-w%d-run%d", fw.seed, fw.k, i))
	}
	holder := fw.held(args)
	if holder != 0 {
		if fw.rng.IntN(4) == 0 {
			extra = append(extra, "--new")
			fw.stats.add("new_past_hold")
		} else {
			fw.heldRun(i, args, extra, holder)
			return
		}
	}
	fw.stats.add("runs")
	fw.stats.add("fault." + fault)
	fw.what = fault

	before := w.sent("create_order")
	var c *fcall
	var printed callOut
	switch fault {
	case "ok":
		r := w.call(args, extra)
		printed = fw.expectCall(i, r, exitOK)
	case "lost":
		r := w.call(args, append(extra, "--timeout", fw.oneOf("300ms", "500ms", "1s")), "--hang-after-commit", "1")
		printed = fw.expectTimedOut(i, r)
	case "slow":
		// The idle clock (100-150ms) fires before the first progress
		// notification (250ms) and long before the write would commit.
		r := w.call(args, append(extra, "--timeout", fw.oneOf("100ms", "150ms")), "--delay", fw.oneOf("600ms", "1s"))
		if r.code == exitOK {
			// Only if the machine is so loaded that the idle timer fired
			// late, after progress had reset it, every time: then the
			// write succeeds, which is right too.
			printed = fw.expectCall(i, r, exitOK)
			fw.stats.add("slow.kept_alive_by_progress")
			break
		}
		printed = fw.expectTimedOut(i, r)
	case "fail":
		r := w.call(args, extra, "--fail-rate", "1")
		printed = fw.expectCall(i, r, exitFailed)
		if n := ordersFor(t, fw.db, printed.Key); n != 0 {
			fw.fail(i, "a definite failure left %d orders", n)
		}
	case "crash", "kill_client":
		printed = fw.interrupted(i, fault, args, extra, before)
	}
	c = &fcall{id: printed.ID, key: printed.Key, args: args}
	if prev, ok := fw.calls[c.id]; ok {
		fw.fail(i, "call id %d reused (was %+v)", c.id, prev)
	}
	fw.calls[c.id] = c
	got := fw.check(i, c)
	if len(got.Attempts) != 1 {
		fw.fail(i, "a new call has %d attempts", len(got.Attempts))
	}
	if after := w.sent("create_order"); after[c.key] != 1 {
		fw.fail(i, "call %d: key sent %d times, want once", c.id, after[c.key])
	}
	fw.stats.add("after_fault." + c.state)
	if c.state == "unknown" || c.state == "failed" {
		fw.operate(i, c, got)
	}
	if d := duplicateKeys(t, fw.db); len(d) > 0 {
		fw.fail(i, "duplicate orders: %v", d)
	}
}

// expectCall checks a finished call's exit code against the printed state
// and the fault's expectation, and returns the printed call.
func (fw *faultWorker) expectCall(i int, r cliResult, code int) callOut {
	if r.code != code {
		fw.fail(i, "want exit %d, got %s", code, r)
	}
	out := parseCallOut(fw.t, r)
	if out.ID == 0 || out.Key == "" || exitOfState(out.State) != r.code {
		fw.fail(i, "call output %+v does not match exit %d", out, r.code)
	}
	return out
}

// expectTimedOut checks a call whose idle clock fired: unknown (exit 3),
// or, when the cancel that follows the timeout stopped the server before it
// committed and its answer saying so ("stopped before committing", a
// result with isError) came in before the client had given up on the
// request, failed (exit 1) with nothing ordered. A failure answer is a
// definite outcome (SPEC §3: "a result with isError true").
func (fw *faultWorker) expectTimedOut(i int, r cliResult) callOut {
	if r.code == exitFailed {
		out := fw.expectCall(i, r, exitFailed)
		if !strings.Contains(string(out.Result), "before committing") {
			fw.fail(i, "a timed-out call failed, but not with the server's \"stopped before committing\": %s", r)
		}
		if n := ordersFor(fw.t, fw.db, out.Key); n != 0 {
			fw.fail(i, "the server said it stopped before committing, yet there are %d orders", n)
		}
		fw.stats.add(fw.what + ".cancel_answered_failed")
		return out
	}
	return fw.expectCall(i, r, exitUnknown)
}

func exitOfState(s string) int {
	switch s {
	case "succeeded", "applied":
		return exitOK
	case "failed":
		return exitFailed
	case "unknown", "in_flight":
		return exitUnknown
	}
	return -1
}

// interrupted runs a call and kills the server (crash) or the client
// itself (kill_client) while the server executes it, after or before the
// write committed.
func (fw *faultWorker) interrupted(i int, fault, args string, extra []string, before map[string]int) callOut {
	t, w := fw.t, fw.w
	afterCommit := fw.rng.IntN(2) == 0
	flags, record := []string{"--delay", "30s"}, "processing"
	if afterCommit {
		flags, record = []string{"--hang-after-commit", "1"}, "completed"
		fw.stats.add(fault + ".after_commit")
	} else {
		fw.stats.add(fault + ".before_commit")
	}
	bg := w.startCall(t, args, append(extra, "--timeout", "60s"), flags...)
	known := map[string]bool{}
	for k := range before {
		known[k] = true
	}
	key := w.waitSentKey(t, known, time.Minute)
	waitRecord(t, fw.db, key, record, time.Minute)
	if fault == "crash" {
		pids := demoPIDs(t, w.demoDB)
		if len(pids) != 1 {
			fw.fail(i, "want one demo server to crash, found %v", pids)
		}
		killPIDs(t, pids)
		if err := bg.wait(); bg.cmd.ProcessState == nil {
			fw.fail(i, "wait for the client: %v", err)
		}
		r := bg.result()
		out := fw.expectCall(i, r, exitUnknown)
		if out.Reason != "connection lost" || out.Key != key {
			fw.fail(i, "server crash: want unknown (connection lost) for key %s, got %+v", key, out)
		}
		return out
	}
	if err := bg.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		fw.fail(i, "kill -9 the client: %v", err)
	}
	fw.kills++
	_ = bg.wait()
	if ws, ok := bg.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		fw.fail(i, "the client should have died of SIGKILL: %v", bg.cmd.ProcessState)
	}
	waitNoDemo(t, w.demoDB, 10*time.Second)
	// The next command (list) recovers the dead client's call.
	for _, c := range w.list() {
		if c.Key != key {
			continue
		}
		if c.State != "unknown" || c.Reason != "recovered after unclean shutdown" || c.AttemptCount != 1 {
			fw.fail(i, "after kill -9: want unknown, recovered after unclean shutdown, 1 attempt; got %+v", c)
		}
		return callOut{ID: c.ID, State: c.State, Reason: c.Reason, Key: c.Key}
	}
	fw.fail(i, "no journal call for key %s after kill -9", key)
	return callOut{}
}

// heldRun: the same arguments as an unknown call, without --new: refused
// with exit 4, nothing written, nothing sent. The operator then decides the
// call that holds it.
func (fw *faultWorker) heldRun(i int, args string, extra []string, holder int64) {
	w := fw.w
	fw.stats.add("runs")
	fw.stats.add("fault.held")
	fw.what = "held"
	calls, sent := len(fw.calls), w.sentTotal("create_order")
	r := w.call(args, extra, "--hang-after-commit", "1")
	if r.code != exitHeld || !strings.Contains(r.stderr, strconv.FormatInt(holder, 10)) {
		fw.fail(i, "identical to unknown call %d: want exit 4 naming it, got %s", holder, r)
	}
	if n := len(w.list()); n != calls {
		fw.fail(i, "a held call added a journal row (%d → %d)", calls, n)
	}
	if n := w.sentTotal("create_order"); n != sent {
		fw.fail(i, "a held call was sent (%d → %d create_order requests)", sent, n)
	}
	h := fw.calls[holder]
	fw.operate(i, h, fw.check(i, h))
	if d := duplicateKeys(fw.t, fw.db); len(d) > 0 {
		fw.fail(i, "duplicate orders: %v", d)
	}
}

// operate is the operator: query, then retry, mark applied or abandon
// (or, now and then, leave it for later). before is the call as just read.
func (fw *faultWorker) operate(i int, c *fcall, before jCall) {
	t, w := fw.t, fw.w
	id := strconv.FormatInt(c.id, 10)
	committed := ordersFor(t, fw.db, c.key)

	// The server runs without the call's fault now: another command line,
	// named with --any-server (recorded with the decision).
	r := w.run(append([]string{"query", id, "--any-server", "--tool", "find_orders", "--args", `{"idempotency_key":"{key}"}`}, w.server()...)...)
	if r.code != exitOK {
		fw.fail(i, "query %s: %s", id, r)
	}
	fw.stats.add("decision.query")
	decision := fw.pick(map[string]int{"retry": 45, "mark": 22, "abandon": 23, "leave": 10})
	fw.stats.add("decision." + decision)
	note := fmt.Sprintf("fault run %d", i)
	// The decisions the journal must end up with: the earlier ones, the
	// query, and the decision unless the state machine refuses it.
	wantActions := append(actionsOf(before), "query")
	var got jCall
	switch decision {
	case "leave":
		got = fw.check(i, c)
		if got.State != before.State {
			fw.fail(i, "query changed call %s from %s to %s", id, before.State, got.State)
		}
	case "mark", "abandon":
		a := []string{"abandon", id, "--note", note}
		want := "abandoned"
		if decision == "mark" {
			a, want = []string{"mark", id, "applied", "--note", note}, "applied"
		}
		r := w.run(a...)
		got = fw.check(i, c)
		switch before.State {
		case "unknown":
			wantActions = append(wantActions, decision)
			last := got.Decisions[len(got.Decisions)-1]
			if r.code != exitOK || got.State != want || last.Note != note || last.Operator == "" || last.At.IsZero() {
				fw.fail(i, "%s of unknown call %s: %s; now %s, last decision %+v", decision, id, r, got.State, last)
			}
		case "failed":
			// SPEC §3: a failed call leads only to a retry.
			if r.code != exitBadInput || got.State != "failed" {
				fw.fail(i, "%s of failed call %s: want exit 2 and no change, got %s; now %s", decision, id, r, got.State)
			}
			fw.stats.add("refused." + decision)
		}
	case "retry":
		got = fw.retry(i, c, before, committed)
		wantActions = append(wantActions, "retry")
	}
	if have := actionsOf(got); strings.Join(have, ",") != strings.Join(wantActions, ",") {
		fw.fail(i, "call %s decisions %v, want %v", id, have, wantActions)
	}
	// The query's evidence: what find_orders saw before any retry.
	q := got.Decisions[len(before.Decisions)]
	var ev struct {
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(q.Evidence, &ev) != nil {
		fw.fail(i, "the query decision has no evidence: %+v", q)
	}
	if orders, _ := structuredOf(t, ev.Result)["orders"].([]any); len(orders) != committed {
		fw.fail(i, "the query found %d orders for %s, the demo DB has %d", len(orders), c.key, committed)
	}
}

func actionsOf(c jCall) []string {
	out := make([]string, len(c.Decisions))
	for i, d := range c.Decisions {
		out[i] = d.Action
	}
	return out
}

// retry is the operator's retry, now and then into another lost response.
func (fw *faultWorker) retry(i int, c *fcall, before jCall, committed int) jCall {
	t, w := fw.t, fw.w
	id := strconv.FormatInt(c.id, 10)
	var flags, extra []string
	if fw.rng.IntN(4) == 0 {
		flags, extra = []string{"--hang-after-commit", "1"}, []string{"--timeout", "500ms"}
		fw.stats.add("retry_into_lost")
	}
	r := w.run(append(append([]string{"retry", id, "--any-server"}, extra...), w.server(flags...)...)...)
	out := parseCallOut(t, r)
	if exitOfState(out.State) != r.code || out.Key != c.key {
		fw.fail(i, "retry %s: output %+v does not match exit %d or key %s", id, out, r.code, c.key)
	}
	switch {
	case committed == 1:
		// The first execution committed: the server replays it.
		if r.code != exitOK || !out.Replayed {
			fw.fail(i, "retry of committed call %s: want a replayed success, got %s", id, r)
		}
		fw.stats.add("retry.replayed")
	case r.code == exitOK:
		if out.Replayed {
			fw.fail(i, "retry of uncommitted call %s was a replay: %s", id, r)
		}
		fw.stats.add("retry.executed")
	case r.code == exitUnknown:
		if out.Reason != "server reports in progress" && !(len(flags) > 0 && out.Reason == "idle timeout") {
			fw.fail(i, "retry %s: unknown for an unexpected reason: %s", id, r)
		}
		fw.stats.add("retry.unknown." + strings.ReplaceAll(out.Reason, " ", "_"))
	case r.code == exitFailed && len(flags) > 0 && strings.Contains(string(out.Result), "before committing"):
		// The 500ms clock fired before the commit; the cancel stopped it.
		fw.stats.add("retry.cancel_answered_failed")
	default:
		fw.fail(i, "retry %s: unexpected %s", id, r)
	}
	got := fw.check(i, c)
	if len(got.Attempts) != len(before.Attempts)+1 {
		fw.fail(i, "retry %s: %d → %d attempts", id, len(before.Attempts), len(got.Attempts))
	}
	if n := ordersFor(t, fw.db, c.key); n > 1 || (r.code == exitOK && n != 1) {
		fw.fail(i, "after retry %s (exit %d): %d orders for its key", id, r.code, n)
	}
	return got
}

// check reads a call back and checks what must hold of every call after
// every command: no in_flight, attempts numbered 1..n and all ended, a
// settled state that agrees with the last attempt, and exactly one request
// on the wire per attempt that was sent: nothing is ever resent.
func (fw *faultWorker) check(i int, c *fcall) jCall {
	return fw.checkCall(i, c, fw.w.show(c.id))
}

// checkCall is check on a call already read (by show or export).
func (fw *faultWorker) checkCall(i int, c *fcall, got jCall) jCall {
	c.state = got.State
	if got.Key != c.key {
		fw.fail(i, "call %d: key %s, want %s", c.id, got.Key, c.key)
	}
	notSent := 0
	for n, a := range got.Attempts {
		if a.N != n+1 {
			fw.fail(i, "call %d: attempt numbers %v have a gap", c.id, attemptNumbers(got.Attempts))
		}
		if a.Outcome == "pending" || a.EndedAt == nil {
			fw.fail(i, "call %d: attempt %d never ended: %+v", c.id, a.N, a)
		}
		if strings.HasPrefix(a.Reason, "not sent") {
			notSent++
		}
	}
	last := got.Attempts[len(got.Attempts)-1]
	switch got.State {
	case "succeeded", "failed":
		if last.Outcome != got.State {
			fw.fail(i, "call %d is %s but its last attempt is %s", c.id, got.State, last.Outcome)
		}
	case "unknown", "applied", "abandoned":
	default:
		fw.fail(i, "call %d in state %q", c.id, got.State)
	}
	if sent := fw.w.sent("create_order")[c.key]; sent != len(got.Attempts)-notSent {
		fw.fail(i, "call %d: %d attempts (%d not sent), but its key went out %d times", c.id, len(got.Attempts), notSent, sent)
	}
	return got
}

func attemptNumbers(as []jAttempt) []int {
	ns := make([]int, len(as))
	for i, a := range as {
		ns[i] = a.N
	}
	return ns
}

// finalCheck accounts for every call and every order of the worker.
func (fw *faultWorker) finalCheck() {
	t, w := fw.t, fw.w
	fw.what = "final check"
	// list first: it recovers anything a dead process left in flight.
	if n := len(w.list()); n != len(fw.calls) {
		t.Fatalf("the journal has %d calls, the test made %d", n, len(fw.calls))
	}
	// export is the reconciliation view: every call with its attempts and
	// decisions, one JSON object a line.
	r := w.run("export", "--format", "jsonl")
	wantExit(t, r, exitOK, "export")
	var exported []jCall
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	for dec.More() {
		var c jCall
		if err := dec.Decode(&c); err != nil {
			t.Fatalf("export: %v", err)
		}
		exported = append(exported, c)
	}
	if len(exported) != len(fw.calls) {
		t.Fatalf("export has %d calls, the test made %d", len(exported), len(fw.calls))
	}
	fw.checkStats(exported)
	byKey := map[string]*fcall{}
	for _, l := range exported {
		c, ok := fw.calls[l.ID]
		if !ok {
			t.Fatalf("journal call %d was never made by the test", l.ID)
		}
		fw.checkCall(-1, c, l)
		byKey[c.key] = c
		fw.stats.add("final." + c.state)
		n := ordersFor(t, fw.db, c.key)
		switch {
		case c.state == "succeeded" && n != 1:
			t.Errorf("succeeded call %d has %d orders", c.id, n)
		case c.state == "failed" && n != 0:
			t.Errorf("failed call %d has %d orders: the server said nothing was committed", c.id, n)
		case n > 1:
			t.Errorf("call %d has %d orders", c.id, n)
		}
	}
	// Every request on the wire and every order belongs to a journal call.
	for k := range w.sent("create_order") {
		if byKey[k] == nil {
			t.Errorf("key %q went out on the wire but is no journal call's", k)
		}
	}
	rows, err := fw.db.Query("SELECT COALESCE(idempotency_key, ''), buyer, item, quantity FROM orders")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	spent := map[string]int{}
	orders := 0
	for rows.Next() {
		var key, buyer, item string
		var q int
		if err := rows.Scan(&key, &buyer, &item, &q); err != nil {
			t.Fatal(err)
		}
		orders++
		if byKey[key] == nil {
			t.Errorf("order under key %q is no journal call's", key)
		}
		spent[buyer] += q * faultPrices[item]
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	fw.stats.mu.Lock()
	fw.stats.counts["orders"] += orders
	fw.stats.mu.Unlock()
	// One budget deduction per order, never more.
	for buyer, initial := range fw.budget {
		if left := budgetOf(t, fw.db, buyer); left != initial-spent[buyer] {
			t.Errorf("%s's budget is %d; %d minus the orders' cost %d is %d", buyer, left, initial, spent[buyer], initial-spent[buyer])
		}
	}
	if d := duplicateKeys(t, fw.db); len(d) > 0 {
		fw.stats.mu.Lock()
		fw.stats.counts["duplicate_keys"] += len(d)
		fw.stats.mu.Unlock()
		t.Errorf("duplicate orders: %v", d)
	}
}

// checkStats holds `stats --json` to what export says: calls by state,
// attempts, retries, and one recovery per kill -9.
func (fw *faultWorker) checkStats(exported []jCall) {
	t := fw.t
	r := fw.w.run("stats", "--json")
	wantExit(t, r, exitOK, "stats --json")
	var st struct {
		Calls      int            `json:"calls"`
		ByState    map[string]int `json:"by_state"`
		Attempts   int            `json:"attempts"`
		Retries    int            `json:"retries"`
		Recoveries int            `json:"recoveries"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("stats --json: %v\n%s", err, r)
	}
	byState, attempts, retries := map[string]int{}, 0, 0
	for _, c := range exported {
		byState[c.State]++
		attempts += len(c.Attempts)
		for _, d := range c.Decisions {
			if d.Action == "retry" {
				retries++
			}
		}
	}
	if st.Calls != len(exported) || st.Attempts != attempts || st.Retries != retries || st.Recoveries != fw.kills {
		t.Errorf("stats: calls %d attempts %d retries %d recoveries %d; export: %d, %d, %d, and %d kill -9 runs",
			st.Calls, st.Attempts, st.Retries, st.Recoveries, len(exported), attempts, retries, fw.kills)
	}
	for s, n := range byState {
		if st.ByState[s] != n {
			t.Errorf("stats: %d %s calls, export has %d", st.ByState[s], s, n)
		}
	}
}
