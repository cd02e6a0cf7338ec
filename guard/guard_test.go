package guard

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

const queryPolicy = `
[tools.create_order]
query_tool = "find_orders"
query_args = { idempotency_key = "{key}" }
`

// The core promise: a write that timed out is sent once, and no path of
// the guard sends it again except an operator's Retry, with the same key.
func TestTimedOutWriteIsNeverResent(t *testing.T) {
	h := newHarness(t, queryPolicy)
	h.f.set("create_order", always(lostOutcome()))
	h.f.set("find_orders", always(okOutcome(map[string]any{"orders": []any{}})))
	ctx := context.Background()

	res, err := h.call(Request{Tool: "create_order", Args: order(2)})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != pending.StateUnknown || res.Call.Reason != "idle timeout" {
		t.Fatalf("state %s (%q), want unknown (idle timeout)", res.State, res.Call.Reason)
	}
	id, key := res.Call.ID, res.Key
	if h.writes() != 1 {
		t.Fatalf("%d writes sent", h.writes())
	}
	first := h.f.sent("create_order")[0]
	if first.Opts.Key != key || first.Opts.KeyArg != "idempotency_key" {
		t.Errorf("first send: key %q arg %q, want %q idempotency_key", first.Opts.Key, first.Opts.KeyArg, key)
	}

	// A late answer to the cancel is evidence; nothing is sent.
	h.g.HandleLateResult(mcpclient.LateResult{Key: key, Tool: "create_order", Session: 1,
		RPCError: &mcpclient.RPCError{Code: -32603, Message: "context canceled"}, AfterCancel: true})
	// Watch polls and recovers; nothing is sent.
	wctx, stop := context.WithCancel(ctx)
	changed := Watch(wctx, h.j, time.Millisecond, time.Millisecond, nil)
	if err := h.g.Note(ctx, id, "looking"); err != nil {
		t.Fatal(err)
	}
	<-changed
	stop()
	for range changed {
	}
	// Another guard on another handle of the same journal (another
	// process): it holds the same call back and queries; it does not send.
	j2 := openJournal(t, h.path)
	g2 := New(j2, h.f, Options{Policy: parsePolicy(t, queryPolicy), Operator: "other"})
	if _, err := g2.Call(ctx, Request{Tool: "create_order", Args: order(2)}); !errors.Is(err, ErrHeld) {
		t.Errorf("second guard, same call: %v, want held", err)
	}
	if _, err := g2.Query(ctx, id, QueryOptions{}); err != nil {
		t.Errorf("query: %v", err)
	}
	if _, err := h.g.Query(ctx, id, QueryOptions{}); err != nil {
		t.Errorf("query: %v", err)
	}
	if c := h.get(id); c.State != pending.StateUnknown || len(c.Attempts) != 1 {
		t.Errorf("after the non-sending paths: %s with %d attempts", c.State, len(c.Attempts))
	}
	if h.writes() != 1 {
		t.Fatalf("%d writes sent before any retry", h.writes())
	}

	// Only the operator's retry sends it again, with the same key.
	h.f.set("create_order", always(okOutcome(map[string]any{"order_id": "o1"})))
	res, err = h.g.Retry(ctx, id, RetryOptions{Note: "checked, not there"})
	if err != nil {
		t.Fatal(err)
	}
	sent := h.f.sent("create_order")
	if len(sent) != 2 {
		t.Fatalf("%d writes after retry", len(sent))
	}
	if sent[1].Opts.Key != key || sent[1].Opts.KeyArg != "idempotency_key" {
		t.Errorf("retry key %q arg %q, want %q", sent[1].Opts.Key, sent[1].Opts.KeyArg, key)
	}
	if !reflect.DeepEqual(jsonOf(t, sent[1].Args), jsonOf(t, sent[0].Args)) {
		t.Errorf("retry args %v, first %v", sent[1].Args, sent[0].Args)
	}
	c := h.get(id)
	if res.State != pending.StateSucceeded || c.State != pending.StateSucceeded || len(c.Attempts) != 2 {
		t.Errorf("after retry: %s/%s, %d attempts", res.State, c.State, len(c.Attempts))
	}
	if got := actions(c); !reflect.DeepEqual(got, []pending.Action{pending.ActionQuery, pending.ActionNote, pending.ActionQuery, pending.ActionQuery, pending.ActionRetry}) {
		t.Errorf("decisions %v", got)
	}
	if d := c.Decisions[len(c.Decisions)-1]; d.Operator != "tester" || d.Note != "checked, not there" || d.Attempt != 2 {
		t.Errorf("retry decision %+v", d)
	}
	// A succeeded call cannot be retried.
	if _, err := h.g.Retry(ctx, id, RetryOptions{}); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("retry of a succeeded call: %v", err)
	}
	if h.writes() != 2 {
		t.Errorf("%d writes in the end, want 2", h.writes())
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWriteIntentAndSend(t *testing.T) {
	h := newHarness(t, `
[defaults]
write_timeout = "12s"
max_total = "3m"
[tools.pay]
redact = ["card_number"]
timeout = "4s"
`)
	ctx := context.Background()
	res, err := h.call(Request{Tool: "create_order", Args: order(2)})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != pending.StateSucceeded || res.Replayed || res.Stored || res.Call.ID == 0 {
		t.Errorf("result %+v", res)
	}
	if err := ValidateKey(res.Key); err != nil {
		t.Errorf("generated key: %v", err)
	}
	sent := h.f.sent("create_order")[0]
	if sent.Opts.Key != res.Key || sent.Opts.IdleTimeout != 12*time.Second || sent.Opts.MaxTotal != 3*time.Minute {
		t.Errorf("options %+v", sent.Opts)
	}
	if _, ok := sent.Args["idempotency_key"]; ok {
		t.Errorf("guard put the key in the args itself (the session does): %v", sent.Args)
	}
	c := h.get(res.Call.ID)
	if c.Kind != pending.KindWrite || c.KindSource != pending.KindFromAnnotation || c.Server != "demo-orders" || c.Key != res.Key {
		t.Errorf("call %+v", c)
	}
	if string(c.Args) != `{"buyer":"alice","item":"widget","quantity":2}` || c.Fingerprint != h.j.Seal(Fingerprint(order(2), "idempotency_key")) {
		t.Errorf("stored args %s fingerprint %s", c.Args, c.Fingerprint)
	}
	if a := c.Attempts[0]; a.Outcome != pending.OutcomeSucceeded || a.Session != 1 || a.RPCID == "" || string(a.Result) == "" {
		t.Errorf("attempt %+v", a)
	}

	// A tool without a key argument: the key goes in _meta only; redacted
	// values never reach the journal; per-tool clock.
	res, err = h.call(Request{Tool: "pay", Args: map[string]any{"amount": 5, "card_number": "4111111111111111"}})
	if err != nil {
		t.Fatal(err)
	}
	pay := h.f.sent("pay")[0]
	if pay.Opts.KeyArg != "" || pay.Opts.Key != res.Key || pay.Opts.IdleTimeout != 4*time.Second || pay.Args["card_number"] != "4111111111111111" {
		t.Errorf("pay sent %+v", pay)
	}
	c = h.get(res.Call.ID)
	if strings.Contains(string(c.Args), "4111") || !strings.Contains(string(c.Args), Redacted) || c.KindSource != pending.KindFromDefault {
		t.Errorf("pay stored %+v", c)
	}

	// A read is sent without a key and never journaled.
	if _, err := h.call(Request{Tool: "get_budget", Args: map[string]any{"buyer": "alice"}}); err != nil {
		t.Fatal(err)
	}
	if b := h.f.sent("get_budget")[0]; b.Opts.Key != "" || b.Opts.KeyArg != "" {
		t.Errorf("read sent with a key: %+v", b.Opts)
	}
	if n := len(h.calls()); n != 2 {
		t.Errorf("%d calls journaled, want the 2 writes", n)
	}

	// --timeout beats the policy.
	h2 := newHarness(t, "[tools.create_order]\ntimeout = \"9s\"\n")
	h2.g.opts.WriteTimeout = 2 * time.Second
	if _, err := h2.call(Request{Tool: "create_order", Args: order(1)}); err != nil {
		t.Fatal(err)
	}
	if o := h2.f.sent("create_order")[0].Opts; o.IdleTimeout != 2*time.Second || o.MaxTotal != DefaultMaxTotal {
		t.Errorf("--timeout: %v/%v", o.IdleTimeout, o.MaxTotal)
	}

	// An unknown tool is bad input and sends nothing.
	if _, err := h.call(Request{Tool: "nope"}); !errors.Is(err, ErrBadInput) {
		t.Errorf("unknown tool: %v", err)
	}
	_ = ctx
}

func TestReadsRetriedNeverJournaled(t *testing.T) {
	rpcErr := &mcpclient.RPCError{Code: -32602, Message: "unknown buyer"}
	notSent := mcpclient.Delivery{Kind: mcpclient.DeliveryNotSent, Err: errors.New("server will not start")}
	for _, tc := range []struct {
		name     string
		policy   string
		answers  []mcpclient.Delivery // the last one repeats
		sends    int
		state    pending.State
		errIs    error
		errorHas string // in Result.Error
	}{
		{"answered first time", "", []mcpclient.Delivery{okOutcome(map[string]any{"budget_left": 90})}, 1, pending.StateSucceeded, nil, ""},
		{"timeouts then an answer", "", []mcpclient.Delivery{lostOutcome(), lostOutcome(), okOutcome(map[string]any{"budget_left": 90})}, 3, pending.StateSucceeded, nil, ""},
		{"no answer after read_attempts", "", []mcpclient.Delivery{lostOutcome()}, DefaultReadAttempts, pending.StateFailed, nil, "after 3 attempts"},
		{"policy read_attempts", "[defaults]\nread_attempts = 2\n", []mcpclient.Delivery{lostOutcome()}, 2, pending.StateFailed, nil, "after 2 attempts"},
		{"one attempt", "[defaults]\nread_attempts = 1\n", []mcpclient.Delivery{lostOutcome(), okOutcome(nil)}, 1, pending.StateFailed, nil, "after 1 attempts"},
		{"rpc error is not retried", "", []mcpclient.Delivery{{Kind: mcpclient.DeliveryRPCError, RPCError: rpcErr, Err: rpcErr}}, 1, pending.StateFailed, nil, "unknown buyer"},
		{"tool error is not retried", "", []mcpclient.Delivery{rawOutcome(`{"content":[],"isError":true}`)}, 1, pending.StateFailed, nil, ""},
		{"server unavailable", "[defaults]\nread_attempts = 2\n", []mcpclient.Delivery{notSent}, 2, pending.StateFailed, ErrUnavailable, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, tc.policy)
			h.f.set("get_budget", func(c fakeCall) mcpclient.Delivery {
				return tc.answers[min(c.N, len(tc.answers))-1]
			})
			res, err := h.call(Request{Tool: "get_budget", Args: map[string]any{"buyer": "alice"}})
			if tc.errIs != nil {
				if !errors.Is(err, tc.errIs) {
					t.Errorf("err = %v, want %v", err, tc.errIs)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if n := len(h.f.sent("get_budget")); n != tc.sends {
				t.Errorf("%d sends, want %d", n, tc.sends)
			}
			if res.State != tc.state || res.Call.ID != 0 || res.Key != "" {
				t.Errorf("result %+v", res)
			}
			if tc.errorHas != "" && !strings.Contains(string(res.Error), tc.errorHas) {
				t.Errorf("error %s, want %q", res.Error, tc.errorHas)
			}
			if n := len(h.calls()); n != 0 {
				t.Errorf("%d calls journaled for a read", n)
			}
		})
	}
}

func TestResendHold(t *testing.T) {
	h := newHarness(t, "")
	h.f.set("create_order", always(lostOutcome()))
	first, err := h.call(Request{Tool: "create_order", Args: order(2)})
	if err != nil || first.State != pending.StateUnknown {
		t.Fatalf("%+v %v", first, err)
	}

	for _, args := range []map[string]any{
		order(2),
		{"quantity": 2, "buyer": "alice", "item": "widget"},
		// The key argument is not part of the operation.
		{"item": "widget", "quantity": 2, "buyer": "alice", "idempotency_key": "caller-key-0000000001"},
	} {
		res, err := h.call(Request{Tool: "create_order", Args: args})
		var held *HeldError
		if !errors.As(err, &held) || !errors.Is(err, ErrHeld) {
			t.Fatalf("identical call %v: %v", args, err)
		}
		if held.CallID != first.Call.ID || held.State != pending.StateUnknown || held.Reason != "idle timeout" || res.Call.ID != first.Call.ID {
			t.Errorf("held %+v, result %+v", held, res)
		}
	}
	if h.writes() != 1 || len(h.calls()) != 1 {
		t.Fatalf("held calls sent or journaled: %d writes, %d calls", h.writes(), len(h.calls()))
	}

	// Other arguments are another operation.
	if _, err := h.call(Request{Tool: "create_order", Args: order(3)}); err != nil {
		t.Fatal(err)
	}
	// --new says this is deliberately a second, identical order.
	again, err := h.call(Request{Tool: "create_order", Args: order(2), New: true})
	if err != nil {
		t.Fatal(err)
	}
	if again.Call.ID == first.Call.ID || again.Key == first.Key || h.writes() != 3 {
		t.Errorf("--new: call %d key %s, %d writes", again.Call.ID, again.Key, h.writes())
	}
	if sent := h.f.sent("create_order")[2]; sent.Opts.Key != again.Key {
		t.Errorf("--new sent key %s", sent.Opts.Key)
	}

	// Once the operator settles it, the hold is gone.
	if err := h.g.Abandon(context.Background(), first.Call.ID, "gave up"); err != nil {
		t.Fatal(err)
	}
	if err := h.g.Abandon(context.Background(), again.Call.ID, ""); err != nil {
		t.Fatal(err)
	}
	h.f.set("create_order", always(okOutcome(map[string]any{"order_id": "o9"})))
	if res, err := h.call(Request{Tool: "create_order", Args: order(2)}); err != nil || res.State != pending.StateSucceeded {
		t.Errorf("after abandon: %+v %v", res, err)
	}
	// A succeeded call holds nothing back.
	if _, err := h.call(Request{Tool: "create_order", Args: order(2)}); err != nil {
		t.Errorf("after success: %v", err)
	}
}

// A call still in flight holds an identical one back too.
func TestResendHoldInFlight(t *testing.T) {
	h := newHarness(t, "")
	release := make(chan struct{})
	h.f.arrived = make(chan fakeCall, 10)
	h.f.set("create_order", func(fakeCall) mcpclient.Delivery {
		<-release
		return okOutcome(map[string]any{"order_id": "o1"})
	})
	var wg sync.WaitGroup
	wg.Add(1)
	var first Result
	go func() {
		defer wg.Done()
		first, _ = h.call(Request{Tool: "create_order", Args: order(2)})
	}()
	<-h.f.arrived
	_, err := h.call(Request{Tool: "create_order", Args: order(2)})
	var held *HeldError
	if !errors.As(err, &held) || held.State != pending.StateInFlight {
		t.Errorf("identical call while in flight: %v", err)
	}
	close(release)
	wg.Wait()
	if first.State != pending.StateSucceeded || h.writes() != 1 {
		t.Errorf("first %+v, %d writes", first, h.writes())
	}
}

func TestCallerKey(t *testing.T) {
	const k1, k2, k3 = "caller-key-000000000001", "caller-key-000000000002", "caller-key-000000000003"
	// Each subtest starts from its own harness with one call made with k1
	// (one write), so that it runs alone as it runs with the others.
	start := func(t *testing.T) (*harness, Result) {
		t.Helper()
		h := newHarness(t, "[tools.pay]\nredact = [\"card_number\"]\n")
		h.f.set("create_order", always(okOutcome(map[string]any{"order_id": "o1"})))
		first, err := h.call(Request{Tool: "create_order", Args: order(2), Key: k1})
		if err != nil || first.Key != k1 {
			t.Fatalf("first call: %+v %v; want key %s", first, err, k1)
		}
		if s := h.f.sent("create_order")[0].Opts; s.Key != k1 || s.KeyArg != "idempotency_key" {
			t.Errorf("sent key %q in %q, want %q in idempotency_key", s.Key, s.KeyArg, k1)
		}
		return h, first
	}

	t.Run("succeeded: stored result, nothing sent", func(t *testing.T) {
		h, first := start(t)
		for _, req := range []Request{
			{Tool: "create_order", Args: order(2), Key: k1},
			{Tool: "create_order", Args: map[string]any{"item": "widget", "quantity": 2, "buyer": "alice", "idempotency_key": k1}},
			{Tool: "create_order", Args: map[string]any{"item": "widget", "quantity": 2, "buyer": "alice", "idempotency_key": k1}, Key: k1},
		} {
			res, err := h.call(req)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Stored || !res.Replayed || res.State != pending.StateSucceeded || res.Call.ID != first.Call.ID ||
				string(res.Result) != string(first.Result) || res.Key != k1 {
				t.Errorf("%+v", res)
			}
		}
		if h.writes() != 1 {
			t.Errorf("%d writes, want 1 (the first call only)", h.writes())
		}
	})

	t.Run("different arguments: key reuse naming the fields", func(t *testing.T) {
		h, first := start(t)
		_, err := h.call(Request{Tool: "create_order", Args: map[string]any{"item": "gadget", "quantity": 3, "buyer": "alice"}, Key: k1})
		var reuse *KeyReuseError
		if !errors.As(err, &reuse) || !errors.Is(err, ErrBadInput) {
			t.Fatalf("err = %v", err)
		}
		if reuse.CallID != first.Call.ID || !reflect.DeepEqual(reuse.Fields, []string{"item", "quantity"}) {
			t.Errorf("%+v", reuse)
		}
		if !strings.Contains(err.Error(), "item, quantity") {
			t.Errorf("message %q", err)
		}
		_, err = h.call(Request{Tool: "create_order", Args: map[string]any{"item": "widget", "quantity": 2}, Key: k1})
		if !errors.As(err, &reuse) || !reflect.DeepEqual(reuse.Fields, []string{"buyer"}) {
			t.Errorf("missing field: %v", err)
		}
		if h.writes() != 1 {
			t.Errorf("%d writes, want 1 (the first call only)", h.writes())
		}
	})

	t.Run("in flight or unknown: refused, retry is the operator's", func(t *testing.T) {
		h, _ := start(t)
		h.f.set("create_order", always(lostOutcome()))
		res, err := h.call(Request{Tool: "create_order", Args: order(5), Key: k2})
		if err != nil || res.State != pending.StateUnknown {
			t.Fatalf("%+v %v", res, err)
		}
		for _, isNew := range []bool{false, true} {
			_, err = h.call(Request{Tool: "create_order", Args: order(5), Key: k2, New: isNew})
			var kp *KeyPendingError
			if !errors.As(err, &kp) || !errors.Is(err, ErrHeld) || kp.CallID != res.Call.ID || kp.State != pending.StateUnknown {
				t.Errorf("new=%v: err = %v", isNew, err)
			}
		}
		if h.writes() != 2 {
			t.Errorf("%d writes, want 2 (the first call and the lost one)", h.writes())
		}
	})

	t.Run("failed: not allowed", func(t *testing.T) {
		h, _ := start(t)
		h.f.set("create_order", always(rawOutcome(`{"content":[],"isError":true}`)))
		res, err := h.call(Request{Tool: "create_order", Args: order(6), Key: k3})
		if err != nil || res.State != pending.StateFailed {
			t.Fatalf("%+v %v", res, err)
		}
		_, err = h.call(Request{Tool: "create_order", Args: order(6), Key: k3})
		if !errors.Is(err, ErrNotAllowed) {
			t.Errorf("err = %v", err)
		}
		if h.writes() != 2 {
			t.Errorf("%d writes, want 2 (the first call and the failed one)", h.writes())
		}
	})

	t.Run("redacted arguments differ", func(t *testing.T) {
		h, _ := start(t)
		const kp = "caller-key-pay-0000001"
		if _, err := h.call(Request{Tool: "pay", Args: map[string]any{"amount": 5, "card_number": "4111111111111111"}, Key: kp}); err != nil {
			t.Fatal(err)
		}
		_, err := h.call(Request{Tool: "pay", Args: map[string]any{"amount": 5, "card_number": "4000000000000002"}, Key: kp})
		var reuse *KeyReuseError
		if !errors.As(err, &reuse) || len(reuse.Fields) != 0 || !strings.Contains(err.Error(), "redacted arguments") {
			t.Errorf("err = %v", err)
		}
		if strings.Contains(err.Error(), "4111") || strings.Contains(err.Error(), "4000") {
			t.Errorf("error shows a card number: %v", err)
		}
		if n := len(h.f.sent("pay")); n != 1 {
			t.Errorf("%d pays sent", n)
		}
	})

	t.Run("bad keys send and record nothing", func(t *testing.T) {
		h, _ := start(t)
		before, calls := h.writes(), len(h.calls())
		for _, req := range []Request{
			{Tool: "create_order", Args: order(7), Key: strings.Repeat("k", 256)},
			{Tool: "create_order", Args: order(7), Key: "caf\u00e9-key"},
			{Tool: "create_order", Args: order(7), Key: "has a space in the key"},
			{Tool: "create_order", Args: map[string]any{"item": "widget", "quantity": 7, "buyer": "alice", "idempotency_key": strings.Repeat("k", 256)}},
			{Tool: "create_order", Args: map[string]any{"item": "widget", "quantity": 7, "buyer": "alice", "idempotency_key": 12345678901234567}},
			{Tool: "create_order", Args: map[string]any{"item": "widget", "quantity": 7, "buyer": "alice", "idempotency_key": "caller-key-00000000000A"}, Key: "caller-key-00000000000B"},
		} {
			if _, err := h.call(req); !errors.Is(err, ErrBadInput) {
				t.Errorf("%+v: err = %v", req, err)
			}
		}
		if h.writes() != before || len(h.calls()) != calls {
			t.Errorf("bad input sent or recorded: %d writes, %d calls", h.writes()-before, len(h.calls())-calls)
		}
	})
}

func TestRetry(t *testing.T) {
	h := newHarness(t, "[tools.pay]\nredact = [\"card_number\"]\n")
	ctx := context.Background()
	h.f.set("pay", always(lostOutcome()))
	card := "4111111111111111"
	res, err := h.call(Request{Tool: "pay", Args: map[string]any{"amount": 12345678901234567890.0, "card_number": card, "memo": map[string]any{"b": 1, "a": []any{1.5}}}})
	if err != nil || res.State != pending.StateUnknown {
		t.Fatalf("%+v %v", res, err)
	}
	id := res.Call.ID

	t.Run("redacted values missing", func(t *testing.T) {
		_, err := h.g.Retry(ctx, id, RetryOptions{})
		if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "card_number") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("redacted values wrong", func(t *testing.T) {
		_, err := h.g.Retry(ctx, id, RetryOptions{Redacted: map[string]any{"card_number": "4000000000000002"}})
		if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "fingerprint") {
			t.Errorf("err = %v", err)
		}
	})
	if n := len(h.f.sent("pay")); n != 1 {
		t.Fatalf("refused retries sent: %d", n)
	}
	if c := h.get(id); c.State != pending.StateUnknown || len(c.Decisions) != 0 {
		t.Fatalf("refused retries recorded: %+v", c)
	}

	t.Run("server name differs", func(t *testing.T) {
		h.f.setName("impostor")
		defer h.f.setName("demo-orders")
		_, err := h.g.Retry(ctx, id, RetryOptions{Redacted: map[string]any{"card_number": card}})
		var sm *ServerMismatchError
		if !errors.As(err, &sm) || !errors.Is(err, ErrNotAllowed) || sm.Recorded != "demo-orders" || sm.Now != "impostor" {
			t.Errorf("err = %v", err)
		}
		if _, err := h.g.Query(ctx, id, QueryOptions{Tool: "get_budget", Args: map[string]any{"buyer": "x"}}); !errors.As(err, &sm) {
			t.Errorf("query on another server: %v", err)
		}
		if n := len(h.f.sent("pay")) + len(h.f.sent("get_budget")); n != 1 {
			t.Errorf("sent to the wrong server: %d", n)
		}
		// --any-server: the query runs, and says so in its evidence.
		if _, err := h.g.Query(ctx, id, QueryOptions{Tool: "get_budget", Args: map[string]any{"buyer": "x"}, AnyServer: true}); err != nil {
			t.Fatal(err)
		}
		c := h.get(id)
		d := c.Decisions[len(c.Decisions)-1]
		var ev struct {
			Override struct {
				AnyServer bool   `json:"any_server"`
				Recorded  string `json:"recorded_server"`
				Server    string `json:"server"`
			} `json:"server_override"`
		}
		if err := json.Unmarshal(d.Evidence, &ev); err != nil || d.Action != pending.ActionQuery || !ev.Override.AnyServer ||
			ev.Override.Recorded != "demo-orders" || ev.Override.Server != "impostor" {
			t.Errorf("query decision %+v (%v)", d, err)
		}
		if len(h.f.sent("get_budget")) != 1 || c.State != pending.StateUnknown {
			t.Errorf("query with --any-server: %d sent, call %s", len(h.f.sent("get_budget")), c.State)
		}
	})

	t.Run("any server: sent, and the override recorded", func(t *testing.T) {
		h.f.setName("impostor")
		defer h.f.setName("demo-orders")
		h.f.set("pay", always(okOutcome(map[string]any{"paid": true})))
		res, err := h.g.Retry(ctx, id, RetryOptions{Redacted: map[string]any{"card_number": card}, AnyServer: true, Note: "moved"})
		if err != nil || res.State != pending.StateSucceeded {
			t.Fatalf("%+v %v", res, err)
		}
		sent := h.f.sent("pay")
		if len(sent) != 2 || sent[1].Opts.Key != res.Key || sent[1].Args["card_number"] != card {
			t.Fatalf("sent %+v", sent)
		}
		// Numbers and nesting as the caller wrote them.
		if got, want := jsonOf(t, sent[1].Args), jsonOf(t, sent[0].Args); got != want {
			t.Errorf("retry args %s, first %s", got, want)
		}
		c := h.get(id)
		d := c.Decisions[len(c.Decisions)-1]
		var ev map[string]any
		if err := json.Unmarshal(d.Evidence, &ev); err != nil {
			t.Fatalf("evidence %s: %v", d.Evidence, err)
		}
		if d.Action != pending.ActionRetry || ev["any_server"] != true || ev["recorded_server"] != "demo-orders" || ev["server"] != "impostor" || d.Note != "moved" {
			t.Errorf("decision %+v evidence %v", d, ev)
		}
		if c.Server != "demo-orders" {
			t.Errorf("call's server changed to %s", c.Server)
		}
	})

	t.Run("failed calls can be retried", func(t *testing.T) {
		h.f.set("create_order", always(rawOutcome(`{"content":[],"isError":true}`)))
		res, err := h.call(Request{Tool: "create_order", Args: order(4)})
		if err != nil || res.State != pending.StateFailed {
			t.Fatalf("%+v %v", res, err)
		}
		h.f.set("create_order", always(okOutcome(map[string]any{"order_id": "o4"})))
		res2, err := h.g.Retry(ctx, res.Call.ID, RetryOptions{})
		if err != nil || res2.State != pending.StateSucceeded || res2.Key != res.Key {
			t.Errorf("%+v %v", res2, err)
		}
	})

	t.Run("no such call", func(t *testing.T) {
		if _, err := h.g.Retry(ctx, 999, RetryOptions{}); !errors.Is(err, ErrBadInput) || !errors.Is(err, pending.ErrNoSuchCall) {
			t.Errorf("err = %v", err)
		}
	})
}

// A write stays a write: neither a policy that now says read nor a server
// that flips readOnlyHint relaxes a stored write on retry.
func TestKindNeverRelaxedOnRetry(t *testing.T) {
	h := newHarness(t, "")
	ctx := context.Background()
	h.f.set("create_order", always(lostOutcome()))
	res, err := h.call(Request{Tool: "create_order", Args: order(2)})
	if err != nil || res.State != pending.StateUnknown {
		t.Fatalf("%+v %v", res, err)
	}
	id := res.Call.ID

	// The server now claims create_order is read-only.
	h.f.setReadOnly("create_order", ptr(true))
	if _, err := h.g.ListTools(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.g.Retry(ctx, id, RetryOptions{}); err != nil {
		t.Fatal(err)
	}
	c := h.get(id)
	if c.Kind != pending.KindWrite || c.KindSource != pending.KindFromAnnotation || c.State != pending.StateUnknown {
		t.Errorf("after a flipped hint: %s/%s %s", c.Kind, c.KindSource, c.State)
	}

	// The operator's new policy says read.
	g2 := New(h.j, h.f, Options{Policy: parsePolicy(t, "[tools.create_order]\nkind = \"read\"\n"), Operator: "tester"})
	if _, err := g2.Retry(ctx, id, RetryOptions{}); err != nil {
		t.Fatal(err)
	}
	c = h.get(id)
	if c.Kind != pending.KindWrite || c.KindSource != pending.KindFromAnnotation {
		t.Errorf("after a read policy: %s/%s", c.Kind, c.KindSource)
	}
	sent := h.f.sent("create_order")
	if len(sent) != 3 {
		t.Fatalf("%d sends", len(sent))
	}
	for _, s := range sent {
		if s.Opts.Key != res.Key || s.Opts.KeyArg != "idempotency_key" || s.Opts.IdleTimeout == 0 {
			t.Errorf("sent as %+v, want a keyed write", s.Opts)
		}
	}
}

func TestAutoQuery(t *testing.T) {
	orders := okOutcome(map[string]any{"orders": []any{map[string]any{"order_id": "o1"}}})
	none := okOutcome(map[string]any{"orders": []any{}})
	for _, tc := range []struct {
		name       string
		policy     string
		answer     mcpclient.Delivery
		queries    int
		state      pending.State
		proposal   string
		decisions  []pending.Action
		autoMarked bool
	}{
		{"found, operator decides", queryPolicy, orders, 1, pending.StateUnknown, ProposalApplied, []pending.Action{pending.ActionQuery}, false},
		{"not found", queryPolicy, none, 1, pending.StateUnknown, ProposalNotFound, []pending.Action{pending.ActionQuery}, false},
		{"auto_resolve on a definite match", queryPolicy + "auto_resolve = true\n", orders, 1, pending.StateApplied, ProposalApplied,
			[]pending.Action{pending.ActionQuery, pending.ActionMark}, true},
		{"auto_resolve, not found: stays unknown", queryPolicy + "auto_resolve = true\n", none, 1, pending.StateUnknown, ProposalNotFound,
			[]pending.Action{pending.ActionQuery}, false},
		{"auto_resolve, query failed: stays unknown", queryPolicy + "auto_resolve = true\n", rawOutcome(`{"content":[],"isError":true,"structuredContent":{"orders":[1]}}`),
			1, pending.StateUnknown, "", []pending.Action{pending.ActionQuery}, false},
		{"auto_resolve, no structured answer", queryPolicy + "auto_resolve = true\n", rawOutcome(`{"content":[{"type":"text","text":"found it"}]}`),
			1, pending.StateUnknown, "", []pending.Action{pending.ActionQuery}, false},
		{"no query configured", "", orders, 0, pending.StateUnknown, "", nil, false},
		{"query tool classed as a write: not run", queryPolicy + "[tools.find_orders]\nkind = \"write\"\n", orders, 0, pending.StateUnknown, "", nil, false},
		{"query needs an argument the call lacks: not run", "[tools.create_order]\nquery_tool = \"find_orders\"\nquery_args = { x = \"{arg.nope}\" }\n",
			orders, 0, pending.StateUnknown, "", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.policy)
			h.f.set("create_order", always(lostOutcome()))
			h.f.set("find_orders", always(tc.answer))
			res, err := h.call(Request{Tool: "create_order", Args: order(2)})
			if err != nil {
				t.Fatal(err)
			}
			q := h.f.sent("find_orders")
			if len(q) != tc.queries {
				t.Fatalf("%d queries, want %d", len(q), tc.queries)
			}
			if len(q) == 1 && (q[0].Args["idempotency_key"] != res.Key || q[0].Opts.Key != "") {
				t.Errorf("query sent %+v", q[0])
			}
			c := h.get(res.Call.ID)
			if c.State != tc.state || res.State != tc.state || c.Proposal != tc.proposal {
				t.Errorf("state %s (result %s), proposal %q; want %s, %q", c.State, res.State, c.Proposal, tc.state, tc.proposal)
			}
			if got := actions(c); !reflect.DeepEqual(got, tc.decisions) {
				t.Errorf("decisions %v, want %v", got, tc.decisions)
			}
			if len(c.Decisions) > 0 {
				d := c.Decisions[0]
				var ev struct {
					Tool   string          `json:"tool"`
					Args   map[string]any  `json:"args"`
					Result json.RawMessage `json:"result"`
				}
				if err := json.Unmarshal(d.Evidence, &ev); err != nil || ev.Tool != "find_orders" || ev.Args["idempotency_key"] != res.Key || len(ev.Result) == 0 {
					t.Errorf("query evidence %s (%v)", d.Evidence, err)
				}
				if !strings.Contains(d.Operator, "automatic") {
					t.Errorf("query operator %q", d.Operator)
				}
			}
			if tc.autoMarked && !strings.Contains(c.Decisions[1].Operator, "auto_resolve") {
				t.Errorf("mark operator %q", c.Decisions[1].Operator)
			}
			if h.writes() != 1 {
				t.Errorf("%d writes", h.writes())
			}
		})
	}
}

