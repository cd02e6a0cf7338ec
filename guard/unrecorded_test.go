package guard

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// TestOutcomeNotRecordedKeepsTheAnswerAndTheReason: another program holds
// the journal's write lock past the busy timeout while the server answers.
// The caller still gets what the server said (with an error saying it was
// not recorded, never "not sent"), and once this process is gone the call
// recovers as unknown with its own reason, not "unclean shutdown".
func TestOutcomeNotRecordedKeepsTheAnswerAndTheReason(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := pending.Open(context.Background(), path, pending.Options{BusyTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeServer()
	g := New(j, f, Options{Operator: "tester", Keys: SeededKeys(bytes.NewReader(bytes.Repeat([]byte("seed"), 1<<12)))})

	locker, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	conn, err := locker.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	f.set("create_order", func(fakeCall) mcpclient.Delivery {
		// The intent is committed; now someone takes the write lock.
		if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
			t.Errorf("take the write lock: %v", err)
		}
		return okOutcome(map[string]any{"order_id": 7})
	})
	res, err := g.Call(context.Background(), Request{Tool: "create_order", Args: order(2)})
	var nr *OutcomeNotRecordedError
	if !errors.As(err, &nr) || nr.Event != pending.EventSucceeded || len(nr.Result) == 0 || len(res.Result) == 0 {
		t.Fatalf("want OutcomeNotRecordedError carrying the server's success, got %v (result %s)", err, res.Result)
	}
	if errors.Is(err, ErrUnavailable) {
		t.Fatalf("a sent call must never read as unavailable (not sent): %v", err)
	}
	j.Close()
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}

	j2, err := pending.Open(context.Background(), path, pending.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	c, err := j2.Get(context.Background(), nr.CallID)
	if err != nil {
		t.Fatal(err)
	}
	if c.State != pending.StateUnknown || !strings.HasPrefix(c.Reason, pending.ReasonNotRecorded) {
		t.Fatalf("want unknown with reason %q…, got %s %q", pending.ReasonNotRecorded, c.State, c.Reason)
	}
}
