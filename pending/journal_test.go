package pending

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/pgtest"
)

// testClock is a settable clock so created_at order is deterministic.
type testClock struct{ t time.Time }

func (c *testClock) now() time.Time {
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

func openTest(t testing.TB, path string) *Journal {
	t.Helper()
	j, err := Open(context.Background(), testDB(t, path), Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// The conformance suite (issue 22): every test of this package runs
// twice, first with its journals in SQLite files and then, when the
// PostgreSQL server binaries are here (always under .ci/run), again with
// each journal in a PostgreSQL database of its own. A test reaches its
// journal through testDB (or openTest), which gives the run's backend;
// a test of what only SQLite has (its files, their modes and locks, its
// WAL) says so with sqliteOnly and is skipped on the second run.

// testBackend is the backend of the current run: "sqlite", then "postgres".
var testBackend = "sqlite"

func runOnBothBackends(m *testing.M) int {
	code := m.Run()
	if code != 0 {
		return code
	}
	if _, err := pgtest.BinDir(); err != nil && os.Getenv("PGTEST_REQUIRED") != "1" {
		fmt.Printf("pending: the conformance run on PostgreSQL skipped: %v; "+
			"install the server (apt-get install postgresql) or run .ci/run\n", err)
		return code
	}
	testBackend = "postgres"
	fmt.Println("pending: the same tests again, each journal in a PostgreSQL database")
	return m.Run()
}

var pgByPath sync.Map // a test's journal path -> its database on the PostgreSQL run

// testDB is what a test opens as the journal at path ("" for a new one in
// a temp folder): that path on SQLite; on PostgreSQL a database of its own,
// the same one each time the test names the same path.
func testDB(t testing.TB, path string) string {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "journal.db")
	}
	if testBackend != "postgres" {
		return path
	}
	if db, ok := pgByPath.Load(path); ok {
		return db.(string)
	}
	db := pgtest.Database(t)
	pgByPath.Store(path, db)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("(on the PostgreSQL run)")
		}
	})
	return db
}

// sqliteOnly skips a test of what only SQLite has on the PostgreSQL run.
func sqliteOnly(t testing.TB) {
	t.Helper()
	if testBackend == "postgres" {
		t.Skip("a test of the SQLite backend's own files")
	}
}

func intent(tool string, args string) Intent {
	sum := sha256.Sum256([]byte(tool + args))
	return Intent{
		Server: "demo", Tool: tool, Kind: KindWrite, KindSource: KindFromDefault,
		Key: fmt.Sprintf("key-%x", sum[:8]), Args: json.RawMessage(args), Fingerprint: fmt.Sprintf("%x", sum), Session: 1,
	}
}

