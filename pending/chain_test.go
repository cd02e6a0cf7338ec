package pending

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestDecisionHashEncoding pins the encoding chain.go documents: the bytes
// of its example, and their hash. A change here is a change of format:
// every journal and export already written would stop verifying.
func TestDecisionHashEncoding(t *testing.T) {
	firstRunOnly(t)
	r := chainRow{ID: 1, CallID: 1, Action: "note", Operator: "op", At: "2026-01-01T00:00:01.000000000Z", Note: "looked", PrevHash: GenesisHash}
	const want = "4b3889c5baa5e5154afdc73b8e50e258edfecbdbedd691118d14a58ecc525c82"
	got, err := r.hash()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("hash of the documented example = %s, want %s", got, want)
	}
	// Version 2: the same, made on a host.
	v2 := r
	v2.Host = "host-b"
	if got, _ := v2.hash(); got != "866cbd11e0756cc75a7c0cb02f9440e11abf1998d58a3b8a54d1539f7e5d3ecc" {
		t.Errorf("hash of the documented example with a host = %s", got)
	}
	// The same with evidence written another way, and an attempt: only the
	// JSON value counts, not its spelling.
	a := chainRow{ID: 2, CallID: 1, Action: "retry", Operator: "op", Host: "h", At: r.At, Note: "x", Evidence: []byte(`{"b":1, "a":"<x>"}`), Attempt: 2, PrevHash: got}
	b := a
	b.Evidence = []byte(`{"a":"\u003cx>","b":1.0}`)
	ha, _ := a.hash()
	hb, _ := b.hash()
	if ha != hb {
		t.Errorf("evidence spelt two ways hashes two ways: %s %s", ha, hb)
	}
	for _, change := range []func(*chainRow){
		func(r *chainRow) { r.ID++ }, func(r *chainRow) { r.CallID++ }, func(r *chainRow) { r.Action = "mark" },
		func(r *chainRow) { r.Operator = "eve" }, func(r *chainRow) { r.At = "2026-01-01T00:00:02.000000000Z" },
		func(r *chainRow) { r.Note = "" }, func(r *chainRow) { r.Evidence = nil }, func(r *chainRow) { r.Attempt = 0 },
		func(r *chainRow) { r.PrevHash = GenesisHash }, func(r *chainRow) { r.Host = "" }, func(r *chainRow) { r.Host = "H" },
	} {
		c := a
		change(&c)
		if hc, _ := c.hash(); hc == ha {
			t.Errorf("a changed field left the hash as it was: %+v", c)
		}
	}
}

