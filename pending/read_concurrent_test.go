package pending

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestManyGetsAtOnceOnAFreshJournal: more Gets at once than the read pool
// has connections, before any statement is cached. Preparing a statement
// takes a connection of its own; readers that each held one in their
// transaction while waiting to prepare used to wait for ever.
func TestManyGetsAtOnceOnAFreshJournal(t *testing.T) {
	path := t.TempDir() + "/journal.db"
	j := openTest(t, path)
	ctx := context.Background()
	var ids []int64
	for i := range 3 {
		c, err := j.RecordIntent(ctx, intent("create_order", fmt.Sprintf(`{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	j.Close()
	j = openTest(t, path)                         // nothing prepared yet
	if _, err := j.DataVersion(ctx); err != nil { // holds one connection for good, as a watcher does
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		var wg sync.WaitGroup
		errs := make(chan error, 32)
		for i := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := j.Get(ctx, ids[i%len(ids)]); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		done <- <-errs
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("32 Gets at once on a fresh journal did not end in 30s: readers wait on each other for a connection")
	}
	// The statements are cached now, and still give the same answers.
	c, err := j.Get(ctx, ids[1])
	if err != nil || len(c.Attempts) != 1 || (j.pg == nil && j.readStmts.lookup("SELECT "+callColumns+" FROM calls WHERE id = ?") == nil) {
		t.Fatalf("after: %+v, %v; the call's statement should be cached", c, err)
	}
}

func TestOldestUnknown(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	j, err := Open(context.Background(), testDB(t, ""), Options{Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	if _, _, ok, err := j.OldestUnknown(ctx); ok || err != nil {
		t.Fatalf("empty journal: ok %v, err %v", ok, err)
	}
	var ids []int64
	for i := range 3 {
		c, err := j.RecordIntent(ctx, intent("create_order", fmt.Sprintf(`{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	// Call 2 is lost first, then 1; 3 succeeds.
	lostAt := map[int64]time.Time{}
	for _, id := range []int64{ids[1], ids[0]} {
		clock.t = clock.t.Add(time.Hour)
		if err := j.RecordOutcome(ctx, id, 1, Outcome{Event: EventLost, Reason: "idle timeout"}); err != nil {
			t.Fatal(err)
		}
		lostAt[id] = clock.t
	}
	if err := j.RecordOutcome(ctx, ids[2], 1, Outcome{Event: EventSucceeded, Result: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	id, since, ok, err := j.OldestUnknown(ctx)
	if err != nil || !ok || id != ids[1] || !since.Equal(lostAt[ids[1]]) {
		t.Fatalf("oldest unknown: %d since %s (ok %v, err %v); want %d since %s", id, since, ok, err, ids[1], lostAt[ids[1]])
	}
	// Marked applied, it is no longer unknown; the next one is.
	if err := j.Decide(ctx, ids[1], DecisionInput{Action: ActionMark, Operator: "op"}); err != nil {
		t.Fatal(err)
	}
	if id, _, _, _ := j.OldestUnknown(ctx); id != ids[0] {
		t.Fatalf("after marking %d: oldest unknown %d, want %d", ids[1], id, ids[0])
	}
}