func TestQuery(t *testing.T) {
	h := newHarness(t, queryPolicy+"[tools.pay]\nredact = [\"card_number\"]\n")
	ctx := context.Background()
	h.f.set("create_order", always(lostOutcome()))
	h.f.set("pay", always(lostOutcome()))
	h.f.set("find_orders", always(okOutcome(map[string]any{"orders": []any{}})))
	res, err := h.call(Request{Tool: "create_order", Args: order(2)})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Call.ID

	h.f.set("find_orders", always(okOutcome(map[string]any{"orders": []any{map[string]any{"order_id": "o1"}}})))
	q, err := h.g.Query(ctx, id, QueryOptions{Note: "checking"})
	if err != nil {
		t.Fatal(err)
	}
	c := h.get(id)
	if q.Key != res.Key || q.Call.Proposal != ProposalApplied || c.State != pending.StateUnknown || c.Proposal != ProposalApplied {
		t.Errorf("query %+v, call %s %q", q, c.State, c.Proposal)
	}
	if d := c.Decisions[len(c.Decisions)-1]; d.Action != pending.ActionQuery || d.Operator != "tester" || d.Note != "checking" {
		t.Errorf("decision %+v", d)
	}

	// The operator's own read tool and arguments.
	if _, err := h.g.Query(ctx, id, QueryOptions{Tool: "get_budget", Args: map[string]any{"buyer": "{arg.buyer}"}}); err != nil {
		t.Fatal(err)
	}
	if s := h.f.sent("get_budget"); len(s) != 1 || s[0].Args["buyer"] != "alice" {
		t.Errorf("get_budget sent %+v", s)
	}
	// Refusals send nothing.
	for _, tc := range []struct {
		name string
		id   int64
		o    QueryOptions
		err  error
	}{
		{"a write tool", id, QueryOptions{Tool: "create_order", Args: map[string]any{}}, ErrBadInput},
		{"a tool the server lacks", id, QueryOptions{Tool: "nope"}, ErrBadInput},
		{"a redacted argument", 0, QueryOptions{Tool: "find_orders", Args: map[string]any{"buyer": "{arg.card_number}"}}, ErrBadInput},
		{"no query configured", 0, QueryOptions{}, ErrBadInput},
		{"no such call", 999, QueryOptions{}, ErrBadInput},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := tc.id
			if target == 0 {
				pay, err := h.call(Request{Tool: "pay", Args: map[string]any{"amount": 1, "card_number": "4111111111111111"}, New: true})
				if err != nil {
					t.Fatal(err)
				}
				target = pay.Call.ID
			}
			before := len(h.f.calls)
			if _, err := h.g.Query(ctx, target, tc.o); !errors.Is(err, tc.err) {
				t.Errorf("err = %v, want %v", err, tc.err)
			}
			h.f.mu.Lock()
			after := len(h.f.calls)
			h.f.mu.Unlock()
			if after != before {
				t.Errorf("refused query sent %d calls", after-before)
			}
		})
	}
	if h.writes() != 1 {
		t.Errorf("%d writes", h.writes())
	}
}

