package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// heldServer is server() with the demo's answers to create_order held
// back (every other line passes) until the file gate exists: the write is
// executed and committed at the server, and its answer waits for the test.
func (w *world) heldServer(gate string) []string {
	script := `gate=$0; wire=$1; shift; "$@" < <(exec tee -a "$wire") | while IFS= read -r line; do
case "$line" in *order_id*) while [ ! -e "$gate" ]; do sleep 0.05; done;; esac
printf '%s\n' "$line"; done`
	return []string{"--", "/bin/bash", "-c", script, gate, w.wire, w.bin, "demo-server", "--db", w.demoDB}
}

// TestE2EWALLostUnderAWrite (issue 44 item 6): the journal's -wal is
// removed or replaced while a `call` waits for its server's answer, and
// another process makes its own call in between. The first process's
// intent was only in the WAL it lost; it must write it back into the
// journal as it now is, under its key, with the true outcome and the
// "re-recorded" mark, leave the other call alone, and print what the
// journal says, naming its call by key.
func TestE2EWALLostUnderAWrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(journal string) error
	}{
		{"wal removed", func(j string) error { return os.Remove(j + "-wal") }},
		{"wal replaced", func(j string) error {
			if err := os.Rename(j+"-wal", j+"-wal.old"); err != nil {
				return err
			}
			return os.WriteFile(j+"-wal", nil, 0o600)
		}},
		{"wal and shm removed", func(j string) error {
			if err := os.Remove(j + "-wal"); err != nil {
				return err
			}
			return os.Remove(j + "-shm")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, t.TempDir())
			db := w.db()
			first := parseCallOut(t, w.call(`{"item":"widget","quantity":1,"buyer":"alice"}`, nil))
			known := map[string]bool{first.Key: true}

			gate := filepath.Join(w.dir, "gate")
			bg := w.start(t, w.withDB(append([]string{"call", "create_order", "--args", `{"item":"gadget","quantity":2,"buyer":"alice"}`,
				"--timeout", "100s"}, w.heldServer(gate)...)))
			key := w.waitSentKey(t, known, time.Minute)
			known[key] = true
			waitRecord(t, db, key, "completed", time.Minute)
			if err := tc.lose(w.journal); err != nil {
				t.Fatal(err)
			}

			// The other process's call. While the first process still maps
			// the old WAL index, no other can read the journal (it fails
			// to open: nothing sent); it tries until it can.
			var other callOut
			deadline := time.Now().Add(time.Minute)
			for {
				r := w.call(`{"item":"gizmo","quantity":3,"buyer":"bob"}`, nil)
				if r.code == exitOK {
					other = parseCallOut(t, r)
					break
				}
				if r.code != exitUnavailable || time.Now().After(deadline) {
					t.Fatalf("the other process's call: %s", r)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err := os.WriteFile(gate, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			_ = bg.wait()
			r := bg.result()
			out := parseCallOut(t, r)

			// The journal as it now is.
			byKey := map[string][]jCall{}
			for _, c := range w.list() {
				byKey[c.Key] = append(byKey[c.Key], c)
			}
			mine := byKey[key]
			if len(mine) != 1 {
				t.Fatalf("the call with key %s: want it once in the journal, found %d\nfirst process: %s", key, len(mine), r)
			}
			c := w.show(mine[0].ID)
			if c.State != "succeeded" || len(c.Attempts) != 1 || c.Attempts[0].Outcome != "succeeded" ||
				!strings.Contains(c.Reason, pending.ReasonReRecorded) || !strings.Contains(string(c.Attempts[0].Result), `"order_id"`) {
				t.Fatalf("the call with key %s: want it succeeded, with the server's answer and marked %q; got %+v\nfirst process: %s",
					key, pending.ReasonReRecorded, c, r)
			}
			if n := reRecordedEvents(t, w.journal, c.ID); n != 1 {
				t.Fatalf("call %d (key %s): want one %s event, got %d", c.ID, key, pending.EventReRecorded, n)
			}
			if o := byKey[other.Key]; len(o) != 1 || o[0].ID != other.ID || o[0].State != "succeeded" || o[0].Reason != "" {
				t.Fatalf("the other process's call (key %s, call %d): want it as it recorded it, got %+v", other.Key, other.ID, o)
			}
			if f := byKey[first.Key]; len(f) != 1 || f[0].State != "succeeded" {
				t.Fatalf("the first call (key %s): %+v", first.Key, f)
			}

			// What the first process printed is what the journal says, by key.
			wantExit(t, r, exitOK, "the call whose WAL was lost, once written back")
			if out.Key != key || out.ID != c.ID || out.State != c.State || out.Reason != c.Reason {
				t.Fatalf("printed %+v; the journal has call %d %s %q for key %s", out, c.ID, c.State, c.Reason, key)
			}
			if !strings.Contains(r.stderr, "key "+key) || !strings.Contains(r.stderr, "the journal says it is succeeded") ||
				strings.Contains(r.stderr, "shows it unknown") {
				t.Fatalf("the first process must name its call by key and say what the journal says:\n%s", r.stderr)
			}
			if got := w.sent("create_order"); got[key] != 1 || got[other.Key] != 1 {
				t.Fatalf("each write is sent once; wire log has %v", got)
			}
			// The calls' chains cover the write-back (a re_recorded link)
			// and the outcome recorded after it.
			if v := w.run("verify"); v.code != exitOK {
				t.Fatalf("verify after the write-back: %s", v)
			}
		})
	}
}

// reRecordedEvents counts the EventReRecorded events of call id.
func reRecordedEvents(t *testing.T, journal string, id int64) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+journal+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return queryInt(t, db, "SELECT count(*) FROM events WHERE kind = ? AND call_id = ?", pending.EventReRecorded, id)
}
