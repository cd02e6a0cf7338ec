package metrics

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

func TestOutcome(t *testing.T) {
	unknown := func(reason string) guard.Observation {
		return guard.Observation{Kind: pending.KindWrite, Result: guard.Result{State: pending.StateUnknown,
			Call: pending.Call{Reason: reason}}}
	}
	for _, tc := range []struct {
		o    guard.Observation
		want string
	}{
		{guard.Observation{Kind: pending.KindWrite, Result: guard.Result{State: pending.StateSucceeded}}, "succeeded"},
		{guard.Observation{Kind: pending.KindRead, Result: guard.Result{State: pending.StateFailed}}, "failed"},
		{guard.Observation{Kind: pending.KindWrite, Result: guard.Result{State: pending.StateFailed}, Err: errors.New("not sent")}, "not_sent"},
		{unknown("idle timeout"), "timeout"},
		{unknown("absolute timeout"), "timeout"},
		{unknown("connection lost"), "unknown"},
		{unknown("cancelled: the operator quit"), "unknown"},
		{guard.Observation{Kind: pending.KindWrite, Result: guard.Result{State: pending.StateUnknown}, Err: &guard.HeldError{CallID: 3}}, "held"},
		{guard.Observation{Err: errors.New("no such tool")}, "refused"},
	} {
		if got := Outcome(tc.o); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.o, got, tc.want)
		}
	}
}

// A hostile server's tool names: control sequences do not reach the
// scrape, a name is at most 64 bytes of valid UTF-8, and however many
// names there are, at most maxNames are labels (the rest count as other).
func TestHostileNamesAreBounded(t *testing.T) {
	m := New(Options{Server: func() string { return "shop\x1b[31m" }})
	for i := range 200 {
		m.ObserveCall(guard.Observation{Tool: fmt.Sprintf("tool-%d\x1b]0;pwned\x07%s", i, strings.Repeat("é", 40)),
			Kind: pending.KindRead, Result: guard.Result{State: pending.StateSucceeded}})
	}
	if n := testutil.CollectAndCount(m.calls); n != maxNames+1 {
		t.Errorf("%d series, want %d (maxNames and other)", n, maxNames+1)
	}
	if got := testutil.ToFloat64(m.calls.WithLabelValues("shop[31m", "other", "read", "succeeded")); got != 200-maxNames {
		t.Errorf("other = %v, want %d", got, 200-maxNames)
	}
	for v := range m.tools.seen {
		if len(v) > 64 || strings.ContainsAny(v, "\x1b\x07") || !strings.HasPrefix(v, "tool-") {
			t.Errorf("label %q: want a cleaned name of at most 64 bytes", v)
		}
	}
}
