package main

// Crash tests of the journal on PostgreSQL, through the built binary: a
// process killed with a write in flight, two proxies writing one journal
// at once, and the database restarted under a proxy's writes. On
// PostgreSQL liveness is a session-level advisory lock per process
// (pending/pgowners.go), not a lock file, so these are the SQLite crash
// tests (e2e_crash_test.go) asked again of that mechanism.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/internal/pgtest"
	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/proxy"
)

// TestE2EPostgresKillMidWrite: a `call` whose write hangs after the server
// committed it. While the process is stopped (SIGSTOP) its PostgreSQL
// session, and so its liveness lock, is still there: other processes,
// reading or writing, must leave its call in flight, since it may yet
// record the answer. Once it is killed (SIGKILL) the server ends its
// session and the lock with it: the next command recovers the call as
// unknown, and nothing is sent again.
func TestE2EPostgresKillMidWrite(t *testing.T) {
	w := newWorld(t, t.TempDir())
	w.journal = pgtest.Database(t)
	db := w.db()
	bg := w.startCall(t, `{"item":"widget","quantity":1,"buyer":"bob"}`, []string{"--timeout", "60s"}, "--hang-after-commit", "1")
	key := w.waitSentKey(t, nil, time.Minute)
	waitRecord(t, db, key, "completed", time.Minute)

	if err := bg.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	calls := w.list() // a read: it recovers (by a brief writing open) only if an owner looks dead
	if len(calls) != 1 || calls[0].State != "in_flight" || calls[0].Key != key {
		t.Fatalf("the stopped process is alive (its session holds its lock), so its call must stay in flight; list says %+v", calls)
	}
	// A writing command recovers on open, in a write that tries every
	// in-flight owner's lock; it must not take the stopped one's. Its own
	// write must not wait for the stopped process either.
	other := w.call(`{"item":"gadget","quantity":1,"buyer":"alice"}`, nil)
	wantExit(t, other, exitOK, "a second call while the first one's process is stopped")
	otherKey := parseCallOut(t, other).Key
	if c := w.show(calls[0].ID); c.State != "in_flight" || len(c.Attempts) != 1 || c.Attempts[0].EndedAt != nil {
		t.Fatalf("a writing open recovered the call of a live (stopped) process: %+v", c)
	}

	if err := bg.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := bg.wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("the call should have died of SIGKILL, got %v", err)
	}
	// PostgreSQL ends the dead client's session when it reads the closed
	// socket, at once for an idle session; the lock goes with it. The
	// bound is for a loaded machine, not a claim about speed.
	var c jCall
	deadline := time.Now().Add(10 * time.Second)
	for {
		c = w.show(calls[0].ID)
		if c.State != "in_flight" || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if c.State != "unknown" || c.Reason != pending.ReasonRecovered || c.Key != key {
		t.Fatalf("after kill -9: want the call unknown (%s) with key %s; got %s (%s) key %s", pending.ReasonRecovered, key, c.State, c.Reason, c.Key)
	}
	if len(c.Attempts) != 1 || c.Attempts[0].Outcome != "unknown" || c.Attempts[0].EndedAt == nil {
		t.Fatalf("the one attempt should have been ended unknown by recovery: %+v", c.Attempts)
	}
	waitNoDemo(t, w.demoDB, 10*time.Second)
	if got := w.sent("create_order"); got[key] != 1 || got[otherKey] != 1 || len(got) != 2 {
		t.Fatalf("each call must be on the wire once and nothing resent; wire log has %v (killed %s, other %s)", got, key, otherKey)
	}
	if n := ordersFor(t, db, key); n != 1 {
		t.Fatalf("the killed call's order committed before the kill: want 1 order, got %d", n)
	}
	if again := w.show(c.ID); again.State != "unknown" || len(again.Attempts) != 1 || !again.UpdatedAt.Equal(c.UpdatedAt) {
		t.Fatalf("recovery is done once; a second look changed the call: %+v", again)
	}
	if all := w.list(); len(all) != 2 {
		t.Fatalf("want 2 calls in the journal, got %+v", all)
	}
	wantExit(t, w.run("verify"), exitOK, "verify")
}