func TestIntentOutcomeRoundTrip(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, "")
	c, err := j.RecordIntent(ctx, intent("create_order", `{"item":"widget"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.State != StateInFlight || c.ID == 0 {
		t.Fatalf("intent = %+v", c)
	}
	res := json.RawMessage(`{"content":[],"isError":false}`)
	if err := j.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventSucceeded, Result: res, RPCID: "7"}); err != nil {
		t.Fatal(err)
	}
	got, err := j.Get(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != StateSucceeded || len(got.Attempts) != 1 || got.Attempts[0].Outcome != OutcomeSucceeded ||
		got.Attempts[0].RPCID != "7" || string(got.Attempts[0].Result) != string(res) || got.Attempts[0].EndedAt == nil {
		t.Fatalf("after outcome: %+v", got)
	}
	// A second outcome for the same attempt is refused and changes nothing.
	err = j.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventFailed})
	if !errors.Is(err, ErrAttemptEnded) {
		t.Fatalf("second outcome: %v", err)
	}
	counts, err := j.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts[StateSucceeded] != 1 || counts[StateInFlight] != 0 {
		t.Fatalf("counts = %v", counts)
	}
}

func TestHoldAndKeyReuse(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, "")
	in := intent("create_order", `{"item":"widget"}`)
	in.Hold = true
	first, err := j.RecordIntent(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	// Same arguments, new key, while the first is in flight: held.
	again := in
	again.Key = "another-key-000001"
	var held *HeldError
	if _, err := j.RecordIntent(ctx, again); !errors.As(err, &held) || held.CallID != first.ID {
		t.Fatalf("identical intent: %v", err)
	}
	// Without Hold (--new), it goes through.
	again.Hold = false
	if _, err := j.RecordIntent(ctx, again); err != nil {
		t.Fatalf("--new intent: %v", err)
	}
	// The same key again: refused, naming the call that has it.
	var exists *KeyExistsError
	if _, err := j.RecordIntent(ctx, in); !errors.As(err, &exists) || exists.CallID != first.ID {
		t.Fatalf("key reuse: %v", err)
	}
	calls, err := j.List(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 {
		t.Fatalf("want 2 calls, got %d", len(calls))
	}
}

func TestDecisionsFollowTheStateMachine(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, "")
	c, err := j.RecordIntent(ctx, intent("create_order", `{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	// Abandon is not allowed while in flight: typed error, nothing written.
	err = j.Decide(ctx, c.ID, DecisionInput{Action: ActionAbandon, Operator: "op", Note: "x"})
	var te *TransitionError
	if !errors.As(err, &te) || te.From != StateInFlight {
		t.Fatalf("abandon in flight: %v", err)
	}
	if got, _ := j.Get(ctx, c.ID); len(got.Decisions) != 0 || got.State != StateInFlight {
		t.Fatalf("refused decision left traces: %+v", got)
	}
	if err := j.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventLost, Reason: "idle timeout", Clock: "idle"}); err != nil {
		t.Fatal(err)
	}
	if err := j.Decide(ctx, c.ID, DecisionInput{Action: ActionQuery, Operator: "op", Evidence: json.RawMessage(`{"orders":[]}`), Proposal: "not applied"}); err != nil {
		t.Fatal(err)
	}
	call, attempt, err := j.Retry(ctx, c.ID, RetryInput{Operator: "op", Session: 2, Kind: KindRead, KindSource: KindFromAnnotation})
	if err != nil {
		t.Fatal(err)
	}
	if attempt.N != 2 || call.State != StateInFlight || call.Kind != KindWrite {
		t.Fatalf("retry: attempt %d, call %+v (a read re-evaluation must not relax a write)", attempt.N, call)
	}
	if err := j.RecordOutcome(ctx, c.ID, 2, Outcome{Event: EventLost, Reason: "connection lost"}); err != nil {
		t.Fatal(err)
	}
	if err := j.Decide(ctx, c.ID, DecisionInput{Action: ActionAbandon, Operator: "op", Note: "gave up"}); err != nil {
		t.Fatal(err)
	}
	// Terminal: nothing moves it any more.
	for _, in := range []DecisionInput{{Action: ActionMark, Operator: "op"}, {Action: ActionAbandon, Operator: "op"}} {
		if err := j.Decide(ctx, c.ID, in); !errors.Is(err, ErrIllegalTransition) {
			t.Fatalf("%s on abandoned: %v", in.Action, err)
		}
	}
	if _, _, err := j.Retry(ctx, c.ID, RetryInput{Operator: "op"}); !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("retry on abandoned: %v", err)
	}
	// A note is always allowed.
	if err := j.Decide(ctx, c.ID, DecisionInput{Action: ActionNote, Operator: "op", Note: "checked with finance"}); err != nil {
		t.Fatal(err)
	}
	got, err := j.Get(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	var actions []Action
	for _, d := range got.Decisions {
		actions = append(actions, d.Action)
	}
	if fmt.Sprint(actions) != "[query retry abandon note]" || got.Proposal != "not applied" || len(got.Attempts) != 2 {
		t.Fatalf("decisions %v, proposal %q, attempts %d", actions, got.Proposal, len(got.Attempts))
	}
	if got.Decisions[1].Attempt != 2 {
		t.Fatalf("retry decision should name attempt 2: %+v", got.Decisions[1])
	}
}