func TestLateResults(t *testing.T) {
	okJSON := `{"content":[],"structuredContent":{"order_id":"o1"}}`
	errJSON := `{"content":[],"isError":true}`
	progJSON := `{"content":[],"isError":true,"structuredContent":{"idempotency":"in_progress"}}`
	for _, tc := range []struct {
		name     string
		decide   func(h *harness, id int64) error
		late     mcpclient.LateResult // Key and Tool filled in
		state    pending.State
		conflict string
		lateSet  bool   // the attempt took the answer
		event    string // a late_result event with this detail ("cancel:" prefix: a cancel_answer event)
	}{
		{"result settles an unknown call", nil, mcpclient.LateResult{Session: 1, ResultJSON: json.RawMessage(okJSON)},
			pending.StateSucceeded, "", true, "answered succeeded"},
		{"tool error settles it as failed", nil, mcpclient.LateResult{Session: 1, ResultJSON: json.RawMessage(errJSON)},
			pending.StateFailed, "", true, "answered failed"},
		{"rpc error to the request settles it as failed", nil, mcpclient.LateResult{Session: 1, RPCError: &mcpclient.RPCError{Code: -32602, Message: "bad"}},
			pending.StateFailed, "", true, "answered failed"},
		{"rpc error after our cancel is evidence only", nil, mcpclient.LateResult{Session: 1, RPCError: &mcpclient.RPCError{Code: -32603, Message: "context canceled"}, AfterCancel: true},
			pending.StateUnknown, "", false, `cancel:"after_cancel":true`},
		{"tool error after our cancel is evidence only", nil, mcpclient.LateResult{Session: 1, ResultJSON: json.RawMessage(errJSON), AfterCancel: true},
			pending.StateUnknown, "", false, `cancel:"after_cancel":true`},
		{"success after our cancel still settles it", nil, mcpclient.LateResult{Session: 1, ResultJSON: json.RawMessage(okJSON), AfterCancel: true},
			pending.StateSucceeded, "", true, "answered succeeded"},
		{"in progress is evidence only", nil, mcpclient.LateResult{Session: 1, ResultJSON: json.RawMessage(progJSON)},
			pending.StateUnknown, "", false, "in progress"},
		{"result after abandon: conflict", func(h *harness, id int64) error { return h.g.Abandon(context.Background(), id, "") },
			mcpclient.LateResult{Session: 1, ResultJSON: json.RawMessage(okJSON)},
			pending.StateAbandoned, "abandoned, but the server reports it applied", true, "answered succeeded"},
		{"failure after mark applied: conflict", func(h *harness, id int64) error { return h.g.MarkApplied(context.Background(), id, "") },
			mcpclient.LateResult{Session: 1, ResultJSON: json.RawMessage(errJSON)},
			pending.StateApplied, "marked applied, but the server reports it failed", true, "answered failed"},
		{"success after mark applied agrees", func(h *harness, id int64) error { return h.g.MarkApplied(context.Background(), id, "") },
			mcpclient.LateResult{Session: 1, ResultJSON: json.RawMessage(okJSON)},
			pending.StateApplied, "", true, "answered succeeded"},
		{"another session's answer is not this attempt's", nil, mcpclient.LateResult{Session: 2, ResultJSON: json.RawMessage(okJSON)},
			pending.StateUnknown, "", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "")
			h.f.set("create_order", always(lostOutcome()))
			res, err := h.call(Request{Tool: "create_order", Args: order(2)})
			if err != nil || res.State != pending.StateUnknown {
				t.Fatalf("%+v %v", res, err)
			}
			id := res.Call.ID
			if tc.decide != nil {
				if err := tc.decide(h, id); err != nil {
					t.Fatal(err)
				}
			}
			lr := tc.late
			lr.Key, lr.Tool = res.Key, "create_order"
			h.g.HandleLateResult(lr)
			c := h.get(id)
			if c.State != tc.state || c.ConflictNote != tc.conflict || c.Conflict != (tc.conflict != "") {
				t.Errorf("call %s conflict=%v %q; want %s %q", c.State, c.Conflict, c.ConflictNote, tc.state, tc.conflict)
			}
			if a := c.Attempts[0]; a.Late != tc.lateSet {
				t.Errorf("attempt %+v, late want %v", a, tc.lateSet)
			}
			evs := events(t, h.path, id)
			kind, detail := pending.EventLateResult, tc.event
			if d, ok := strings.CutPrefix(tc.event, "cancel:"); ok {
				kind, detail = pending.EventCancelAnswer, d
			}
			if tc.event != "" {
				found := false
				for _, e := range evs {
					found = found || (e.Kind == kind && strings.Contains(e.Detail, detail))
				}
				if !found {
					t.Errorf("no %s event with %q: %+v", kind, detail, evs)
				}
				if _, ok := hasEvent(evs, pending.EventLateResult); ok && kind == pending.EventCancelAnswer {
					t.Errorf("an answer to our cancel was counted as a late result: %+v", evs)
				}
			} else if _, ok := hasEvent(evs, pending.EventLateResult); ok {
				t.Errorf("unexpected events %+v", evs)
			}
			if tc.conflict != "" {
				if _, ok := hasEvent(evs, pending.EventConflict); !ok {
					t.Errorf("no conflict event: %+v", evs)
				}
			}
			if h.writes() != 1 {
				t.Errorf("%d writes", h.writes())
			}
		})
	}

	t.Run("unknown key is ignored", func(t *testing.T) {
		h := newHarness(t, "")
		h.g.HandleLateResult(mcpclient.LateResult{Key: "no-such-key-000000000", Tool: "create_order", Session: 1, ResultJSON: json.RawMessage(okJSON)})
		if n := len(h.calls()); n != 0 || h.writes() != 0 {
			t.Errorf("%d calls, %d writes", n, h.writes())
		}
	})
}

