package pending

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/pgtest"
)

// testFingerprints re-makes the fingerprint intent() gives, as the guard's
// StoredFingerprints does for real calls.
func testFingerprints(c Call) []string {
	sum := sha256.Sum256([]byte(c.Tool + string(c.Args)))
	return []string{fmt.Sprintf("%x", sum)}
}

// copySource is a journal with what a single user's has: calls unknown,
// succeeded, failed, abandoned, applied, one settled late, and decisions
// of every kind (one with bytes PostgreSQL cannot hold), made on host-a.
func copySource(t *testing.T, db string) *Journal {
	t.Helper()
	ctx := context.Background()
	clock := &testClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	j, err := Open(ctx, db, Options{Host: "host-a", Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	lost := func(n int) int64 {
		c, err := j.RecordIntent(ctx, intent("create_order", fmt.Sprintf(`{"n":%d}`, n)))
		if err != nil {
			t.Fatal(err)
		}
		if err := j.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventLost, Reason: "idle timeout", Clock: "idle"}); err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	u1, u2, u3, u4, u5 := lost(1), lost(2), lost(3), lost(4), lost(5)
	ok, err := j.RecordIntent(ctx, intent("create_order", `{"n":6}`))
	if err != nil {
		t.Fatal(err)
	}
	steps := []error{
		j.RecordOutcome(ctx, ok.ID, 1, Outcome{Event: EventSucceeded, Result: []byte(`{"content":[{"type":"text","text":"order 6"}]}`)}),
		j.Decide(ctx, u1, DecisionInput{Action: ActionNote, Operator: "alice", Note: "asked the shop \xff\x00"}),
		j.Decide(ctx, u2, DecisionInput{Action: ActionQuery, Operator: "alice", Proposal: "applied", Evidence: []byte(`{"orders":[{"id":2}]}`)}),
		j.Decide(ctx, u2, DecisionInput{Action: ActionMark, Operator: "alice", Note: "order 2 is there"}),
		j.Decide(ctx, u3, DecisionInput{Action: ActionAbandon, Operator: "alice"}),
		j.RecordLateResult(ctx, u4, 1, Outcome{Event: EventSucceeded, CallerToldUnknown: true, Result: []byte(`{"content":[]}`)}),
	}
	if _, _, err := j.Retry(ctx, u5, RetryInput{Operator: "alice", Session: 2}); err != nil {
		t.Fatal(err)
	}
	steps = append(steps, j.RecordOutcome(ctx, u5, 2, Outcome{Event: EventFailed, Result: []byte(`{"isError":true,"content":[]}`)}))
	for i, err := range steps {
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	return j
}

func openCopyTarget(t *testing.T, db string) *Journal {
	t.Helper()
	j, err := Open(context.Background(), db, Options{Host: "host-b"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// checkCopied: every call of src is in dst with the same content (read
// back and compared here, not only by Copy), dst's chain is intact, and
// the copied unknown call still holds an identical new one back in dst.
func checkCopied(t *testing.T, src, dst *Journal, rep CopyReport) {
	t.Helper()
	ctx := context.Background()
	if rep.Calls != 6 || rep.Copied != 6 || rep.Decisions != 5 || len(rep.Copies) != 6 || !rep.Chain.Intact() {
		t.Fatalf("report: %+v", rep)
	}
	for _, cp := range rep.Copies {
		a, err := src.Get(ctx, cp.From)
		if err != nil {
			t.Fatal(err)
		}
		b, err := dst.Get(ctx, cp.To)
		if err != nil {
			t.Fatal(err)
		}
		if a.Key != b.Key || a.State != b.State || string(a.Args) != string(b.Args) || len(a.Attempts) != len(b.Attempts) ||
			len(a.Decisions) != len(b.Decisions) || CallChecksum(a) != CallChecksum(b) || cp.Checksum != CallChecksum(b) {
			t.Fatalf("call %d copied as %d differs:\n%+v\n%+v", cp.From, cp.To, a, b)
		}
		for i, d := range b.Decisions {
			if d.Host != "host-a" || d.Operator != a.Decisions[i].Operator || !d.At.Equal(a.Decisions[i].At) {
				t.Errorf("decision %d of call %d copied as %+v, from %+v", i, cp.To, d, a.Decisions[i])
			}
		}
	}
	chain, err := dst.VerifyChain(ctx)
	if err != nil || !chain.Intact() || chain.Decisions != 5 {
		t.Fatalf("target chain: %+v %v", chain, err)
	}
	in := intent("create_order", `{"n":1}`) // call 1 is unknown in the source
	in.Key, in.Hold = "another-key", true
	if _, err := dst.RecordIntent(ctx, in); !errors.Is(err, ErrHeld) {
		t.Fatalf("an identical new call in the target: %v, want it held by the copied unknown call", err)
	}
}

// TestCopyJournal: a journal copied into an empty one (separate secrets)
// arrives whole; copying again is refused, and with SkipExisting copies
// nothing more.
func TestCopyJournal(t *testing.T) {
	ctx := context.Background()
	src := copySource(t, testDB(t, ""))
	dst := openCopyTarget(t, testDB(t, ""))
	rep, err := Copy(ctx, src, dst, CopyOptions{Fingerprints: testFingerprints})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Resealed != 6 {
		t.Errorf("resealed %d fingerprints, want 6 (the secrets differ)", rep.Resealed)
	}
	checkCopied(t, src, dst, rep)

	_, err = Copy(ctx, src, dst, CopyOptions{Fingerprints: testFingerprints})
	var refused *CopyRefusedError
	if !errors.As(err, &refused) || len(refused.Calls) != 6 {
		t.Fatalf("second copy: %v, want refused for the 6 keys already there", err)
	}
	again, err := Copy(ctx, src, dst, CopyOptions{Fingerprints: testFingerprints, SkipExisting: true})
	if err != nil || again.Skipped != 6 || again.Copied != 0 {
		t.Fatalf("copy with SkipExisting: %+v %v", again, err)
	}
	if n, err := dst.Counts(ctx); err != nil || total(n) != 6 {
		t.Fatalf("target holds %v calls (%v), want 6", n, err)
	}
}

// TestCopySQLiteFileToPostgreSQL is the move the feature exists for.
func TestCopySQLiteFileToPostgreSQL(t *testing.T) {
	firstRunOnly(t)
	ctx := context.Background()
	src := copySource(t, filepath.Join(t.TempDir(), "mine.db"))
	dst := openCopyTarget(t, pgtest.Database(t))
	rep, err := Copy(ctx, src, dst, CopyOptions{Fingerprints: testFingerprints})
	if err != nil {
		t.Fatal(err)
	}
	checkCopied(t, src, dst, rep)
}

// TestCopyRefusals: nothing is copied from a journal with a call in
// flight, nor an open call whose fingerprint cannot be sealed again
// (unless Unheld), nor a call whose key the target holds for other content.
func TestCopyRefusals(t *testing.T) {
	ctx := context.Background()
	refused := func(t *testing.T, err error) *CopyRefusedError {
		t.Helper()
		var r *CopyRefusedError
		if !errors.As(err, &r) {
			t.Fatalf("copy: %v, want a *CopyRefusedError", err)
		}
		return r
	}
	empty := func(t *testing.T, dst *Journal) {
		t.Helper()
		if n, err := dst.Counts(ctx); err != nil || total(n) != 0 {
			t.Fatalf("a refused copy wrote %v calls (%v)", n, err)
		}
	}

	t.Run("in flight", func(t *testing.T) {
		src := copySource(t, testDB(t, ""))
		c, err := src.RecordIntent(ctx, intent("create_order", `{"n":99}`))
		if err != nil {
			t.Fatal(err)
		}
		dst := openCopyTarget(t, testDB(t, ""))
		r := refused(t, func() error { _, err := Copy(ctx, src, dst, CopyOptions{Fingerprints: testFingerprints}); return err }())
		if len(r.Calls) != 1 || r.Calls[0] != c.ID {
			t.Errorf("refusal names %v, want call %d", r.Calls, c.ID)
		}
		empty(t, dst)
	})

	t.Run("fingerprint not carried", func(t *testing.T) {
		src := copySource(t, testDB(t, ""))
		dst := openCopyTarget(t, testDB(t, ""))
		none := func(Call) []string { return nil } // as for redacted arguments
		r := refused(t, func() error { _, err := Copy(ctx, src, dst, CopyOptions{Fingerprints: none}); return err }())
		if len(r.Calls) != 3 { // unknown 1, late-settled 4, failed 5
			t.Errorf("refusal names %v, want the 3 open calls", r.Calls)
		}
		empty(t, dst)
		rep, err := Copy(ctx, src, dst, CopyOptions{Fingerprints: none, Unheld: true})
		if err != nil || rep.Copied != 6 || len(rep.Unheld) != 3 {
			t.Fatalf("copy with Unheld: %+v %v", rep, err)
		}
		in := intent("create_order", `{"n":1}`)
		in.Key, in.Hold = "another-key", true
		if _, err := dst.RecordIntent(ctx, in); err != nil {
			t.Fatalf("an uncarried fingerprint held a call back: %v", err)
		}
	})

	t.Run("same key, other content", func(t *testing.T) {
		src := copySource(t, testDB(t, ""))
		dst := openCopyTarget(t, testDB(t, ""))
		other := intent("create_order", `{"n":1}`) // call 1's key, but succeeded here
		c, err := dst.RecordIntent(ctx, other)
		if err != nil {
			t.Fatal(err)
		}
		if err := dst.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventSucceeded, Result: []byte(`{"content":[]}`)}); err != nil {
			t.Fatal(err)
		}
		refused(t, func() error {
			_, err := Copy(ctx, src, dst, CopyOptions{Fingerprints: testFingerprints, SkipExisting: true})
			return err
		}())
		if n, err := dst.Counts(ctx); err != nil || total(n) != 1 {
			t.Fatalf("a refused copy changed the target: %v calls (%v)", n, err)
		}
	})
}

func total(counts map[State]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// TestCopyKeepsCompensationLinks: a cancel names the call it undoes by id;
// in a target whose ids are already taken the link must follow the copy,
// not point at whatever call has the old number there.
func TestCopyKeepsCompensationLinks(t *testing.T) {
	ctx := context.Background()
	src := openTest(t, "")
	orig, err := src.RecordIntent(ctx, intent("create_order", `{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := src.RecordOutcome(ctx, orig.ID, 1, Outcome{Event: EventLost, Reason: "idle timeout", Clock: "idle"}); err != nil {
		t.Fatal(err)
	}
	if err := src.Decide(ctx, orig.ID, DecisionInput{Action: ActionCompensate, Operator: "alice"}); err != nil {
		t.Fatal(err)
	}
	in := intent("cancel_order", `{"order_key":"k"}`)
	in.Compensates = orig.ID
	cancel, err := src.RecordIntent(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.RecordOutcome(ctx, cancel.ID, 1, Outcome{Event: EventSucceeded, Result: []byte(`{"content":[]}`)}); err != nil {
		t.Fatal(err)
	}

	dst := openCopyTarget(t, testDB(t, ""))
	for n := 0; n < 3; n++ { // the target's own calls take ids 1–3
		c, err := dst.RecordIntent(ctx, intent("other_tool", fmt.Sprintf(`{"n":%d}`, n)))
		if err != nil {
			t.Fatal(err)
		}
		if err := dst.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventSucceeded, Result: []byte(`{"content":[]}`)}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Copy(ctx, src, dst, CopyOptions{Fingerprints: testFingerprints})
	if err != nil || len(rep.Copies) != 2 {
		t.Fatalf("copy: %+v, %v", rep, err)
	}
	to := map[int64]int64{}
	for _, cp := range rep.Copies {
		to[cp.From] = cp.To
	}
	gotCancel, err := dst.Get(ctx, to[cancel.ID])
	if err != nil || gotCancel.Compensates != to[orig.ID] || to[orig.ID] == orig.ID {
		t.Fatalf("the copied cancel (%d) compensates %d, want %d, the copied order (%v)", to[cancel.ID], gotCancel.Compensates, to[orig.ID], err)
	}
	gotOrig, err := dst.Get(ctx, to[orig.ID])
	if err != nil || len(gotOrig.CompensatedBy) != 1 || gotOrig.CompensatedBy[0] != to[cancel.ID] {
		t.Fatalf("the copied order is compensated by %v, want [%d] (%v)", gotOrig.CompensatedBy, to[cancel.ID], err)
	}
}