// chainJournal makes a journal with calls and decisions of every kind
// that takes no server: notes, queries with evidence, a retry, an abandon,
// a mark. It returns the path, closed.
func chainJournal(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	clock := &testClock{t: time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)}
	j, err := Open(ctx, testDB(t, path), Options{Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for i := range 3 {
		c, err := j.RecordIntent(ctx, intent("create_order", fmt.Sprintf(`{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := j.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventLost, Reason: "idle timeout", Clock: "idle"}); err != nil {
			t.Fatal(err)
		}
	}
	steps := []func() error{
		func() error {
			return j.Decide(ctx, 1, DecisionInput{Action: ActionNote, Operator: "alice", Note: "asked bob"})
		},
		func() error {
			return j.Decide(ctx, 2, DecisionInput{Action: ActionQuery, Operator: "alice", Proposal: "applied",
				Evidence: json.RawMessage(`{"orders": [{"order_id": 7, "item": "<b>&"}]}`)})
		},
		func() error {
			_, _, err := j.Retry(ctx, 1, RetryInput{Operator: "bob", Note: "resend", Session: 2})
			return err
		},
		func() error {
			return j.Decide(ctx, 2, DecisionInput{Action: ActionMark, Operator: "bob", Note: "order 7 \xff\xfe in the shop"})
		},
		func() error {
			return j.Decide(ctx, 3, DecisionInput{Action: ActionAbandon, Operator: "carol", Note: "cancelled"})
		},
		func() error {
			return j.Decide(ctx, 3, DecisionInput{Action: ActionNote, Operator: "carol", Note: "told finance"})
		},
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	return path
}

func verifyPath(t *testing.T, path string) ChainReport {
	t.Helper()
	j, err := OpenReadOnly(context.Background(), testDB(t, path), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	rep, err := j.VerifyChain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// tamper runs statements on the file as someone with sqlite3 would,
// bypassing mcp-confirm (and, once dropped, its triggers).
func tamper(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

const dropTriggers = "DROP TRIGGER decisions_append_only; DROP TRIGGER decisions_never_deleted"

func TestChainOfACleanLog(t *testing.T) {
	path := chainJournal(t)
	rep := verifyPath(t, path)
	if !rep.Intact() || rep.Decisions != 6 || rep.HeadID != 6 {
		t.Fatalf("clean log: %+v %+v", rep, rep.Broken)
	}
	j := openTest(t, path)
	ctx := context.Background()
	prev := GenesisHash
	for id := int64(1); id <= 3; id++ {
		c, err := j.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range c.Decisions {
			if len(d.Hash) != 64 || d.PrevHash == "" {
				t.Fatalf("decision %d: hashes %q %q", d.ID, d.PrevHash, d.Hash)
			}
		}
	}
	// In id order, each names the one before it.
	rows, err := j.read.Query("SELECT prev_hash, hash FROM decisions ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var p, h string
		rows.Scan(&p, &h)
		if p != prev {
			t.Fatalf("prev_hash %s, want %s", p, prev)
		}
		prev = h
	}
	if prev != rep.Head {
		t.Fatalf("head %s, the last hash %s", rep.Head, prev)
	}
	// The triggers still forbid both ways of rewriting.
	for _, stmt := range []string{"UPDATE decisions SET note = 'x' WHERE id = 1", "DELETE FROM decisions WHERE id = 1"} {
		err := j.write(ctx, durable, func(ctx context.Context, c *sql.Conn) error { _, err := c.ExecContext(ctx, stmt); return err })
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
}

func TestChainOfAnEmptyLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	openTest(t, path).Close()
	rep := verifyPath(t, path)
	if !rep.Intact() || rep.Decisions != 0 || rep.Head != GenesisHash {
		t.Fatalf("empty log: %+v %+v", rep, rep.Broken)
	}
}

// TestChainShowsHandEdits: each way of rewriting the log with the triggers
// dropped is seen, at the first decision it touches.
func TestChainShowsHandEdits(t *testing.T) {
	sqliteOnly(t)
	cases := []struct {
		name  string
		stmts []string
		at    int64
		want  string
	}{
		{"a decision deleted", []string{"DELETE FROM decisions WHERE id = 3"}, 4, "does not follow decision 2"},
		{"the first deleted", []string{"DELETE FROM decisions WHERE id = 1"}, 2, "is the first"},
		{"the newest deleted", []string{"DELETE FROM decisions WHERE id = 6"}, 6, "newest decisions were deleted"},
		{"a note edited", []string{"UPDATE decisions SET note = 'nothing to see' WHERE id = 4"}, 4, "was changed after it was written"},
		{"an operator edited", []string{"UPDATE decisions SET operator = 'alice' WHERE id = 5"}, 5, "was changed"},
		{"a host edited", []string{"UPDATE decisions SET host = 'host-z' WHERE id = 3"}, 3, "was changed"},
		{"a host removed", []string{"UPDATE decisions SET host = '' WHERE id = 3"}, 3, "was changed"},
		{"evidence edited", []string{`UPDATE decisions SET evidence = '{"orders":[]}' WHERE id = 2`}, 2, "was changed"},
		{"edited and its hash recomputed", []string{"UPDATE decisions SET hash = '" + strings.Repeat("ab", 32) + "' WHERE id = 2"}, 2, "was changed"},
		{"a decision moved to another call", []string{"UPDATE decisions SET call_id = 1 WHERE id = 6"}, 6, "was changed"},
		{"two swapped", []string{"UPDATE decisions SET id = 100 WHERE id = 5", "UPDATE decisions SET id = 5 WHERE id = 6", "UPDATE decisions SET id = 6 WHERE id = 100"}, 5, "was changed"},
		{"the head record removed", []string{"DELETE FROM meta WHERE name = 'decision_chain_head'"}, 0, "head"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := chainJournal(t)
			tamper(t, path, append([]string{dropTriggers}, tc.stmts...)...)
			rep := verifyPath(t, path)
			if rep.Intact() || rep.Broken.Decision != tc.at || !strings.Contains(rep.Broken.Reason, tc.want) {
				t.Fatalf("broken = %+v, want at %d with %q", rep.Broken, tc.at, tc.want)
			}
		})
	}
}

// TestChainRecomputedRowBreaksNextLink: a rewrite that recomputes the hash
// of the row it edits still breaks the link to the next one.
func TestChainRecomputedRowBreaksNextLink(t *testing.T) {
	sqliteOnly(t)
	path := chainJournal(t)
	j, err := OpenReadOnly(context.Background(), testDB(t, path), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := scanChainRow(j.read.QueryRow("SELECT "+chainColumns+" FROM decisions WHERE id = 3"), true)
	j.Close()
	if err != nil {
		t.Fatal(err)
	}
	s.row.Note = "no resend"
	h, _ := s.row.hash()
	tamper(t, path, dropTriggers, fmt.Sprintf("UPDATE decisions SET note = 'no resend', hash = '%s' WHERE id = 3", h))
	rep := verifyPath(t, path)
	if rep.Intact() || rep.Broken.Decision != 4 || !strings.Contains(rep.Broken.Reason, "3 was changed and its hash recomputed") {
		t.Fatalf("broken = %+v", rep.Broken)
	}
}

// TestChainDeletedTailStaysVisible: the newest decision deleted by hand,
// then a new one made through mcp-confirm: the new one is chained to the
// head the journal recorded, so the gap shows.
func TestChainDeletedTailStaysVisible(t *testing.T) {
	sqliteOnly(t)
	path := chainJournal(t)
	tamper(t, path, dropTriggers, "DELETE FROM decisions WHERE id = 6")
	j := openTest(t, path)
	if err := j.Decide(context.Background(), 3, DecisionInput{Action: ActionNote, Operator: "carol", Note: "again"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	rep := verifyPath(t, path)
	if rep.Intact() || rep.Broken.Decision != 6 || !strings.Contains(rep.Broken.Reason, "does not follow decision 5") {
		t.Fatalf("broken = %+v", rep.Broken)
	}
}

// TestChainUnderConcurrentDecisions: decisions from many goroutines share
// group commits (each in its own savepoint), some of them refused and
// rolled back; the chain stays one line.
func TestChainUnderConcurrentDecisions(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, "")
	for i := range 4 {
		c, err := j.RecordIntent(ctx, intent("create_order", fmt.Sprintf(`{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		j.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventLost, Reason: "idle timeout"})
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for g := range 16 {
		wg.Go(func() {
			for i := range 10 {
				in := DecisionInput{Action: ActionNote, Operator: "op", Note: fmt.Sprint(g, i)}
				if i == 5 {
					in = DecisionInput{Action: ActionAbandon, Operator: "op"} // refused but once per call
				}
				if err := j.Decide(ctx, int64(g%4+1), in); err == nil {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	rep, err := j.VerifyChain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Intact() || rep.Decisions != ok || ok != 16*9+4 {
		t.Fatalf("after %d decisions: %+v %+v", ok, rep, rep.Broken)
	}
}

// TestMigrationChainsExistingDecisions: a journal of schema 4 with
// decisions gets its chain computed over them, in order, when it opens.
func TestMigrationChainsExistingDecisions(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	stmts := append([]string{}, migrations[:4]...)
	stmts = append(stmts,
		fmt.Sprintf("PRAGMA application_id = %d; PRAGMA user_version = 4", applicationID),
		`INSERT INTO calls (server, tool, kind, kind_source, key, args, fingerprint, state, created_at, updated_at)
			VALUES ('demo', 'create_order', 'write', 'default', 'k-1', '{}', 'fp', 'unknown', '2026-01-01T00:00:00.000000000Z', '2026-01-01T00:00:00.000000000Z')`,
		`INSERT INTO decisions (call_id, action, operator, at, note) VALUES (1, 'note', 'op', '2026-01-01T00:00:01.000000000Z', 'looked')`,
		`INSERT INTO decisions (call_id, action, operator, at, note, evidence) VALUES (1, 'query', 'op', '2026-01-01T00:00:02.000000000Z', '', '{"orders":[]}')`,
		`INSERT INTO decisions (call_id, action, operator, at, note, attempt) VALUES (1, 'retry', 'op', '2026-01-01T00:00:03.000000000Z', '', 2)`,
	)
	tamper(t, path, stmts...)
	j := openTest(t, path)
	rep, err := j.VerifyChain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Intact() || rep.Decisions != 3 || rep.HeadID != 3 {
		t.Fatalf("after the migration: %+v %+v", rep, rep.Broken)
	}
	c, _ := j.Get(ctx, 1)
	first := chainRow{ID: 1, CallID: 1, Action: "note", Operator: "op", At: "2026-01-01T00:00:01.000000000Z", Note: "looked", PrevHash: GenesisHash}
	if h, _ := first.hash(); c.Decisions[0].Hash != h || c.Decisions[1].PrevHash != h {
		t.Fatalf("first decision hashed %s, want %s", c.Decisions[0].Hash, h)
	}
	if err := j.Decide(ctx, 1, DecisionInput{Action: ActionNote, Operator: "op", Note: "after"}); err != nil {
		t.Fatal(err)
	}
	if rep, _ := j.VerifyChain(ctx); !rep.Intact() || rep.Decisions != 4 {
		t.Fatalf("a decision after the migration: %+v %+v", rep, rep.Broken)
	}
	err = j.write(ctx, durable, func(ctx context.Context, c *sql.Conn) error {
		_, err := c.ExecContext(ctx, "UPDATE decisions SET note = 'rewritten'")
		return err
	})
	if err == nil {
		t.Fatal("decisions must stay append-only after the migration")
	}
}

// exportOf writes the journal's export as the CLI does (JSONL of Call,
// through encoding/json, made valid UTF-8).
func exportOf(t *testing.T, path string, since time.Time) []byte {
	t.Helper()
	j, err := OpenReadOnly(context.Background(), testDB(t, path), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if err := j.Export(context.Background(), since, func(c Call) error { return enc.Encode(c) }); err != nil {
		t.Fatal(err)
	}
	return bytes.ToValidUTF8(buf.Bytes(), []byte("\uFFFD"))
}

func TestChainOfAnExport(t *testing.T) {
	path := chainJournal(t)
	want := verifyPath(t, path)
	export := exportOf(t, path, time.Time{})
	rep, err := VerifyExport(bytes.NewReader(export))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Intact() || rep.Decisions != want.Decisions || rep.Head != want.Head || rep.HeadID != want.HeadID {
		t.Fatalf("export: %+v %+v, journal %+v", rep, rep.Broken, want)
	}

	edits := []struct {
		name     string
		old, new string
		at       int64
		want     string
	}{
		{"a note edited", `"note":"cancelled"`, `"note":"done"`, 5, "was changed"},
		{"an operator edited", `"operator":"alice"`, `"operator":"mallory"`, 1, "was changed"},
		{"evidence edited", `"order_id":7`, `"order_id":8`, 2, "was changed"},
		{"a time edited", `"at":"2026-12-05T09:00:00.012Z"`, `"at":"2026-12-05T09:00:01.012Z"`, 0, "was changed"},
	}
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			if !bytes.Contains(export, []byte(e.old)) {
				t.Fatalf("the export has no %s:\n%s", e.old, export)
			}
			rep, err := VerifyExport(bytes.NewReader(bytes.Replace(export, []byte(e.old), []byte(e.new), 1)))
			if err != nil {
				t.Fatal(err)
			}
			if rep.Intact() || (e.at != 0 && rep.Broken.Decision != e.at) || !strings.Contains(rep.Broken.Reason, e.want) {
				t.Fatalf("broken = %+v, want at %d with %q", rep.Broken, e.at, e.want)
			}
		})
	}

	t.Run("a decision removed", func(t *testing.T) {
		var lines [][]byte
		for _, l := range bytes.Split(bytes.TrimSpace(export), []byte("\n")) {
			var c map[string]any
			json.Unmarshal(l, &c)
			if c["id"] == float64(2) { // call 2: its query (decision 2) goes, its mark (4) stays
				ds := c["decisions"].([]any)
				c["decisions"] = ds[1:]
				l, _ = json.Marshal(c)
			}
			lines = append(lines, l)
		}
		rep, err := VerifyExport(bytes.NewReader(bytes.Join(lines, []byte("\n"))))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Intact() || rep.Broken.Decision != 3 || !strings.Contains(rep.Broken.Reason, "does not follow decision 1") {
			t.Fatalf("broken = %+v", rep.Broken)
		}
	})

	t.Run("a call removed", func(t *testing.T) {
		lines := bytes.Split(bytes.TrimSpace(export), []byte("\n"))
		rep, err := VerifyExport(bytes.NewReader(bytes.Join(lines[1:], []byte("\n"))))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Intact() || rep.Broken.Decision != 2 || !strings.Contains(rep.Broken.Reason, "is the first in the export") {
			t.Fatalf("broken = %+v", rep.Broken)
		}
	})

	t.Run("newest decisions removed: a different head", func(t *testing.T) {
		lines := bytes.Split(bytes.TrimSpace(export), []byte("\n"))
		rep, err := VerifyExport(bytes.NewReader(bytes.Join(lines[:2], []byte("\n"))))
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Intact() || rep.Head == want.Head || rep.HeadID != 4 {
			t.Fatalf("a truncated export: %+v", rep)
		}
	})

	t.Run("not an export", func(t *testing.T) {
		for _, in := range []string{"hello\n", `{"decisions":[]}` + "\n", `{"id":1,"decisions":[{"id":1,"action":"note"}]}` + "\n"} {
			if _, err := VerifyExport(strings.NewReader(in)); err == nil {
				t.Errorf("%q: no error", in)
			}
		}
	})
}

// BenchmarkDecisionChain: what the chain adds to a decision (its hash,
// beside the fsync of the decision's own commit), and what verify costs
// per decision on a log of 10,000.
//
//	go test -run '^$' -bench DecisionChain -benchtime 2s ./pending/
func BenchmarkDecisionChain(b *testing.B) {
	b.Run("hash", func(b *testing.B) {
		r := chainRow{ID: 1, CallID: 1, Action: "query", Operator: "op", At: "2026-01-01T00:00:01.000000000Z",
			Evidence: []byte(`{"orders":[{"order_id":7,"item":"widget","quantity":2,"buyer":"bob"}]}`), PrevHash: GenesisHash}
		for b.Loop() {
			if _, err := r.hash(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decide", func(b *testing.B) {
		ctx := context.Background()
		j := openTest(b, "")
		c, err := j.RecordIntent(ctx, intent("create_order", `{}`))
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := j.Decide(ctx, c.ID, DecisionInput{Action: ActionNote, Operator: "op", Note: "n"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("verify-10000", func(b *testing.B) {
		ctx := context.Background()
		j := openTest(b, "")
		c, err := j.RecordIntent(ctx, intent("create_order", `{}`))
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := range 100 { // concurrent, so they share group commits
			wg.Go(func() {
				for i := range 100 {
					j.Decide(ctx, c.ID, DecisionInput{Action: ActionNote, Operator: "op", Note: fmt.Sprint(g, i)})
				}
			})
		}
		wg.Wait()
		for b.Loop() {
			rep, err := j.VerifyChain(ctx)
			if err != nil || !rep.Intact() || rep.Decisions != 10000 {
				b.Fatalf("%+v %v", rep, err)
			}
		}
	})
}