// An answer to attempt 1 that arrives while the operator's retry (attempt
// 2) is out is kept on attempt 1; the retry's own answer settles the call.
func TestLateResultDuringRetry(t *testing.T) {
	h := newHarness(t, "")
	ctx := context.Background()
	h.f.set("create_order", always(lostOutcome()))
	res, err := h.call(Request{Tool: "create_order", Args: order(2)})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	h.f.arrived = make(chan fakeCall, 1)
	h.f.set("create_order", func(fakeCall) mcpclient.Delivery {
		<-release
		return okOutcome(map[string]any{"order_id": "o1", "replay": true})
	})
	done := make(chan Result)
	go func() {
		r, _ := h.g.Retry(ctx, res.Call.ID, RetryOptions{})
		done <- r
	}()
	<-h.f.arrived
	h.g.HandleLateResult(mcpclient.LateResult{Key: res.Key, Tool: "create_order", Session: 1,
		ResultJSON: json.RawMessage(`{"content":[],"structuredContent":{"order_id":"o1"}}`)})
	if c := h.get(res.Call.ID); c.State != pending.StateInFlight || !c.Attempts[0].Late || c.Attempts[0].Outcome != pending.OutcomeSucceeded {
		t.Errorf("during the retry: %s, attempt 1 %+v", c.State, c.Attempts[0])
	}
	close(release)
	r := <-done
	if r.State != pending.StateSucceeded || h.writes() != 2 {
		t.Errorf("retry %+v, %d writes", r, h.writes())
	}
}

