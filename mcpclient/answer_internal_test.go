package mcpclient

import (
	"context"
	"fmt"
	"strconv"
	"testing"
)

// The tap remembers the answered requests of ended calls, for their second
// answers, within a bound: the last answeredWindow of them, each heard at
// most maxSecondAnswers more times.
func TestAnsweredWindowIsBounded(t *testing.T) {
	q := newLateQueue()
	tp := newTap(1, q)
	w := &tapWriter{t: tp, w: pipeEnd{max: -1}, broken: func() {}}
	answer := func(i int) []byte {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":"t-%d","result":{"content":[]}}`, i)
	}
	n := answeredWindow + 100
	for i := 0; i < n; i++ {
		c := &wireCall{token: fmt.Sprintf("t-%d", i), cancel: func(error) {}}
		tp.register(c)
		if _, err := w.send(context.Background(), c, strconv.Quote(c.token), []byte("{}\n")); err != nil {
			t.Fatal(err)
		}
		if _, deliver := tp.incoming(answer(i)); deliver != nil {
			deliver()
		}
		if out := tp.finish(c, nil, context.Background(), context.Background(), func() {}); out.Kind != DeliveryResult {
			t.Fatalf("call %d: %+v", i, out)
		}
	}
	if len(tp.answered) != answeredWindow || int(tp.tracked.Load()) != answeredWindow || len(tp.byID) != 0 {
		t.Fatalf("remembered %d answered requests (tracked %d, %d waiting), want %d", len(tp.answered), tp.tracked.Load(), len(tp.byID), answeredWindow)
	}
	if ours, _ := tp.incoming(answer(n - answeredWindow - 1)); ours {
		t.Error("an answer to a request answered before the window was taken")
	}
	for k := 0; k < 3*maxSecondAnswers; k++ {
		for _, i := range []int{n - answeredWindow, n - 1} {
			if ours, deliver := tp.incoming(answer(i)); !ours || deliver != nil {
				t.Fatalf("a second answer to t-%d: ours %v, delivered to its call %v", i, ours, deliver != nil)
			}
		}
	}
	q.box.mu.Lock()
	items := q.box.waiting
	q.box.mu.Unlock()
	seconds := map[string]int{}
	for _, it := range items {
		if !it.second {
			t.Errorf("queued as a first answer: %+v", it)
		}
		seconds[it.rpcID]++
	}
	for _, id := range []string{fmt.Sprintf("t-%d", n-answeredWindow), fmt.Sprintf("t-%d", n-1)} {
		if seconds[id] != maxSecondAnswers {
			t.Errorf("%s: %d second answers passed on, want %d", id, seconds[id], maxSecondAnswers)
		}
	}
}