func TestLateResults(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, "")
	lost := func(args string) int64 {
		c, err := j.RecordIntent(ctx, intent("create_order", args))
		if err != nil {
			t.Fatal(err)
		}
		if err := j.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventLost, Reason: "idle timeout", Clock: "idle"}); err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	res := Outcome{Event: EventSucceeded, Result: json.RawMessage(`{"content":[]}`)}

	settles := lost(`{"n":1}`)
	if err := j.RecordLateResult(ctx, settles, 1, res); err != nil {
		t.Fatal(err)
	}
	if c, _ := j.Get(ctx, settles); c.State != StateSucceeded || c.Conflict || !c.Attempts[0].Late {
		t.Fatalf("late result on unknown: %+v", c)
	}

	conflicts := lost(`{"n":2}`)
	if err := j.Decide(ctx, conflicts, DecisionInput{Action: ActionAbandon, Operator: "op"}); err != nil {
		t.Fatal(err)
	}
	if err := j.RecordLateResult(ctx, conflicts, 1, res); err != nil {
		t.Fatal(err)
	}
	c, _ := j.Get(ctx, conflicts)
	if c.State != StateAbandoned || !c.Conflict || c.ConflictNote != "abandoned, but the server reports it applied" {
		t.Fatalf("late result on abandoned: %+v", c)
	}
	st, err := j.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.LateResults != 2 || st.Conflicts != 1 || st.TimeToResolve.Count != 2 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestFilePermissions(t *testing.T) {
	sqliteOnly(t)
	dir := filepath.Join(t.TempDir(), "state", "mcp-confirm")
	path := filepath.Join(dir, "journal.db")
	openTest(t, path)
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o", p, got, want)
		}
	}
}

func TestRefusesFilesThatAreNotJournals(t *testing.T) {
	sqliteOnly(t)
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	os.WriteFile(text, []byte("hello, not a database\n"), 0o600)

	other := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE t (x); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	db.Close()

	newer := filepath.Join(dir, "newer.db")
	j := openTest(t, newer)
	j.Close()
	db, _ = sql.Open("sqlite", newer)
	if _, err := db.Exec(fmt.Sprintf("PRAGMA user_version = %d", len(migrations)+1)); err != nil {
		t.Fatal(err)
	}
	db.Close()

	// An empty file that has been there a while is someone's, not a journal
	// being made: refused, and left empty.
	empty := filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o600)
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(empty, old, old); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		path string
		want error
	}{{text, ErrNotJournal}, {other, ErrNotJournal}, {newer, ErrNewerSchema}, {dir, ErrNotJournal}, {empty, ErrNotJournal}} {
		before := fileSum(t, tc.path)
		_, err := Open(context.Background(), tc.path, Options{})
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", filepath.Base(tc.path), err, tc.want)
		}
		if after := fileSum(t, tc.path); after != before {
			t.Errorf("%s: file changed by a refused open", filepath.Base(tc.path))
		}
		if _, err := OpenReadOnly(context.Background(), tc.path, Options{}); !errors.Is(err, tc.want) {
			t.Errorf("%s read-only: err %v, want %v", filepath.Base(tc.path), err, tc.want)
		}
	}
	// A new empty file is a journal another process is making: opened.
	fresh := filepath.Join(dir, "fresh.db")
	os.WriteFile(fresh, nil, 0o600)
	j = openTest(t, fresh)
	j.Close()
}