func TestReplayedAndInProgress(t *testing.T) {
	h := newHarness(t, "")
	h.f.set("create_order", always(rawOutcome(`{"content":[],"structuredContent":{"order_id":"o1"},"_meta":{"io.github.mcp-confirm/replayed":true}}`)))
	res, err := h.call(Request{Tool: "create_order", Args: order(2)})
	if err != nil || !res.Replayed || res.Stored || res.State != pending.StateSucceeded {
		t.Fatalf("%+v %v", res, err)
	}
	st, err := h.j.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.DedupeHits != 1 {
		t.Errorf("dedupe hits %d", st.DedupeHits)
	}

	h.f.set("create_order", always(rawOutcome(`{"content":[],"isError":true,"structuredContent":{"idempotency":"in_progress"}}`)))
	res, err = h.call(Request{Tool: "create_order", Args: order(3)})
	if err != nil || res.State != pending.StateUnknown || res.Call.Reason != "server reports in progress" {
		t.Errorf("in progress: %+v %v", res, err)
	}
	if a := h.get(res.Call.ID).Attempts[0]; a.Outcome != pending.OutcomeUnknown || len(a.Result) == 0 {
		t.Errorf("attempt %+v", a)
	}
}

func TestWriteNotSent(t *testing.T) {
	h := newHarness(t, "")
	h.f.set("create_order", always(mcpclient.Delivery{Kind: mcpclient.DeliveryNotSent, Err: errors.New("broken pipe before the first byte")}))
	res, err := h.call(Request{Tool: "create_order", Args: order(2)})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
	c := h.get(res.Call.ID)
	if c.State != pending.StateFailed || !strings.HasPrefix(c.Reason, "not sent") {
		t.Errorf("call %s %q", c.State, c.Reason)
	}
	// A failed call holds nothing back, and retry is allowed.
	h.f.set("create_order", always(okOutcome(nil)))
	if r, err := h.g.Retry(context.Background(), c.ID, RetryOptions{}); err != nil || r.State != pending.StateSucceeded {
		t.Errorf("retry %+v %v", r, err)
	}
}

