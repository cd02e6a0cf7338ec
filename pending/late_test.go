package pending

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestLateSettleHold: a call settled by a late answer after its caller was
// told it was unknown holds identical intents (LateSettledError) until an
// operator acks it or LateHold passes; one settled while its caller was
// still waiting (CallerToldUnknown false) holds nothing. HoldingLate lists
// exactly the calls that hold.
func TestLateSettleHold(t *testing.T) {
	ctx := context.Background()
	clock := &testClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	j, err := Open(ctx, testDB(t, ""), Options{Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	settleLate := func(in Intent, told bool) Call {
		t.Helper()
		c, err := j.RecordIntent(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventLost, Reason: "idle timeout"}); err != nil {
			t.Fatal(err)
		}
		if err := j.RecordLateResult(ctx, c.ID, 1, Outcome{Event: EventSucceeded, Result: []byte(`{"content":[]}`),
			CallerToldUnknown: told}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	held := intent("create_order", `{"item":"widget"}`)
	first := settleLate(held, true)
	quiet := settleLate(intent("create_order", `{"item":"gadget"}`), false)

	again := held
	again.Key, again.Hold, again.LateHold = "another-key", true, time.Hour
	var late *LateSettledError
	_, err = j.RecordIntent(ctx, again)
	if !errors.As(err, &late) || late.CallID != first.ID || late.State != StateSucceeded {
		t.Fatalf("want LateSettledError for call %d, got %v", first.ID, err)
	}
	if !errors.Is(err, ErrHeld) {
		t.Errorf("LateSettledError must be a hold (ErrHeld): %v", err)
	}
	g := intent("create_order", `{"item":"gadget"}`)
	g.Key, g.Hold, g.LateHold = "gadget-2", true, time.Hour
	if _, err := j.RecordIntent(ctx, g); err != nil {
		t.Fatalf("a call settled while its caller waited holds nothing: %v", err)
	}
	list, err := j.HoldingLate(ctx)
	if err != nil || len(list) != 1 || list[0].ID != first.ID || !list[0].HoldsLate() {
		t.Fatalf("HoldingLate: want only call %d, got %+v (%v)", first.ID, list, err)
	}
	if c, _ := j.Get(ctx, quiet.ID); c.HoldsLate() {
		t.Errorf("call %d holds though its caller was never told unknown", quiet.ID)
	}

	// late_hold passes: the hold ends on its own (the call still shows).
	clock.t = clock.t.Add(2 * time.Hour)
	expired := again
	expired.Key = "after-the-hold"
	if _, err := j.RecordIntent(ctx, expired); err != nil {
		t.Fatalf("after late_hold the identical call is a new one: %v", err)
	}

	if err := j.Ack(ctx, quiet.ID, "tester", ""); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("ack of a call with nothing to acknowledge: want ErrIllegalTransition, got %v", err)
	}
	if err := j.Ack(ctx, first.ID, "tester", "seen"); err != nil {
		t.Fatal(err)
	}
	if err := j.Ack(ctx, first.ID, "tester", ""); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("a second ack: want ErrIllegalTransition, got %v", err)
	}
	c, _ := j.Get(ctx, first.ID)
	if c.HoldsLate() || c.AckedAt == nil || c.State != StateSucceeded || c.Decisions[len(c.Decisions)-1].Action != ActionAck {
		t.Fatalf("after ack: %+v", c)
	}
	if list, _ := j.HoldingLate(ctx); len(list) != 0 {
		t.Fatalf("HoldingLate after ack: %+v", list)
	}
}

// TestMigrationKeepsDecisions: a journal of schema 2, with a call and its
// decisions, opens as schema 3 (decisions rebuilt to allow 'ack') with
// nothing lost, and the append-only triggers still hold.
func TestMigrationKeepsDecisions(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range append(migrations[:2:2],
		fmt.Sprintf("PRAGMA application_id = %d; PRAGMA user_version = 2", applicationID),
		`INSERT INTO calls (server, tool, kind, kind_source, key, args, fingerprint, state, created_at, updated_at)
			VALUES ('demo', 'create_order', 'write', 'default', 'k-1', '{}', 'fp', 'unknown', '2026-01-01T00:00:00.000000000Z', '2026-01-01T00:00:00.000000000Z')`,
		`INSERT INTO decisions (call_id, action, operator, at, note) VALUES (1, 'query', 'op', '2026-01-01T00:00:01.000000000Z', 'looked')`,
		`INSERT INTO decisions (call_id, action, operator, at, note) VALUES (1, 'note', 'op', '2026-01-01T00:00:02.000000000Z', 'later')`,
	) {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	db.Close()
	j, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	c, err := j.Get(ctx, 1)
	if err != nil || len(c.Decisions) != 2 || c.Decisions[0].Note != "looked" || c.Decisions[1].Action != ActionNote {
		t.Fatalf("decisions after the migration: %+v (%v)", c.Decisions, err)
	}
	if err := j.Decide(ctx, 1, DecisionInput{Action: ActionNote, Operator: "op", Note: "after"}); err != nil {
		t.Fatal(err)
	}
	err = j.write(ctx, durable, func(ctx context.Context, c *sql.Conn) error {
		_, err := c.ExecContext(ctx, "UPDATE decisions SET note = 'rewritten'")
		return err
	})
	if err == nil {
		t.Fatal("decisions must stay append-only after the rebuild")
	}
}
