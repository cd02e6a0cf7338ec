package pending

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// unknownCallIn records a write whose answer was lost: the state two
// operators race to decide.
func unknownCallIn(t *testing.T, j *Journal, args string) int64 {
	t.Helper()
	ctx := context.Background()
	c, err := j.RecordIntent(ctx, intent("create_order", args))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventLost, Reason: "idle timeout", Clock: "idle"}); err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// TestDecisionsRecordTheirHost: each decision carries the host of the
// journal that made it, and the log verifies with it.
func TestDecisionsRecordTheirHost(t *testing.T) {
	ctx := context.Background()
	j, err := Open(ctx, testDB(t, ""), Options{Host: "host-a"})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	id := unknownCallIn(t, j, `{"n":1}`)
	if err := j.Decide(ctx, id, DecisionInput{Action: ActionNote, Operator: "alice", Note: "looking"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.Retry(ctx, id, RetryInput{Operator: "alice", Session: 2}); err != nil {
		t.Fatal(err)
	}
	c, err := j.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Decisions) != 2 {
		t.Fatalf("decisions = %+v, want 2", c.Decisions)
	}
	for _, d := range c.Decisions {
		if d.Host != "host-a" {
			t.Errorf("decision %d (%s) host = %q, want host-a", d.ID, d.Action, d.Host)
		}
	}
	rep, err := j.VerifyChain(ctx)
	if err != nil || !rep.Intact() || rep.Decisions != 2 {
		t.Fatalf("verify: %+v %+v %v", rep, rep.Broken, err)
	}
}

// TestLoserOfADecisionIsToldWhoWon: two operators on two machines decide
// the same unknown call; the second is refused with who decided it, where,
// how and how long ago, and nothing of it is written.
func TestLoserOfADecisionIsToldWhoWon(t *testing.T) {
	ctx := context.Background()
	db := testDB(t, "")
	clock := &testClock{t: time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)}
	a, err := Open(ctx, db, Options{Host: "host-a", Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, db, Options{Host: "host-b", Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	id := unknownCallIn(t, a, `{"n":1}`)

	if _, _, err := b.Retry(ctx, id, RetryInput{Operator: "bob", Session: 2}); err != nil {
		t.Fatal(err)
	}
	clock.t = clock.t.Add(2 * time.Second)
	err = a.Decide(ctx, id, DecisionInput{Action: ActionAbandon, Operator: "alice", Note: "cancel it"})
	var decided *DecidedError
	if !errors.As(err, &decided) {
		t.Fatalf("abandon after bob's retry: %v (%T), want a *DecidedError", err, err)
	}
	if !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("a DecidedError does not wrap ErrIllegalTransition: %v", err)
	}
	want := DecidedError{CallID: id, Action: ActionRetry, Operator: "bob", Host: "host-b", State: StateInFlight}
	got := *decided
	got.Refused, got.Ago = nil, 0
	if got != want || decided.Ago < 2*time.Second || decided.Ago >= 3*time.Second {
		t.Errorf("refusal = %+v, want %+v", got, want)
	}
	const msg = "was just decided by bob on host-b (retry, 2s ago) and is in_flight: cannot abandon it; nothing was done"
	if s := err.Error(); !strings.Contains(s, msg) {
		t.Errorf("message = %q, want it to say %q", s, msg)
	}
	c, err := a.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Decisions) != 1 || c.State != StateInFlight {
		t.Fatalf("after the refusal: state %s, decisions %+v; want in_flight and bob's retry only", c.State, c.Decisions)
	}

	// An hour later it is "already", not "just".
	clock.t = clock.t.Add(time.Hour)
	if err := a.RecordOutcome(ctx, id, 2, Outcome{Event: EventLost, Reason: "idle timeout", Clock: "idle"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Decide(ctx, id, DecisionInput{Action: ActionMark, Operator: "bob"}); err != nil {
		t.Fatal(err)
	}
	clock.t = clock.t.Add(time.Hour)
	err = a.Decide(ctx, id, DecisionInput{Action: ActionAbandon, Operator: "alice"})
	if err == nil || !strings.Contains(err.Error(), "was already decided by bob on host-b (mark, 1h ago) and is applied") {
		t.Errorf("abandon of an applied call: %v", err)
	}
}

// TestRefusalWithoutADecisionStaysPlain: a call the server's answer
// settled (no operator decided it) is refused as before, naming no one.
func TestRefusalWithoutADecisionStaysPlain(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, "")
	c, err := j.RecordIntent(ctx, intent("create_order", `{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventSucceeded, Result: []byte(`{"content":[]}`)}); err != nil {
		t.Fatal(err)
	}
	err = j.Decide(ctx, c.ID, DecisionInput{Action: ActionAbandon, Operator: "alice"})
	var te *TransitionError
	var decided *DecidedError
	if !errors.As(err, &te) || errors.As(err, &decided) {
		t.Fatalf("abandon of a succeeded call: %v (%T), want a plain *TransitionError", err, err)
	}
}

// TestConcurrentDecisionsOneWins: many operators, each with a journal of
// their own on one database, abandon or retry the same unknown call at
// once: exactly one decision is written, and every other one is told who
// won.
func TestConcurrentDecisionsOneWins(t *testing.T) {
	ctx := context.Background()
	db := testDB(t, "")
	const n = 6
	js := make([]*Journal, n)
	for i := range js {
		j, err := Open(ctx, db, Options{Host: "host-" + string(rune('a'+i))})
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		js[i] = j
	}
	id := unknownCallIn(t, js[0], `{"n":1}`)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, j := range js {
		wg.Go(func() {
			<-start
			if i%2 == 0 {
				_, _, errs[i] = j.Retry(ctx, id, RetryInput{Operator: "op", Session: 2})
			} else {
				errs[i] = j.Decide(ctx, id, DecisionInput{Action: ActionAbandon, Operator: "op"})
			}
		})
	}
	close(start)
	wg.Wait()
	won := -1
	for i, err := range errs {
		var decided *DecidedError
		switch {
		case err == nil:
			if won >= 0 {
				t.Fatalf("operators %d and %d both won", won, i)
			}
			won = i
		case errors.As(err, &decided):
		default:
			t.Fatalf("operator %d: %v, want success or a *DecidedError", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no decision won")
	}
	for i, err := range errs {
		var decided *DecidedError
		if errors.As(err, &decided) && decided.Host != "host-"+string(rune('a'+won)) {
			t.Errorf("operator %d told %q won, but operator %d (host-%c) did", i, decided.Host, won, 'a'+won)
		}
	}
	c, err := js[0].Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Decisions) != 1 {
		t.Fatalf("decisions written: %+v, want exactly one", c.Decisions)
	}
}

// TestChangedWakesWatchers: on PostgreSQL a write by another journal
// handle (another process) closes the channel Changed gave every watcher,
// at its commit, so consoles redraw without waiting for a poll. On SQLite
// there is nothing to wait on: Changed is nil and DataVersion is polled.
func TestChangedWakesWatchers(t *testing.T) {
	ctx := context.Background()
	db := testDB(t, "")
	a := openTest(t, db)
	b := openTest(t, db)
	if testBackend != "postgres" {
		if b.Changed() != nil {
			t.Fatal("Changed on SQLite is not nil")
		}
		return
	}
	// The listener starts on first use and counts its LISTEN as a change:
	// wait for that, so that what wakes the watchers below is the write.
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if v, _ := b.DataVersion(ctx); v > 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the listener did not start")
		}
	}
	before, _ := b.DataVersion(ctx)
	w1, w2 := b.Changed(), b.Changed()
	if _, err := a.RecordIntent(ctx, intent("create_order", `{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	for i, w := range []<-chan struct{}{w1, w2} {
		select {
		case <-w:
		case <-time.After(10 * time.Second): // a bound on a hang, not a measurement
			t.Fatalf("watcher %d was not woken by the other journal's write", i)
		}
	}
	if after, _ := b.DataVersion(ctx); after == before {
		t.Fatal("woken, but DataVersion did not move")
	}
	select {
	case <-b.Changed():
		t.Fatal("a fresh Changed is closed with no write since")
	default:
	}
}

// loseCommitReply makes the next COMMIT of j fail without an answer: after
// committing (committed) or before (not). Later commits go through.
func loseCommitReply(j *Journal, committed bool) {
	var once sync.Once
	j.pg.commitFault = func(commit func() error) error {
		faulted := false
		once.Do(func() { faulted = true })
		if !faulted {
			return commit()
		}
		if committed {
			if err := commit(); err != nil {
				return err
			}
		}
		return io.ErrUnexpectedEOF
	}
}

// TestIntentCommitUnconfirmed: an intent whose COMMIT gets no reply (the
// connection to PostgreSQL broke) is refused either way, so nothing is
// sent; if it had committed, it is settled as failed, not sent, rather
// than left in flight to be recovered one day as unknown.
func TestIntentCommitUnconfirmed(t *testing.T) {
	if testBackend != "postgres" {
		t.Skip("SQLite answers every COMMIT")
	}
	ctx := context.Background()

	t.Run("committed, reply lost", func(t *testing.T) {
		j := openTest(t, "")
		loseCommitReply(j, true)
		_, err := j.RecordIntent(ctx, intent("create_order", `{"n":1}`))
		if !errors.Is(err, ErrCommitUnconfirmed) || !strings.Contains(err.Error(), "recorded as call 1, now failed (not sent)") {
			t.Fatalf("intent: %v", err)
		}
		c, err := j.Get(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if c.State != StateFailed || c.Reason != ReasonIntentUnconfirmed || c.Attempts[0].Outcome != OutcomeFailed {
			t.Fatalf("the unconfirmed intent is %s (%q), attempt %s; want failed, not sent", c.State, c.Reason, c.Attempts[0].Outcome)
		}
	})

	t.Run("not committed", func(t *testing.T) {
		j := openTest(t, "")
		loseCommitReply(j, false)
		_, err := j.RecordIntent(ctx, intent("create_order", `{"n":1}`))
		if !errors.Is(err, ErrCommitUnconfirmed) || !strings.Contains(err.Error(), "it was not recorded, and nothing was sent") {
			t.Fatalf("intent: %v", err)
		}
		if n, err := j.Counts(ctx); err != nil || total(n) != 0 {
			t.Fatalf("journal holds %v calls (%v), want none", n, err)
		}
		// The broken connection was dropped, not given back with its
		// transaction open: the same intent now commits.
		if _, err := j.RecordIntent(ctx, intent("create_order", `{"n":1}`)); err != nil {
			t.Fatalf("the intent again: %v", err)
		}
	})
}

// TestRetryCommitUnconfirmed: a retry whose COMMIT gets no reply is
// refused either way, so nothing is sent; if it had committed, its attempt
// is ended not sent, and the call goes back to where it was (unknown stays
// unknown: its first attempt may have taken effect), rather than stay in
// flight under a live process until recovery.
func TestRetryCommitUnconfirmed(t *testing.T) {
	if testBackend != "postgres" {
		t.Skip("SQLite answers every COMMIT")
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		first     Outcome
		committed bool
		want      State
		attempts  int
		msg       string
	}{
		{"unknown, committed, reply lost", Outcome{Event: EventLost, Reason: "idle timeout", Clock: "idle"}, true, StateUnknown, 2, "recorded as attempt 2, now ended not sent"},
		{"failed, committed, reply lost", Outcome{Event: EventFailed, Reason: "server said no"}, true, StateFailed, 2, "recorded as attempt 2, now ended not sent"},
		{"unknown, not committed", Outcome{Event: EventLost, Reason: "idle timeout", Clock: "idle"}, false, StateUnknown, 1, "was not recorded, and nothing was sent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := openTest(t, "")
			c, err := j.RecordIntent(ctx, intent("create_order", `{"n":1}`))
			if err != nil {
				t.Fatal(err)
			}
			if err := j.RecordOutcome(ctx, c.ID, 1, tc.first); err != nil {
				t.Fatal(err)
			}
			loseCommitReply(j, tc.committed)
			_, _, err = j.Retry(ctx, c.ID, RetryInput{Operator: "alice", Session: 2})
			if !errors.Is(err, ErrCommitUnconfirmed) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("retry: %v; want ErrCommitUnconfirmed saying %q", err, tc.msg)
			}
			got, err := j.Get(ctx, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != tc.want || len(got.Attempts) != tc.attempts {
				t.Fatalf("after the unconfirmed retry the call is %s with %d attempts; want %s with %d", got.State, len(got.Attempts), tc.want, tc.attempts)
			}
			last := got.Attempts[len(got.Attempts)-1]
			if last.EndedAt == nil {
				t.Fatalf("attempt %d is still open: %+v", last.N, last)
			}
			if tc.committed && !strings.HasPrefix(got.Reason, ReasonRetryUnconfirmed) {
				t.Fatalf("the call's reason %q does not say the retry was not sent", got.Reason)
			}
			// The call is decidable again: the same retry now commits.
			if _, a, err := j.Retry(ctx, c.ID, RetryInput{Operator: "alice", Session: 3}); err != nil || a.N != tc.attempts+1 {
				t.Fatalf("the retry again: attempt %d, %v; want attempt %d", a.N, err, tc.attempts+1)
			}
		})
	}
}