// Watch signals a change committed through another handle on the file.
func TestWatchSeesAnotherHandle(t *testing.T) {
	h := newHarness(t, "")
	h.f.set("create_order", always(lostOutcome()))
	res, err := h.call(Request{Tool: "create_order", Args: order(2)})
	if err != nil {
		t.Fatal(err)
	}
	j2 := openJournal(t, h.path)
	ctx, cancel := context.WithCancel(context.Background())
	changed := Watch(ctx, h.j, time.Millisecond, 0, nil)
	// The change comes right away: Watch must already know where it
	// started from.
	if err := New(j2, nil, Options{Operator: "other"}).Note(ctx, res.Call.ID, "from another process"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(time.Minute):
		t.Fatal("no change signalled")
	}
	cancel()
	for range changed { // closes when ctx ends
	}
}

// The session hands a late answer to HandleLateResult on its own goroutine,
// possibly before Call has returned and the guard has recorded the attempt
// as unknown. The answer must not be lost in that window.
func TestLateResultRacesOutcome(t *testing.T) {
	for i := range 20 {
		h := newHarness(t, "")
		lateDone := make(chan struct{})
		h.f.set("create_order", func(c fakeCall) mcpclient.Delivery {
			go func() {
				defer close(lateDone)
				h.g.HandleLateResult(mcpclient.LateResult{Key: c.Opts.Key, Tool: "create_order", Session: 1,
					ResultJSON: json.RawMessage(`{"content":[],"structuredContent":{"order_id":"o1"}}`)})
			}()
			return lostOutcome()
		})
		res, err := h.call(Request{Tool: "create_order", Args: order(2)})
		if err != nil {
			t.Fatal(err)
		}
		<-lateDone
		if c := h.get(res.Call.ID); c.State != pending.StateSucceeded || !c.Attempts[0].Late {
			t.Fatalf("run %d: the answer that came with the timeout was lost: %s, attempt %+v", i, c.State, c.Attempts[0])
		}
	}
}

