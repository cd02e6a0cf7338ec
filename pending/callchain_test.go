package pending

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// callsJournal makes a journal whose calls went every way the state
// machine allows, and returns its path (closed) and the ids by key.
func callsJournal(t *testing.T) (string, map[string]int64) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	clock := &testClock{t: time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)}
	j, err := Open(ctx, testDB(t, path), Options{Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ids := map[string]int64{}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	call := func(key string) int64 {
		t.Helper()
		in := intent("create_order", `{"item":"`+key+`"}`)
		in.Key = key
		c, err := j.RecordIntent(ctx, in)
		must(err)
		ids[key] = c.ID
		return c.ID
	}
	lost := Outcome{Event: EventLost, Reason: "idle timeout", Clock: "idle"}
	ok := Outcome{Event: EventSucceeded, Result: json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`), RPCID: "7"}
	failed := Outcome{Event: EventFailed, Reason: "the server said no", Result: json.RawMessage(`{"isError":true}`)}

	id := call("k-applied")
	must(j.RecordOutcome(ctx, id, 1, lost))
	must(j.Decide(ctx, id, DecisionInput{Action: ActionMark, Operator: "alice", Note: "in the shop"}))
	id = call("k-abandoned")
	must(j.RecordOutcome(ctx, id, 1, lost))
	must(j.Decide(ctx, id, DecisionInput{Action: ActionAbandon, Operator: "alice"}))
	id = call("k-unknown")
	must(j.RecordOutcome(ctx, id, 1, lost))
	must(j.Decide(ctx, id, DecisionInput{Action: ActionNote, Operator: "bob", Note: "asked"}))
	id = call("k-failed")
	must(j.RecordOutcome(ctx, id, 1, failed))
	id = call("k-succeeded")
	must(j.RecordOutcome(ctx, id, 1, ok))
	id = call("k-retried")
	must(j.RecordOutcome(ctx, id, 1, failed))
	_, a, err := j.Retry(ctx, id, RetryInput{Operator: "bob", Session: 2})
	must(err)
	must(j.RecordOutcome(ctx, id, a.N, ok))
	id = call("k-late")
	must(j.RecordOutcome(ctx, id, 1, lost))
	must(j.RecordLateResult(ctx, id, 1, Outcome{Event: EventSucceeded, Result: json.RawMessage(`{"content":[]}`), CallerToldUnknown: true}))
	must(j.Ack(ctx, id, "carol", "seen"))
	id = call("k-resent")
	a, err = j.ResendAfterRefusal(ctx, id, 1, Outcome{Event: EventFailed, Reason: "404: session unknown"}, 3, "the server did not know the session")
	must(err)
	must(j.RecordOutcome(ctx, id, a.N, ok))
	id = call("k-late-conflict")
	must(j.RecordOutcome(ctx, id, 1, lost))
	must(j.Decide(ctx, id, DecisionInput{Action: ActionAbandon, Operator: "alice"}))
	must(j.RecordLateResult(ctx, id, 1, ok))
	id = call("k-decided")
	must(j.RecordOutcome(ctx, id, 1, lost))
	must(j.Decide(ctx, id, DecisionInput{Action: ActionNote, Operator: "bob", Note: "looking"}))
	must(j.Decide(ctx, id, DecisionInput{Action: ActionAbandon, Operator: "bob"}))
	call("k-in-flight")
	return path, ids
}

// tamperCalls runs statements on the journal as someone with sqlite3 or
// psql would, bypassing mcp-confirm: on SQLite after dropping the
// triggers named, on PostgreSQL with triggers (and foreign keys) off for
// the session.
func tamperCalls(t *testing.T, path string, sqliteTriggers []string, stmts ...string) {
	t.Helper()
	if testBackend != "postgres" {
		var drops []string
		for _, tr := range sqliteTriggers {
			drops = append(drops, "DROP TRIGGER "+tr)
		}
		tamper(t, path, append(drops, stmts...)...)
		return
	}
	ctx := context.Background()
	c, err := pgx.Connect(ctx, testDB(t, path))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, s := range append([]string{"SET session_replication_role = replica"}, stmts...) {
		if _, err := c.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func TestCallChainOfAnUntouchedJournal(t *testing.T) {
	path, ids := callsJournal(t)
	rep := verifyPath(t, path)
	if !rep.Intact() || rep.Calls == nil {
		t.Fatalf("untouched journal: %+v calls %+v", rep, rep.Calls)
	}
	if rep.Calls.Calls != len(ids) || rep.Calls.Covered != len(ids) || rep.Calls.Legacy() != 0 {
		t.Fatalf("calls %+v, want all %d covered", rep.Calls, len(ids))
	}
	// 11 intents, 14 attempt ends (2 late, 1 resend), 5 state-moving
	// decisions, and the recovery of k-in-flight, whose owner closed the
	// journal with it in flight, by the open that verifies (a lost link)
	if rep.Calls.Links != 11+14+5+1 {
		t.Errorf("links = %d", rep.Calls.Links)
	}
}

// callProblem returns the one problem verify reported for call id,
// failing when the log was found intact or the call not named.
func callProblem(t *testing.T, rep ChainReport, id int64, key string) CallProblem {
	t.Helper()
	if rep.Intact() || rep.Calls == nil {
		t.Fatalf("verify found the journal intact after the tampering: %+v calls %+v", rep, rep.Calls)
	}
	for _, p := range rep.Calls.Problems {
		if p.Call == id {
			if p.Key != key {
				t.Errorf("problem names call %d by key %q, want %q", id, p.Key, key)
			}
			return p
		}
	}
	t.Fatalf("no problem names call %d (%s): %+v", id, key, rep.Calls.Problems)
	return CallProblem{}
}

func TestCallChainShowsRewrittenCalls(t *testing.T) {
	terminal := []string{"calls_terminal_stays"}
	for _, tc := range []struct {
		name     string
		key      string
		triggers []string
		stmts    func(id string) []string
		want     string
	}{
		{"abandoned made applied", "k-abandoned", terminal, func(id string) []string {
			return []string{"UPDATE calls SET state = 'applied' WHERE id = " + id}
		}, "is applied, but its chained history ends abandoned"},
		{"unknown made failed", "k-unknown", nil, func(id string) []string {
			return []string{"UPDATE calls SET state = 'failed', reason = 'made up' WHERE id = " + id}
		}, "is failed, but its chained history ends unknown"},
		{"unknown made failed, attempt too", "k-unknown", nil, func(id string) []string {
			return []string{"UPDATE calls SET state = 'failed' WHERE id = " + id,
				"UPDATE attempts SET outcome = 'failed' WHERE call_id = " + id}
		}, "attempt 1 was changed after link"},
		{"arguments rewritten", "k-succeeded", nil, func(id string) []string {
			return []string{`UPDATE calls SET args = '{"item":"something else"}' WHERE id = ` + id}
		}, "was changed after it was recorded"},
		{"result rewritten", "k-retried", nil, func(id string) []string {
			return []string{`UPDATE attempts SET result = '{"content":[]}' WHERE n = 2 AND call_id = ` + id}
		}, "attempt 2 was changed"},
		{"call and its decisions deleted", "k-decided", []string{"calls_never_deleted", "decisions_never_deleted"}, func(id string) []string {
			return []string{"DELETE FROM decisions WHERE call_id = " + id, "DELETE FROM attempts WHERE call_id = " + id,
				"DELETE FROM calls WHERE id = " + id}
		}, "is gone"},
		{"intent link deleted", "k-failed", []string{"links_never_deleted"}, func(id string) []string {
			return []string{"DELETE FROM links WHERE seq = 1 AND call_id = " + id}
		}, "link 1 (its intent) was deleted by hand"},
		{"outcome link deleted", "k-failed", []string{"links_never_deleted"}, func(id string) []string {
			return []string{"DELETE FROM links WHERE seq = 2 AND call_id = " + id}
		}, "no link records how it ended"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, ids := callsJournal(t)
			id := ids[tc.key]
			tamperCalls(t, path, tc.triggers, tc.stmts(itoa(id))...)
			p := callProblem(t, verifyPath(t, path), id, tc.key)
			if !strings.Contains(p.Reason, tc.want) {
				t.Errorf("reason %q, want it to say %q", p.Reason, tc.want)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A journal of the version whose chain covered decisions only (schema 7
// on SQLite, 4 on PostgreSQL) verifies after the upgrade: its calls are
// reported as covered by decisions only, and what happens to them after
// it is chained.
func TestCallChainOfAnOlderJournal(t *testing.T) {
	ctx := context.Background()
	var path string
	if testBackend != "postgres" {
		// made by 8366ae4 (testdata/README.md)
		dir := t.TempDir()
		path = filepath.Join(dir, "journal.db")
		for _, f := range []string{"", ".secret"} {
			b, err := os.ReadFile("testdata/v7-journal.db" + f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path+f, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		// PostgreSQL's schema 4 is this one less migration 5: made so here.
		var ids map[string]int64
		path, ids = callsJournal(t)
		if len(ids) != 11 {
			t.Fatal(ids)
		}
		tamperCalls(t, path, nil, "DROP TABLE links", "DELETE FROM meta WHERE name = 'call_chain_from'",
			"UPDATE mcp_confirm_schema SET version = 4")
	}
	j, err := Open(ctx, testDB(t, path), Options{}) // upgrades it
	if err != nil {
		t.Fatal(err)
	}
	rep, err := j.VerifyChain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// (on PostgreSQL, the call callsJournal left in flight was recovered
	// by the upgrading open: a lost link, a legacy call's first)
	base := map[bool]int{true: 1, false: 0}[testBackend == "postgres"]
	if !rep.Intact() || rep.Calls.Covered != 0 || rep.Calls.Legacy() != int64(rep.Calls.Calls) || rep.Calls.Links != base {
		t.Fatalf("older journal after the upgrade: %+v calls %+v", rep, rep.Calls)
	}
	// What happens after the upgrade is chained: a new call, and a legacy
	// call (the fixture's 5, the PostgreSQL journal's 3: unknown) marked.
	legacy := int64(5)
	if testBackend == "postgres" {
		legacy = 3
	}
	c, err := j.RecordIntent(ctx, intent("create_order", `{"after":"upgrade"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventSucceeded, Result: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := j.Decide(ctx, legacy, DecisionInput{Action: ActionMark, Operator: "op"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	rep = verifyPath(t, path)
	if !rep.Intact() || rep.Calls.Covered != 1 || rep.Calls.Links != base+3 {
		t.Fatalf("after new writes: %+v calls %+v", rep, rep.Calls)
	}
	// and a legacy call's state rewritten after it gained a link is seen
	tamperCalls(t, path, []string{"calls_terminal_stays"}, "UPDATE calls SET state = 'abandoned' WHERE id = "+itoa(legacy))
	if p := callProblem(t, verifyPath(t, path), legacy, "k-unknown"); !strings.Contains(p.Reason, "ends applied") {
		t.Errorf("reason %q", p.Reason)
	}
}
