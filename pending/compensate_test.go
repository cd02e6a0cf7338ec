package pending

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// TestCompensateLinksTheCalls: the decision to compensate is recorded on
// the call it undoes, the call that undoes it names that one, and Get
// shows the link from both ends; the decision chain stays whole.
func TestCompensateLinksTheCalls(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, "")
	a, err := j.RecordIntent(ctx, intent("create_order", `{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.RecordOutcome(ctx, a.ID, 1, Outcome{Event: EventSucceeded, Result: json.RawMessage(`{"content":[]}`)}); err != nil {
		t.Fatal(err)
	}
	if err := j.Decide(ctx, a.ID, DecisionInput{Action: ActionCompensate, Operator: "alice", Note: "customer cancelled",
		Evidence: json.RawMessage(`{"cancel_tool":"cancel_order"}`)}); err != nil {
		t.Fatalf("compensate a succeeded call: %v", err)
	}
	in := intent("cancel_order", `{"order_key":"x"}`)
	in.Compensates = a.ID
	b, err := j.RecordIntent(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if b.Compensates != a.ID {
		t.Fatalf("the intent's call says it compensates %d, want %d", b.Compensates, a.ID)
	}
	gotA, err := j.Get(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(gotA.CompensatedBy) != 1 || gotA.CompensatedBy[0] != b.ID || gotA.State != StateSucceeded {
		t.Fatalf("call %d: compensated by %v, state %s; want [%d], still succeeded", a.ID, gotA.CompensatedBy, gotA.State, b.ID)
	}
	if d := gotA.Decisions[len(gotA.Decisions)-1]; d.Action != ActionCompensate || d.Operator != "alice" {
		t.Fatalf("the last decision on call %d is %+v, want compensate by alice", a.ID, d)
	}
	gotB, err := j.Get(ctx, b.ID)
	if err != nil || gotB.Compensates != a.ID || len(gotB.CompensatedBy) != 0 {
		t.Fatalf("call %d: compensates %d, compensated by %v (%v)", b.ID, gotB.Compensates, gotB.CompensatedBy, err)
	}
	if list, err := j.List(ctx, Filter{}); err != nil || len(list) != 2 {
		t.Fatalf("list: %d calls (%v)", len(list), err)
	}
	if rep, err := j.VerifyChain(ctx); err != nil || rep.Broken != nil {
		t.Fatalf("the chain after a compensate decision: %+v (%v)", rep, err)
	}
}

// TestCompensateRefused: a call that failed (the server did nothing) or is
// in flight (its outcome is coming) is not compensated; nothing is written.
func TestCompensateRefused(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, "")
	inFlight, err := j.RecordIntent(ctx, intent("create_order", `{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	failed, err := j.RecordIntent(ctx, intent("create_order", `{"n":2}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.RecordOutcome(ctx, failed.ID, 1, Outcome{Event: EventFailed, Reason: "out of stock"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{inFlight.ID, failed.ID} {
		err := j.Decide(ctx, id, DecisionInput{Action: ActionCompensate, Operator: "alice"})
		var te *TransitionError
		if !errors.Is(err, ErrIllegalTransition) || !errors.As(err, &te) || te.Event != EventCompensate {
			t.Fatalf("compensate call %d: %v; want a refusal naming compensate", id, err)
		}
		if c, _ := j.Get(ctx, id); len(c.Decisions) != 0 {
			t.Fatalf("a refused compensate wrote %+v", c.Decisions)
		}
	}
}

// TestMigrationToCompensate: a journal of schema 6, with decisions, opens
// as schema 7 (decisions rebuilt to allow 'compensate') with every
// decision and its hashes as they were: the chain still verifies, and the
// append-only triggers still hold.
func TestMigrationToCompensate(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	all := migrations
	migrations = all[:6]
	j, err := Open(ctx, path, Options{})
	if err != nil {
		migrations = all
		t.Fatal(err)
	}
	// The call as schema 6 holds it (this build's RecordIntent writes the
	// column schema 7 adds).
	c := Call{ID: 1}
	err = j.write(ctx, durable, func(ctx context.Context, conn *sql.Conn) error {
		_, err := conn.ExecContext(ctx, `INSERT INTO calls (server, tool, kind, kind_source, key, args, fingerprint, state, created_at, updated_at)
			VALUES ('demo', 'create_order', 'write', 'default', 'k-1', '{}', 'fp', 'unknown', '2026-01-01T00:00:00.000000000Z', '2026-01-01T00:00:00.000000000Z')`)
		return err
	})
	// The decisions as schema 6 holds them: no link (schema 8's) with them.
	for _, d := range []struct {
		a    Action
		note string
	}{{ActionNote, "looked"}, {ActionMark, "found it"}} {
		if err == nil {
			err = j.write(ctx, deciding, func(ctx context.Context, conn *sql.Conn) error {
				return j.appendDecisionAs(ctx, conn, c.ID, d.a, "op", "", formatTime(time.Now()), d.note, nil, 0)
			})
		}
	}
	j.Close()
	migrations = all
	if err != nil {
		t.Fatal(err)
	}
	j, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	got, err := j.Get(ctx, c.ID)
	if err != nil || len(got.Decisions) != 2 || got.Decisions[0].Note != "looked" || got.Decisions[1].Action != ActionMark {
		t.Fatalf("decisions after the migration: %+v (%v)", got.Decisions, err)
	}
	if err := j.Decide(ctx, c.ID, DecisionInput{Action: ActionCompensate, Operator: "op"}); err != nil {
		t.Fatalf("compensate after the migration: %v", err)
	}
	if rep, err := j.VerifyChain(ctx); err != nil || rep.Broken != nil {
		t.Fatalf("the chain after the migration: %+v (%v)", rep, err)
	}
	if err := j.write(ctx, durable, func(ctx context.Context, conn *sql.Conn) error {
		_, err := conn.ExecContext(ctx, "DELETE FROM decisions")
		return err
	}); err == nil {
		t.Fatal("decisions could be deleted after the migration: the trigger is gone")
	}
}