// The server died between calls: the intent names the last session, the
// request goes out on a fresh one, and its late answer names that one.
func TestLateResultOnRestartedSession(t *testing.T) {
	h := newHarness(t, "")
	if _, err := h.g.ListTools(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.f.set("create_order", always(lostOutcome()))
	h.f.restart = true
	res, err := h.call(Request{Tool: "create_order", Args: order(2)})
	if err != nil || res.State != pending.StateUnknown {
		t.Fatalf("%+v %v", res, err)
	}
	h.g.HandleLateResult(mcpclient.LateResult{Key: res.Key, Tool: "create_order", Session: 2, RPCID: "1",
		ResultJSON: json.RawMessage(`{"content":[],"structuredContent":{"order_id":"o1"}}`)})
	c := h.get(res.Call.ID)
	if c.State != pending.StateSucceeded {
		t.Errorf("late answer on the new session: call %s, attempt %+v", c.State, c.Attempts[0])
	}
}

// The process dies while a write is out: the next process recovers it as
// unknown and sends nothing until an operator retries.
func TestRestartNeverResends(t *testing.T) {
	h := newHarness(t, "")
	release := make(chan struct{})
	h.f.arrived = make(chan fakeCall, 10)
	h.f.set("create_order", func(fakeCall) mcpclient.Delivery {
		<-release
		return lostOutcome()
	})
	done := make(chan error, 1)
	go func() {
		_, err := h.call(Request{Tool: "create_order", Args: order(2)})
		done <- err
	}()
	first := <-h.f.arrived
	// The process stops while the request is out: its journal handle (and
	// owner lock) go away without an outcome.
	if err := h.j.Close(); err != nil {
		t.Fatal(err)
	}
	close(release)
	// Sent, then no journal to record the outcome in: unknown, never the
	// "unavailable, nothing sent" this test once expected.
	var notRecorded *OutcomeNotRecordedError
	if err := <-done; !errors.As(err, &notRecorded) || errors.Is(err, ErrUnavailable) {
		t.Errorf("outcome into a closed journal: %v", err)
	}

	j2 := openJournal(t, h.path)
	if len(j2.Recovered()) != 1 {
		t.Fatalf("recovered %v", j2.Recovered())
	}
	c, err := j2.Get(context.Background(), j2.Recovered()[0])
	if err != nil {
		t.Fatal(err)
	}
	if c.State != pending.StateUnknown || c.Reason != pending.ReasonRecovered || c.Key != first.Opts.Key {
		t.Errorf("recovered call %s %q key %s", c.State, c.Reason, c.Key)
	}
	g2 := New(j2, h.f, Options{Operator: "tester"})
	h.f.arrived = nil
	h.f.set("create_order", always(okOutcome(map[string]any{"order_id": "o1"})))
	if _, err := g2.Call(context.Background(), Request{Tool: "create_order", Args: order(2)}); !errors.Is(err, ErrHeld) {
		t.Errorf("same call after restart: %v", err)
	}
	if h.writes() != 1 {
		t.Fatalf("%d writes after restart", h.writes())
	}
	res, err := g2.Retry(context.Background(), c.ID, RetryOptions{})
	if err != nil || res.State != pending.StateSucceeded {
		t.Fatalf("retry %+v %v", res, err)
	}
	if sent := h.f.sent("create_order"); len(sent) != 2 || sent[1].Opts.Key != first.Opts.Key {
		t.Errorf("retry after restart sent %+v", sent)
	}
}

// A server that cannot be listed (it will not start) is unavailable, and
// nothing is journaled or sent.
func TestServerUnavailable(t *testing.T) {
	h := newHarness(t, "")
	h.f.toolsErr = errors.New("exec: demo-orders: not found")
	_, err := h.call(Request{Tool: "create_order", Args: order(2)})
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("err = %v", err)
	}
	if h.writes() != 0 || len(h.calls()) != 0 {
		t.Errorf("%d writes, %d calls", h.writes(), len(h.calls()))
	}
}