// TestE2EPostgresTwoProcessesManyCalls: two proxies, each in front of a
// demo server of its own, write one PostgreSQL journal at once, each
// driven by a host sending 1,000 distinct create_order calls, several at
// a time. Every call is journaled once, succeeds, has a key of its own,
// and its server executed it once; nothing is lost between the two
// processes' concurrent intents (which take turns on one (server, tool)
// lock, the demo servers having one name).
func TestE2EPostgresTwoProcessesManyCalls(t *testing.T) {
	const perProxy = 1000
	const inFlightPerHost = 4 // a host's concurrent calls
	journal := pgtest.Database(t)
	type side struct {
		w     *world
		buyer string
		host  *proxyHost
		keys  []string // the key each call's answer names, by quantity-1
		errs  []string
	}
	sides := []*side{{buyer: "alice"}, {buyer: "bob"}}
	for _, s := range sides {
		s.w = newWorld(t, t.TempDir())
		s.w.journal = journal
		db := s.w.db()
		// The calls differ by quantity (1..1000) and, between the two
		// sides, by buyer; the demo's budgets would stop them at a few dozen.
		if _, err := db.Exec("UPDATE budgets SET budget_left = 1000000000 WHERE buyer = ?", s.buyer); err != nil {
			t.Fatal(err)
		}
		s.keys = make([]string, perProxy)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, s := range sides {
		s.host = s.w.startProxyHost(t, nil)
		var next atomic.Int64
		var mu sync.Mutex
		for range inFlightPerHost {
			wg.Go(func() {
				for {
					q := int(next.Add(1))
					if q > perProxy {
						return
					}
					res, err := s.host.write(map[string]any{"item": "widget", "quantity": q, "buyer": s.buyer})
					mu.Lock()
					switch {
					case err != nil:
						s.errs = append(s.errs, fmt.Sprintf("quantity %d: the host's session failed: %v", q, err))
					case res.IsError:
						s.errs = append(s.errs, fmt.Sprintf("quantity %d: %s", q, resultText(res)))
					default:
						k, _ := structuredMap(res)["idempotency_key"].(string)
						s.keys[q-1] = k
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	t.Logf("%d calls through 2 proxies on one PostgreSQL journal: %s", 2*perProxy, time.Since(start).Round(time.Millisecond))
	for i, s := range sides {
		if len(s.errs) > 0 {
			t.Fatalf("proxy %d: %d of %d calls did not succeed, first: %s", i+1, len(s.errs), perProxy, s.errs[0])
		}
		s.host.close(t)
	}

	calls := sides[0].w.list()
	if len(calls) != 2*perProxy {
		t.Fatalf("want %d calls in the journal, got %d", 2*perProxy, len(calls))
	}
	byKey := map[string]jCall{}
	for _, c := range calls {
		if c.State != "succeeded" || c.AttemptCount != 1 {
			t.Fatalf("every call should have succeeded on its one attempt: %+v", c)
		}
		if _, dup := byKey[c.Key]; dup {
			t.Fatalf("key %s names two calls", c.Key)
		}
		byKey[c.Key] = c
	}
	for i, s := range sides {
		sent := s.w.sent("create_order")
		if len(sent) != perProxy {
			t.Fatalf("proxy %d: want %d keys on its server's wire, got %d", i+1, perProxy, len(sent))
		}
		db := s.w.db()
		if total := totalOrders(t, db); total != perProxy {
			t.Fatalf("proxy %d: its server made %d orders, want %d", i+1, total, perProxy)
		}
		if d := duplicateKeys(t, db); len(d) > 0 {
			t.Fatalf("proxy %d: its server ordered one key twice: %v", i+1, d)
		}
		for q, k := range s.keys {
			c, ok := byKey[k]
			if !ok {
				t.Fatalf("proxy %d: the answer to quantity %d names key %q, which no journal call has", i+1, q+1, k)
			}
			var args struct {
				Quantity int    `json:"quantity"`
				Buyer    string `json:"buyer"`
			}
			if err := json.Unmarshal(c.Args, &args); err != nil || args.Quantity != q+1 || args.Buyer != s.buyer {
				t.Fatalf("proxy %d: call %d (key %s) has args %s, want quantity %d for %s", i+1, c.ID, k, c.Args, q+1, s.buyer)
			}
			if sent[k] != 1 {
				t.Fatalf("proxy %d: key %s sent %d times, want once", i+1, k, sent[k])
			}
			if n := ordersFor(t, db, k); n != 1 {
				t.Fatalf("proxy %d: key %s made %d orders, want 1", i+1, k, n)
			}
		}
	}
	wantExit(t, sides[0].w.run("verify"), exitOK, "verify")
}

// TestE2EPostgresRestartMidWrites: PostgreSQL is restarted (pg_ctl
// restart, fast: every session is cut) while a host keeps writes going
// through a proxy. The proxy must keep serving, and after the restart:
// every order the server made has a journal call with its key (no intent
// lost), no key reached the server twice, each answer the host got is
// true of the journal (a success is succeeded, an unknown is unknown, a
// refusal was not executed), and a refusal says it was the journal, in
// words, not as a panic or a stack. Each case has a cluster of its own, so
// the restart cuts no other test's connections.
//
// The server's answers to the writes in flight at the restart come either
// while the database is still down (the proxy cannot record them), or
// after it is back and after another process, finding the proxy's
// liveness lock gone with its session, has recovered those calls as
// unknown (the proxy must record its answers as late ones, and take its
// lock again before it sends anything more).
func TestE2EPostgresRestartMidWrites(t *testing.T) {
	for _, tc := range []struct {
		name           string
		delay          string // how long each write takes at the server
		before, after  int64  // successes to see before the restart and after it
		recoverBetween bool   // another process recovers the journal just after the restart
	}{
		{"answers during the outage", "200ms", 20, 20, false},
		{"answers after another process recovered", "3s", 8, 8, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			restartMidWrites(t, tc.delay, tc.before, tc.after, tc.recoverBetween)
		})
	}
}

func restartMidWrites(t *testing.T, delay string, beforeN, afterN int64, recoverBetween bool) {
	cluster := pgtest.StartPrivate(t)
	w := newWorld(t, t.TempDir())
	w.journal = cluster.Database(t)
	db := w.db()
	if _, err := db.Exec("UPDATE budgets SET budget_left = 1000000000 WHERE buyer = 'alice'"); err != nil {
		t.Fatal(err)
	}
	// Each write takes a while at the server, so that at the restart some
	// are between their intent and their outcome.
	host := w.startProxyHost(t, []string{"--delay", delay})

	const senders = 4
	var (
		mu        sync.Mutex
		answers   = map[int]hostAnswer{} // by quantity, which tells the calls apart
		successes atomic.Int64
		next      atomic.Int64
		stop      = make(chan struct{})
		wg        sync.WaitGroup
	)
	for range senders {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				q := int(next.Add(1))
				res, err := host.write(map[string]any{"item": "widget", "quantity": q, "buyer": "alice"})
				a := classify(res, err)
				mu.Lock()
				answers[q] = a
				mu.Unlock()
				if a.class == answerSucceeded {
					successes.Add(1)
				} else {
					time.Sleep(20 * time.Millisecond) // not a tight loop of refusals while the database is down
				}
			}
		})
	}
	waitSuccesses := func(n int64, what string) {
		deadline := time.Now().Add(90 * time.Second)
		for successes.Load() < n {
			if time.Now().After(deadline) {
				close(stop)
				wg.Wait()
				t.Fatalf("%s: %d writes succeeded, want %d within 90s; answers: %s", what, successes.Load(), n, summarize(answers))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitSuccesses(beforeN, "before the restart")
	inFlight := countInFlight(t, w.journal)
	began := time.Now()
	cluster.Restart(t)
	t.Logf("pg_ctl restart took %s, with %d calls in flight in the journal as it began", time.Since(began).Round(time.Millisecond), inFlight)
	var recovered []int64
	if recoverBetween {
		// The proxy's session died with the restart, and its lock with it;
		// it takes the lock again only at its next intent, after one of
		// its writes in flight is answered. A command now finds it dead.
		for _, c := range w.list() {
			if c.State == "unknown" && c.Reason == pending.ReasonRecovered {
				recovered = append(recovered, c.ID)
			}
		}
		t.Logf("a command just after the restart recovered %d calls as unknown", len(recovered))
	}
	// The proxy is not restarted: it must serve writes again by itself.
	before := successes.Load()
	waitSuccesses(before+afterN, "after the restart")
	close(stop)
	wg.Wait()

	// While the proxy lives it holds its liveness lock again (taken anew
	// on its first durable write after the restart), so a call whose
	// outcome it could not record stays in flight until it exits.
	liveInFlight := 0
	for _, c := range w.list() {
		if c.State == "in_flight" {
			liveInFlight++
		}
	}
	host.close(t)
	t.Logf("answers: %s; calls in flight in the journal while the proxy still ran: %d", summarize(answers), liveInFlight)

	calls := w.list()
	byQuantity := map[int][]jCall{}
	journalKeys := map[string]jCall{}
	for _, c := range calls {
		var args struct {
			Quantity int `json:"quantity"`
		}
		if err := json.Unmarshal(c.Args, &args); err != nil {
			t.Fatalf("call %d args %s: %v", c.ID, c.Args, err)
		}
		byQuantity[args.Quantity] = append(byQuantity[args.Quantity], c)
		if _, dup := journalKeys[c.Key]; dup {
			t.Fatalf("key %s names two calls", c.Key)
		}
		journalKeys[c.Key] = c
		if c.State == "in_flight" {
			t.Errorf("call %d is still in flight after its proxy exited and a command recovered the journal: %+v", c.ID, c)
		}
	}

	// No intent lost: whatever the server executed, the journal has.
	rows, err := db.Query("SELECT idempotency_key, quantity FROM orders")
	if err != nil {
		t.Fatal(err)
	}
	orderedQuantity := map[int]int{}
	for rows.Next() {
		var k string
		var q int
		if err := rows.Scan(&k, &q); err != nil {
			t.Fatal(err)
		}
		if _, ok := journalKeys[k]; !ok {
			t.Errorf("the server made an order with key %s (quantity %d), which no journal call has: an intent was lost", k, q)
		}
		orderedQuantity[q]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if d := duplicateKeys(t, db); len(d) > 0 {
		t.Fatalf("the server ordered one key twice: %v", d)
	}
	// Nothing sent twice, nothing sent unjournaled.
	sent := w.sent("create_order")
	for k, n := range sent {
		if n != 1 {
			t.Errorf("key %s reached the server %d times", k, n)
		}
		if _, ok := journalKeys[k]; !ok {
			t.Errorf("key %s reached the server, and no journal call has it", k)
		}
	}

	// Each answer is true of the journal and of the server.
	var refusals, unknowns []string
	for q, a := range answers {
		cs := byQuantity[q]
		if len(cs) > 1 {
			t.Errorf("quantity %d: %d journal calls, want at most 1: %+v", q, len(cs), cs)
			continue
		}
		switch a.class {
		case answerSucceeded:
			if len(cs) != 1 || cs[0].State != "succeeded" || cs[0].Key != a.key || orderedQuantity[q] != 1 || sent[a.key] != 1 {
				t.Errorf("quantity %d: the host was told it succeeded (key %s); journal %+v, orders %d, sent %d", q, a.key, cs, orderedQuantity[q], sent[a.key])
			}
		case answerUnknown:
			unknowns = append(unknowns, strings.ReplaceAll(a.text, a.key, "KEY"))
			if !strings.Contains(a.text, "UNKNOWN") || !strings.Contains(a.text, "Do NOT retry") {
				t.Errorf("quantity %d: an unknown answer that does not say so, or that it must not be retried: %s", q, a.text)
			}
			if len(cs) != 1 || cs[0].State != "unknown" || cs[0].Key != a.key || cs[0].ID != a.callID {
				t.Errorf("quantity %d: the host was told unknown (call %d, key %s); journal %+v", q, a.callID, a.key, cs)
			}
		case answerNotSent:
			refusals = append(refusals, a.text)
			if !strings.Contains(a.text, "journal") || !strings.Contains(a.text, "did not take effect") {
				t.Errorf("quantity %d: a refusal that does not say the journal stopped it, and that nothing happened: %s", q, a.text)
			}
			if orderedQuantity[q] != 0 {
				t.Errorf("quantity %d: the host was told it did not take effect, yet the server made %d orders", q, orderedQuantity[q])
			}
			if len(cs) == 1 {
				// The intent's COMMIT went unanswered; the proxy settled the
				// call as not sent once the journal was back.
				if cs[0].State != "failed" || cs[0].Reason != pending.ReasonIntentUnconfirmed || sent[cs[0].Key] != 0 {
					t.Errorf("quantity %d: refused to the host, but the journal has %+v, sent %d", q, cs[0], sent[cs[0].Key])
				}
			}
		default:
			t.Errorf("quantity %d: an answer the host cannot act on: %s", q, a.text)
		}
		if looksLikeACrash(a.text) {
			t.Errorf("quantity %d: the host was shown a crash, not a message: %s", q, a.text)
		}
	}
	for _, c := range calls {
		var args struct {
			Quantity int `json:"quantity"`
		}
		_ = json.Unmarshal(c.Args, &args)
		if _, ok := answers[args.Quantity]; !ok {
			t.Errorf("call %d (quantity %d) in the journal, but the host never asked for it", c.ID, args.Quantity)
		}
	}
	// A call recovered while its answer was on the way is settled by that
	// answer, recorded as late: the server's word, never dropped.
	for _, id := range recovered {
		c := w.show(id)
		if c.State != "succeeded" || len(c.Attempts) != 1 || !c.Attempts[0].Late {
			t.Errorf("call %d was recovered as unknown while its answer was on the way; want it settled succeeded by a late answer, got %s (%s) %+v", id, c.State, c.Reason, c.Attempts)
		}
	}
	t.Logf("refusals the host saw during the outage (%d), distinct texts:\n%s", len(refusals), distinct(refusals))
	t.Logf("unknown answers the host saw (%d), distinct texts (keys elided):\n%s", len(unknowns), distinct(unknowns))
	executedUnknown := 0
	for q, a := range answers {
		if a.class == answerUnknown && orderedQuantity[q] == 1 {
			executedUnknown++
		}
	}
	t.Logf("of the unknown answers, %d were executed by the server", executedUnknown)
	if log, err := os.ReadFile(host.log); err == nil {
		if t.Failed() {
			t.Logf("proxy log:\n%s", log)
		} else {
			for _, line := range strings.Split(string(log), "\n") {
				if strings.Contains(line, "outcome not journaled") {
					t.Logf("proxy log: %s", line)
				}
			}
		}
	}
	wantExit(t, w.run("verify"), exitOK, "verify")
}

// proxyHost is an MCP host (mcp-go's stdio client) in front of `mcp-confirm
// proxy` on the world's journal and demo server.
type proxyHost struct {
	*client.Client
	cmd *exec.Cmd
	log string // the proxy's --log (and its server's stderr)
}

// startProxyHost starts the proxy as a host does, with its log in a file
// (a thousand calls' log lines are more than a pipe holds), and
// initializes the session.
func (w *world) startProxyHost(t *testing.T, serverFlags []string) *proxyHost {
	t.Helper()
	h := &proxyHost{log: filepath.Join(w.dir, "proxy.log")}
	args := w.withDB(append([]string{"proxy", "--log", h.log, "--timeout", "60s"}, w.server(serverFlags...)...))
	start := func(ctx context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
		h.cmd = e2eCmd(ctx, command, w.dir, args...)
		stderr, err := os.Create(filepath.Join(w.dir, "proxy.stderr"))
		if err != nil {
			return nil, err
		}
		h.cmd.Stderr = stderr
		return h.cmd, nil
	}
	c, err := client.NewStdioMCPClientWithOptions(w.bin, nil, args, transport.WithCommandFunc(start))
	if err != nil {
		t.Fatal(err)
	}
	h.Client = c
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "claude-code", Version: "2.0.0"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize the proxy: %v", err)
	}
	return h
}

// write is one create_order from the host. It may run on any goroutine:
// it returns what happened rather than failing the test.
func (h *proxyHost) write(args map[string]any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "create_order"
	req.Params.Arguments = args
	return h.CallTool(ctx, req)
}

// close ends the host's session, as a host that quits does (its stdin
// closes), and waits for the proxy to exit, which must be cleanly: the
// process is gone, and its PostgreSQL session with it.
func (h *proxyHost) close(t *testing.T) {
	t.Helper()
	if err := h.Close(); err != nil {
		stderr, _ := os.ReadFile(h.cmd.Stderr.(*os.File).Name())
		t.Fatalf("the proxy did not exit cleanly when its host closed: %v\nstderr: %s", err, stderr)
	}
	if code := h.cmd.ProcessState.ExitCode(); code != exitOK {
		t.Fatalf("the proxy exited %d", code)
	}
}

type answerClass int

const (
	answerSucceeded answerClass = iota
	answerUnknown               // the proxy's unknown answer: do not retry
	answerNotSent               // the proxy's refusal: it did not take effect
	answerOther                 // none of these: a session error, a server failure, ...
)

// hostAnswer is what one host call came to, as the host can tell.
type hostAnswer struct {
	class  answerClass
	key    string
	callID int64
	text   string
}

func classify(res *mcp.CallToolResult, err error) hostAnswer {
	if err != nil {
		return hostAnswer{class: answerOther, text: "session error: " + err.Error()}
	}
	sc := structuredMap(res)
	text := resultText(res)
	switch {
	case !res.IsError:
		k, _ := sc["idempotency_key"].(string)
		return hostAnswer{class: answerSucceeded, key: k, text: text}
	case sc[proxy.StatusField] == "unknown":
		k, _ := sc["key"].(string)
		id, _ := sc["call_id"].(float64)
		return hostAnswer{class: answerUnknown, key: k, callID: int64(id), text: text}
	case strings.Contains(text, "could not be sent, so it did not take effect"):
		return hostAnswer{class: answerNotSent, text: text}
	}
	return hostAnswer{class: answerOther, text: text}
}

// structuredMap is a result's structuredContent as JSON objects decode.
func structuredMap(res *mcp.CallToolResult) map[string]any {
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return nil
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, " ")
}

// looksLikeACrash: a Go panic or stack trace, which a host must never be
// shown as an answer.
func looksLikeACrash(s string) bool {
	for _, sign := range []string{"panic", "goroutine ", ".go:", "runtime error", "nil pointer"} {
		if strings.Contains(s, sign) {
			return true
		}
	}
	return false
}

// summarize counts answers by class.
func summarize(answers map[int]hostAnswer) string {
	var n [4]int
	for _, a := range answers {
		n[a.class]++
	}
	return fmt.Sprintf("%d succeeded, %d unknown, %d refused (not sent), %d other", n[answerSucceeded], n[answerUnknown], n[answerNotSent], n[answerOther])
}

// distinct lists texts once each, with how many times each came.
func distinct(texts []string) string {
	count := map[string]int{}
	for _, s := range texts {
		count[s]++
	}
	keys := make([]string, 0, len(count))
	for s := range count {
		keys = append(keys, s)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, s := range keys {
		fmt.Fprintf(&b, "  %d× %s\n", count[s], s)
	}
	return b.String()
}

// countInFlight reads the journal's in-flight calls straight from
// PostgreSQL: a look that takes no lock and recovers nothing.
func countInFlight(t *testing.T, conn string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM calls WHERE state = 'in_flight'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
