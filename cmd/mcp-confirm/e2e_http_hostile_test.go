package main

import (
	"database/sql"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/internal/hostilehttp"
)

// A 2025-11-25 server that polls (SEP-1699): it runs the write, ends the
// POST's stream after an event with an id and no answer, and answers on
// the GET that resumes it with Last-Event-ID. Through the binary, on a
// SQLite journal: the write succeeded with the server's answer, on one
// attempt, executed once, and the journal says how the answer came; the
// reason is never "cancelled" (issue 44, item 4).
func TestHTTPPollingServerAnswerRecovered(t *testing.T) {
	w := newWorld(t, t.TempDir())
	srv := hostilehttp.Start(t, hostilehttp.Poll)
	r := w.run("call", "create_order", "--args", `{"item":"widget"}`, "--url", srv.URL)
	wantExit(t, r, exitOK, "call to a server that answers on the resumed stream")
	out := parseCallOut(t, r)
	if out.State != "succeeded" || !strings.Contains(string(out.Result), `"order_id":1`) {
		t.Fatalf("state %q result %s, want succeeded with order 1\n%s", out.State, out.Result, r)
	}
	if n := srv.Executions.Load(); n != 1 {
		t.Errorf("%d executions at the server, want 1", n)
	}
	if n := srv.Posts.Load(); n != 1 {
		t.Errorf("%d tools/call POSTs, want 1 (nothing resent)", n)
	}
	c := w.show(out.ID)
	if len(c.Attempts) != 1 || c.Attempts[0].Outcome != "succeeded" {
		t.Fatalf("attempts %+v, want one, succeeded", c.Attempts)
	}
	show := w.run("show", strconv.FormatInt(out.ID, 10))
	if !strings.Contains(show.stdout, "recovered by resuming the stream; not resent") {
		t.Errorf("show does not say the answer came on a resumed stream:\n%s", show.stdout)
	}
	if strings.Contains(show.stdout, "cancelled") {
		t.Errorf("show says cancelled; nothing was:\n%s", show.stdout)
	}
}

// A server that answers one write twice on its stream, success then
// isError with the same id: the call stands succeeded with the first
// answer, and the second is recorded as on stdio (the demo's
// --answer-twice): one second_answer event and the call flagged in
// conflict, "attempt 1 was answered twice" (issue 44, item 5). Both when
// the second comes in the same write and when it comes after the client
// had its answer.
func TestHTTPSecondAnswerIsConflict(t *testing.T) {
	// On stdio first, for the shape to match.
	sw := newWorld(t, t.TempDir())
	r := sw.call(`{"item":"widget","quantity":1,"buyer":"bob"}`, nil, "--answer-twice", "1")
	wantExit(t, r, exitOK, "stdio call answered twice")
	stdio := conflictShape(t, sw, parseCallOut(t, r).ID)

	for _, mode := range []string{hostilehttp.Twice, hostilehttp.TwiceLater} {
		t.Run(mode, func(t *testing.T) {
			w := newWorld(t, t.TempDir())
			srv := hostilehttp.Start(t, mode)
			r := w.run("call", "create_order", "--args", `{"item":"widget"}`, "--url", srv.URL)
			wantExit(t, r, exitOK, "call answered twice")
			out := parseCallOut(t, r)
			if out.State != "succeeded" || strings.Contains(string(out.Result), `"isError":true`) {
				t.Fatalf("state %q result %s, want succeeded with the first answer\n%s", out.State, out.Result, r)
			}
			got := conflictShape(t, w, out.ID)
			if got != stdio {
				t.Fatalf("recorded %+v over HTTP, %+v on stdio", got, stdio)
			}
			show := w.run("show", strconv.FormatInt(out.ID, 10))
			if !strings.Contains(show.stdout, "CONFLICT: attempt 1 was answered twice: first succeeded, then failed") {
				t.Errorf("show does not name the conflict:\n%s", show.stdout)
			}
			if n := srv.Executions.Load(); n != 1 {
				t.Errorf("%d executions, want 1", n)
			}
		})
	}
}

// shape is how a call answered twice is recorded.
type shape struct {
	state         string
	attempts      int
	conflict      bool
	secondAnswers int
	notePrefix    bool // the conflict's note says "attempt 1 was answered twice"
}

func conflictShape(t *testing.T, w *world, id int64) shape {
	t.Helper()
	c := w.show(id)
	db, err := sql.Open("sqlite", "file:"+w.journal+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var note string
	if err := db.QueryRow("SELECT conflict_note FROM calls WHERE id = ?", id).Scan(&note); err != nil {
		t.Fatal(err)
	}
	return shape{state: c.State, attempts: len(c.Attempts), conflict: c.Conflict,
		secondAnswers: queryInt(t, db, "SELECT count(*) FROM events WHERE call_id = ? AND kind = 'second_answer'", id),
		notePrefix:    strings.HasPrefix(note, "attempt 1 was answered twice")}
}