func fileSum(t *testing.T, path string) string {
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.IsDir() {
		return "dir"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

func TestListOrderAndKeysetPaging(t *testing.T) {
	ctx := context.Background()
	clk := &testClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	j, err := Open(ctx, testDB(t, ""), Options{Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for i := range 25 {
		c, err := j.RecordIntent(ctx, intent("create_order", fmt.Sprintf(`{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := j.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventLost, Reason: "idle timeout"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var seen []int64
	var after *Call
	for {
		page, err := j.List(ctx, Filter{States: []State{StateUnknown}, OldestFirst: true, Limit: 5, After: after})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, c := range page {
			seen = append(seen, c.ID)
		}
		after = &page[len(page)-1]
	}
	if len(seen) != 13 {
		t.Fatalf("unknown calls: %v", seen)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Fatalf("not oldest first: %v", seen)
		}
	}
	newest, _ := j.List(ctx, Filter{Limit: 1})
	if newest[0].ID != 25 {
		t.Fatalf("newest first: got %d", newest[0].ID)
	}
}

// isBusy must recognise the driver's real "database is locked", or the WAL
// switch on a new journal fails at once instead of waiting its turn.
func TestIsBusyKnowsSQLiteBusy(t *testing.T) {
	sqliteOnly(t)
	path := filepath.Join(t.TempDir(), "locked.db")
	holder, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	ctx := context.Background()
	conn, err := holder.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, err = other.ExecContext(ctx, "CREATE TABLE t (x)")
	if err == nil || !isBusy(err) {
		t.Fatalf("a write under another connection's exclusive lock: want SQLITE_BUSY, got %v", err)
	}
	if isBusy(errors.New("database is locked")) || isBusy(ErrNotJournal) {
		t.Fatal("isBusy said busy for an error that is not SQLite's")
	}
}

// Close is idempotent and safe from several goroutines at once, also
// while writes are being made: each write commits or returns ErrClosed,
// none panics or waits for ever.
func TestCloseConcurrentWithWrites(t *testing.T) {
	for round := range 20 {
		j, err := Open(context.Background(), testDB(t, ""), Options{})
		if err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 16)
		for i := range 8 {
			go func() {
				_, err := j.RecordIntent(context.Background(), intent("create_order", fmt.Sprintf(`{"r":%d,"i":%d}`, round, i)))
				errs <- err
			}()
		}
		for range 4 {
			go func() { errs <- j.Close() }()
		}
		for range 12 {
			if err := <-errs; err != nil && !errors.Is(err, ErrClosed) {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if _, err := j.RecordIntent(context.Background(), intent("create_order", `{}`)); !errors.Is(err, ErrClosed) {
			t.Fatalf("write after Close: %v, want ErrClosed", err)
		}
	}
}

// ResendAfterRefusal ends the refused attempt and opens the next in one
// commit: the call stays in flight, the event says why; it refuses an
// outcome that is not a bare refusal, and an attempt that is not open.
func TestResendAfterRefusal(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	j := openTest(t, path)
	c, err := j.RecordIntent(ctx, intent("create_order", `{"item":"widget"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []Outcome{
		{Event: EventSucceeded},
		{Event: EventLost, Result: json.RawMessage(`{"content":[]}`)},
		{Event: EventFailed, Error: json.RawMessage(`{"code":-32000,"message":"no"}`)},
	} {
		if _, err := j.ResendAfterRefusal(ctx, c.ID, 1, o, 2, "why"); err == nil {
			t.Errorf("outcome %+v: resend allowed, want it refused", o)
		}
	}
	// The server's 404 is its word, not proof: the attempt ends unknown.
	const said = "the server answered 404 for the session: it says it did not run this"
	at, err := j.ResendAfterRefusal(ctx, c.ID, 1, Outcome{Event: EventLost, Reason: said, Session: 1}, 2, "session 1 expired")
	if err != nil {
		t.Fatal(err)
	}
	if at.N != 2 || at.Session != 2 || at.Outcome != OutcomePending {
		t.Fatalf("next attempt = %+v", at)
	}
	got, err := j.Get(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != StateInFlight || len(got.Attempts) != 2 || got.Attempts[0].Outcome != OutcomeUnknown ||
		got.Attempts[0].Reason != said || got.Attempts[1].Outcome != OutcomePending || len(got.Decisions) != 0 {
		t.Fatalf("after the resend: %+v", got)
	}
	if _, err := j.ResendAfterRefusal(ctx, c.ID, 1, Outcome{Event: EventFailed}, 3, "again"); !errors.Is(err, ErrAttemptEnded) {
		t.Errorf("resend of an ended attempt: %v, want ErrAttemptEnded", err)
	}
	var events int
	if err := j.read.QueryRowContext(ctx, "SELECT count(*) FROM events WHERE kind = ? AND call_id = ? AND detail = ?",
		EventResent, c.ID, "attempt 2: session 1 expired").Scan(&events); err != nil || events != 1 {
		t.Errorf("resent events = %d, %v; want 1", events, err)
	}
	if err := j.RecordOutcome(ctx, c.ID, 2, Outcome{Event: EventSucceeded, Result: json.RawMessage(`{"content":[]}`)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := j.Get(ctx, c.ID); got.State != StateSucceeded {
		t.Errorf("after attempt 2 succeeded: %s", got.State)
	}
}

// firstRunOnly runs a test on the first run only: it tests one backend's
// parts by name (the PostgreSQL schema, its owner locks), or none, and
// would only run the same again.
func firstRunOnly(t testing.TB) {
	t.Helper()
	if testBackend == "postgres" {
		t.Skip("runs once, on the first run")
	}
}

// Filter.Server matches a call by its name in the host config or by the
// name its server declared, and by nothing else.
func TestListFilterByServer(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, "")
	mk := func(server, alias, args string) int64 {
		in := intent("create_order", args)
		in.Server, in.ServerAlias = server, alias
		c, err := j.RecordIntent(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	a := mk("demo", "shop", `{"n":1}`)
	b := mk("demo", "", `{"n":2}`)
	c := mk("everything", "ev", `{"n":3}`)
	for name, want := range map[string][]int64{"shop": {a}, "demo": {a, b}, "ev": {c}, "everything": {c}, "create_order": nil} {
		got, err := j.List(ctx, Filter{Server: name, OldestFirst: true})
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, g := range got {
			ids = append(ids, g.ID)
		}
		if fmt.Sprint(ids) != fmt.Sprint(want) {
			t.Errorf("server %q: calls %v, want %v", name, ids, want)
		}
	}
}

// Servers groups the calls by the identity they record: one row per
// identity, with a non-empty alias and name where any of its calls has
// one, and its count; calls without an identity group apart.
func TestServersGroupsByIdentity(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, "")
	mk := func(server, alias, identity, args string) {
		in := intent("create_order", args)
		in.Server, in.ServerAlias, in.ServerIdentity = server, alias, json.RawMessage(identity)
		if _, err := j.RecordIntent(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	shopA := `{"transport":"stdio","command":["demo","--db","a.db"]}`
	shopB := `{"transport":"stdio","command":["demo","--db","b.db"]}`
	mk("demo", "", shopA, `{"n":1}`)
	mk("demo", "shop", shopA, `{"n":2}`)
	mk("demo", "other", shopB, `{"n":3}`)
	mk("old", "", "", `{"n":4}`)
	got, err := j.Servers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []ServerSeen{
		{Server: "old", Calls: 1},
		{ServerIdentity: json.RawMessage(shopA), Server: "demo", ServerAlias: "shop", Calls: 2},
		{ServerIdentity: json.RawMessage(shopB), Server: "demo", ServerAlias: "other", Calls: 1},
	}
	show := func(ss []ServerSeen) string {
		var b strings.Builder
		for _, s := range ss {
			fmt.Fprintf(&b, "[%s %q %q %d] ", s.ServerIdentity, s.Server, s.ServerAlias, s.Calls)
		}
		return b.String()
	}
	if show(got) != show(want) {
		t.Fatalf("Servers = %s\nwant      %s", show(got), show(want))
	}
}