// With a read budget (the proxy's), a read and its retries end within it:
// each attempt's clocks are cut to what is left, and no attempt starts once
// the budget is spent. The fake server spends each attempt's whole clock,
// as a server that never answers would.
func TestReadBudgetBoundsRetries(t *testing.T) {
	h := newHarness(t, "")
	const budget = 300 * time.Millisecond
	h.g = New(h.j, h.f, Options{Operator: "tester", ReadBudget: budget})
	h.f.set("get_budget", func(c fakeCall) mcpclient.Delivery {
		time.Sleep(c.Opts.MaxTotal)
		return lostOutcome()
	})
	res, err := h.call(Request{Tool: "get_budget", Args: map[string]any{"buyer": "alice"}})
	if err != nil || res.State != pending.StateFailed {
		t.Fatalf("read past its budget: %+v %v", res, err)
	}
	sent := h.f.sent("get_budget")
	if len(sent) != 1 {
		t.Fatalf("%d attempts; the first one used the whole budget, so no retry may start", len(sent))
	}
	if o := sent[0].Opts; o.MaxTotal > budget || o.IdleTimeout > budget {
		t.Fatalf("attempt clocks %v/%v exceed the budget %v", o.IdleTimeout, o.MaxTotal, budget)
	}
}

// The server answered, but the journal can no longer record it (here it is
// closed under the call). The write was sent, so the caller must hear
// "unknown", never an "unavailable, nothing sent" that invites a resend.
func TestOutcomeNotRecordedIsUnknownNotUnavailable(t *testing.T) {
	h := newHarness(t, "")
	h.f.set("create_order", func(fakeCall) mcpclient.Delivery {
		h.j.Close()
		return okOutcome(map[string]any{"order_id": 1})
	})
	res, err := h.call(Request{Tool: "create_order", Args: order(2)})
	var notRecorded *OutcomeNotRecordedError
	if !errors.As(err, &notRecorded) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v; want an OutcomeNotRecordedError that is not ErrUnavailable", err)
	}
	if res.State != pending.StateUnknown || notRecorded.CallID == 0 || notRecorded.CallID != res.Call.ID {
		t.Fatalf("result %+v for call %d; want unknown, naming the call", res, notRecorded.CallID)
	}
	if n := len(h.f.sent("create_order")); n != 1 {
		t.Fatalf("%d sends; want exactly 1", n)
	}
	// The next process finds the call in flight with a dead owner: unknown.
	j := openJournal(t, h.path)
	c, err := j.Get(context.Background(), res.Call.ID)
	if err != nil || c.State != pending.StateUnknown || c.Reason != pending.ReasonRecovered {
		t.Fatalf("after reopening: %s %q %v; want unknown, recovered", c.State, c.Reason, err)
	}
}

// Past the policy's key_retention, a retry is refused (the server may
// have forgotten the key, so it may do the write twice) and nothing is
// sent or recorded, unless RetryOptions.PastRetention; within it, a retry
// goes as any other.
func TestRetryPastKeyRetention(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		policy string
		past   bool
	}{
		{"[defaults]\nkey_retention = \"1ms\"\n", true},
		{"[defaults]\nkey_retention = \"24h\"\n[tools.pay]\nkey_retention = \"1ms\"\n", true},
		{"[defaults]\nkey_retention = \"1ms\"\n[tools.pay]\nkey_retention = \"24h\"\n", false},
		{"", false},
	} {
		h := newHarness(t, tc.policy)
		h.f.set("pay", always(lostOutcome()))
		res, err := h.call(Request{Tool: "pay", Args: map[string]any{"amount": 3}})
		if err != nil || res.State != pending.StateUnknown {
			t.Fatalf("%+v %v", res, err)
		}
		id := res.Call.ID
		time.Sleep(5 * time.Millisecond) // past 1ms, well within 24h
		_, err = h.g.Retry(ctx, id, RetryOptions{})
		var kr *KeyRetentionError
		if got := errors.As(err, &kr); got != tc.past {
			t.Errorf("policy %q: retry err = %v, want refused past retention: %v", tc.policy, err, tc.past)
			continue
		}
		if !tc.past {
			continue
		}
		if !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "may do it twice") {
			t.Errorf("err = %v", err)
		}
		if n := len(h.f.sent("pay")); n != 1 {
			t.Errorf("the refused retry was sent: %d sends", n)
		}
		if c := h.get(id); len(c.Decisions) != 0 || len(c.Attempts) != 1 {
			t.Errorf("the refused retry was recorded: %+v", c)
		}
		if _, err := h.g.Retry(ctx, id, RetryOptions{PastRetention: true}); err != nil {
			t.Errorf("retry with PastRetention: %v", err)
		}
		if n := len(h.f.sent("pay")); n != 2 {
			t.Errorf("retry with PastRetention: %d sends, want 2", n)
		}
	}
}

// A read the server refused because it no longer knew the session (HTTP
// 404) goes again on a new session at once: with a budget shorter than
// the least backoff (100 ms), the second attempt is still made, and
// answers. A second expiry in a row waits like any other failure.
func TestReadAfterAnExpiredSessionIsNotBackedOff(t *testing.T) {
	h := newHarness(t, "")
	h.g = New(h.j, h.f, Options{Operator: "tester", ReadBudget: 90 * time.Millisecond})
	expired := mcpclient.Delivery{Kind: mcpclient.DeliveryUnknown, Reason: mcpclient.RefusedReason(404, true),
		Err: &mcpclient.RefusedError{Status: 404, SessionExpired: true}}
	h.f.set("get_budget", func(c fakeCall) mcpclient.Delivery {
		if c.N == 1 {
			return expired
		}
		return okOutcome(map[string]any{"budget": 10})
	})
	res, err := h.call(Request{Tool: "get_budget", Args: map[string]any{"buyer": "alice"}})
	if err != nil || res.State != pending.StateSucceeded {
		t.Fatalf("a read after an expired session: %+v %v", res, err)
	}
	if n := len(h.f.sent("get_budget")); n != 2 {
		t.Fatalf("%d attempts, want 2", n)
	}

	h.f.set("get_budget", func(c fakeCall) mcpclient.Delivery { return expired })
	if _, err := h.call(Request{Tool: "get_budget", Args: map[string]any{"buyer": "bob"}}); err == nil {
		t.Fatal("a read on a server that forgets every session succeeded")
	}
	if n := len(h.f.sent("get_budget")); n != 2+2 {
		t.Fatalf("%d attempts in all, want 4: the third expiry waits for a backoff past the budget", n)
	}
}
