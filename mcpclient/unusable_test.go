package mcpclient_test

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// answering starts the fixture in -mode answers, whose tool "answer" writes
// the answer line a test asks for (testdata/fixture/answers.go), with late
// results and the server's whole stderr collected.
func answering(t *testing.T) (*mcpclient.Client, *lateSink, *testbin.Buffer) {
	t.Helper()
	late := newLateSink()
	var stderr testbin.Buffer
	opts := testOptions()
	opts.OnLateResult = late.add
	opts.Stderr = &stderr
	return started(t, fixture("-mode", "answers"), opts), late, &stderr
}

// written returns the length of the answer lines the fixture says it wrote
// to request rpcID (it logs each to stderr before it writes it, but stderr
// is read on its own), once there are want of them.
func written(t *testing.T, stderr *testbin.Buffer, rpcID string, want int) []int {
	t.Helper()
	re := regexp.MustCompile(`fixture: answer ` + regexp.QuoteMeta(strconv.Quote(rpcID)) + ` \S+ \((\d+) bytes\)`)
	var ns []int
	waitFor(t, "the server's stderr", func() bool {
		ns = ns[:0]
		for _, m := range re.FindAllStringSubmatch(stderr.String(), -1) {
			n, _ := strconv.Atoi(m[1])
			ns = append(ns, n)
		}
		return len(ns) >= want
	})
	return ns
}

// An answer that is not a usable tool result leaves the call unknown
// (protocol error) with the bytes and what is wrong with them, is never
// passed to OnAnswer, and never comes back as a late result.
func TestUnusableAnswerIsUnknown(t *testing.T) {
	noLeak(t)
	c, late, stderr := answering(t)
	tests := []struct {
		form, layout string
		why          string
		marker       string // in the bytes kept
	}{
		{"malformed", "", "not valid JSON", `"text":"done"}],}`},
		{"malformed", "ts", "not valid JSON", `"text":"done"}],}`},
		{"malformed", "other", "not valid JSON", `"text":"done"}],}`},
		{"truncated", "", "not valid JSON", `"content":[{"type":"text","text":"do`},
		{"truncated", "other", "not valid JSON", `"content":[{"type":"text","text":"do`},
		{"deep", "", "nested too deep", strings.Repeat("[", 100)},
		{"deep", "ts", "nested too deep", strings.Repeat("]", 100)},
		{"deep", "other", "nested too deep", strings.Repeat("]", 100)},
		{"null", "", "result is null", `"result":null`},
		{"null", "ts", "result is null", `"result":null`},
		{"null", "other", "result is null", `"result":null`},
		{"string", "", "result is not an object", `"result":"a string"`},
		{"input_required", "", "input_required", `"resultType":"input_required"`},
		{"task", "", "task", `"resultType":"task"`},
		{"iserror_string", "", "isError is not a boolean", `"isError":"false"`},
		{"content_number", "", "content is not an array", `"content":5,"isError":true`},
		{"content_number", "ts", "content is not an array", `"content":5,"isError":true`},
		{"both", "", "both a result and an error", `"error":{"code":-32000`},
		{"neither", "", "neither a result nor an error", `{"jsonrpc":"2.0","id":`},
	}
	for i, tt := range tests {
		t.Run(tt.form+" "+tt.layout, func(t *testing.T) {
			var a answers
			key := fmt.Sprintf("k-unusable-%06d", i)
			out := call(t, c, "answer", map[string]any{"form": tt.form, "layout": tt.layout},
				mcpclient.CallOptions{Key: key, IdleTimeout: 10 * time.Second, OnAnswer: a.on})
			if out.Kind != mcpclient.DeliveryUnknown || out.Reason != mcpclient.ReasonProtocolError {
				t.Fatalf("outcome %s %s (%v), want unknown, protocol error; result %.200s", out.Kind, out.Reason, out.Err, out.ResultJSON)
			}
			if out.ResultJSON != nil || out.RPCError != nil || !errors.Is(out.Err, mcpclient.ErrUnusableAnswer) {
				t.Errorf("result %.100s, rpc error %v, err %v", out.ResultJSON, out.RPCError, out.Err)
			}
			if !strings.Contains(out.Why, tt.why) || !strings.Contains(out.Err.Error(), out.Why) {
				t.Errorf("why %q, err %q; want it to say %q", out.Why, out.Err, tt.why)
			}
			if n := written(t, stderr, out.RPCID, 1); len(n) != 1 || len(out.Raw) != n[0] || out.RawTruncated {
				t.Errorf("raw is %d bytes (cut %v), the server wrote %v", len(out.Raw), out.RawTruncated, n)
			}
			if !bytes.Contains(out.Raw, []byte(`"id":`+strconv.Quote(out.RPCID))) || !bytes.Contains(out.Raw, []byte(tt.marker)) {
				t.Errorf("raw %.300s lacks the id or %.60s", out.Raw, tt.marker)
			}
			if a.count() != 0 {
				t.Errorf("OnAnswer was given %.100s %v", a.got[0], a.errs[0])
			}
		})
	}

	// An unusable answer longer than the evidence kept: cut, and says so.
	out := call(t, c, "answer", map[string]any{"form": "huge"}, mcpclient.CallOptions{Key: "k-unusable-huge01"})
	if out.Kind != mcpclient.DeliveryUnknown || out.Reason != mcpclient.ReasonProtocolError || out.Why != "result is not an object" {
		t.Fatalf("huge: outcome %s %s %q", out.Kind, out.Reason, out.Why)
	}
	if n := written(t, stderr, out.RPCID, 1); len(out.Raw) != 64<<10 || !out.RawTruncated || len(n) != 1 || n[0] <= 64<<10 ||
		!bytes.HasPrefix(out.Raw, []byte(`{"jsonrpc":"2.0","id":`)) {
		t.Errorf("huge: raw %d bytes (cut %v) of %v, starts %.40s", len(out.Raw), out.RawTruncated, n, out.Raw)
	}

	// The same server's usable answers, in both layouts, settle as usual.
	for _, layout := range []string{"", "ts"} {
		out = call(t, c, "answer", map[string]any{"form": "ok", "layout": layout}, mcpclient.CallOptions{})
		if out.Kind != mcpclient.DeliveryResult || !bytes.Contains(out.ResultJSON, []byte(`"done":true`)) || out.Raw != nil || out.Why != "" {
			t.Errorf("ok %s: %+v", layout, out)
		}
		out = call(t, c, "answer", map[string]any{"form": "tool_error", "layout": layout}, mcpclient.CallOptions{})
		if out.Kind != mcpclient.DeliveryResult || !bytes.Contains(out.ResultJSON, []byte(`"isError":true`)) {
			t.Errorf("tool_error %s: %+v", layout, out)
		}
		out = call(t, c, "answer", map[string]any{"form": "rpc_error", "layout": layout}, mcpclient.CallOptions{})
		if out.Kind != mcpclient.DeliveryRPCError || out.RPCError == nil || out.RPCError.Code != -32000 {
			t.Errorf("rpc_error %s: %+v", layout, out)
		}
	}

	// None of them came back as a late result: a late answer sent after
	// them all is the first one the session passes on.
	out = call(t, c, "answer", map[string]any{"form": "ok", "delay_ms": 600}, mcpclient.CallOptions{Key: "k-unusable-flush1", IdleTimeout: 100 * time.Millisecond})
	if out.Kind != mcpclient.DeliveryUnknown {
		t.Fatalf("flush: %+v", out)
	}
	late.wait(t, "k-unusable-flush1")
	late.mu.Lock()
	defer late.mu.Unlock()
	for _, lr := range late.rs {
		if lr.Key != "k-unusable-flush1" {
			t.Errorf("late result for %s: %+v", lr.Key, lr)
		}
	}
}

// An unusable answer that comes after the call gave up is passed on as
// evidence: class unusable, neither a result nor an error, its bytes and
// why; a usable one as its class.
func TestLateUnusableAnswer(t *testing.T) {
	noLeak(t)
	c, late, stderr := answering(t)
	for i, tt := range []struct {
		form  string
		class mcpclient.AnswerClass
		why   string
	}{
		{"null", mcpclient.AnswerUnusable, "result is null"},
		{"malformed", mcpclient.AnswerUnusable, "not valid JSON"},
		{"deep", mcpclient.AnswerUnusable, "nested too deep"},
		{"input_required", mcpclient.AnswerUnusable, "input_required"},
		{"ok", mcpclient.AnswerResult, ""},
		{"rpc_error", mcpclient.AnswerRPCError, ""},
	} {
		t.Run(tt.form, func(t *testing.T) {
			key := fmt.Sprintf("k-late-unusable-%02d", i)
			var a answers
			out := call(t, c, "answer", map[string]any{"form": tt.form, "delay_ms": 800},
				mcpclient.CallOptions{Key: key, IdleTimeout: 150 * time.Millisecond, OnAnswer: a.on})
			if out.Kind != mcpclient.DeliveryUnknown || out.Reason != mcpclient.ReasonIdleTimeout || out.Raw != nil || out.Why != "" {
				t.Fatalf("outcome %+v", out)
			}
			lr := late.wait(t, key)
			if lr.Class != tt.class || lr.Second || !lr.AfterCancel || lr.RPCID != out.RPCID || lr.Session != out.Session || lr.Tool != "answer" {
				t.Errorf("late %+v", lr)
			}
			switch tt.class {
			case mcpclient.AnswerUnusable:
				n := written(t, stderr, out.RPCID, 1)
				if lr.ResultJSON != nil || lr.RPCError != nil || !strings.Contains(lr.Why, tt.why) ||
					len(n) != 1 || len(lr.Raw) != n[0] || lr.RawTruncated {
					t.Errorf("late unusable: result %.80s, error %v, why %q, raw %d bytes of %v", lr.ResultJSON, lr.RPCError, lr.Why, len(lr.Raw), n)
				}
			case mcpclient.AnswerResult:
				if !bytes.Contains(lr.ResultJSON, []byte(`"done":true`)) || lr.RPCError != nil || lr.Raw != nil || lr.Why != "" {
					t.Errorf("late result: %+v", lr)
				}
			case mcpclient.AnswerRPCError:
				if lr.RPCError == nil || lr.RPCError.Code != -32000 || lr.ResultJSON != nil || lr.Raw != nil {
					t.Errorf("late error: %+v", lr)
				}
			}
			if a.count() != 0 {
				t.Errorf("OnAnswer was given a late answer")
			}
		})
	}
}

// A second answer to one request is passed on as Second, with its class,
// whether the call ended with the first or as unknown; the first stands.
func TestSecondAnswer(t *testing.T) {
	noLeak(t)
	c, late, _ := answering(t)
	tests := []struct {
		name        string
		args        map[string]any
		idle        time.Duration
		kind        mcpclient.DeliveryKind
		firstIsLate bool                  // the first answer came after the call gave up
		class       mcpclient.AnswerClass // of the second
		isError     bool                  // the second is a tool error
	}{
		{"same at once", map[string]any{"twice": "same"}, 0, mcpclient.DeliveryResult, false, mcpclient.AnswerResult, false},
		{"same after the call", map[string]any{"twice": "same", "gap_ms": 200}, 0, mcpclient.DeliveryResult, false, mcpclient.AnswerResult, false},
		{"different after the call", map[string]any{"twice": "different", "gap_ms": 200}, 0, mcpclient.DeliveryResult, false, mcpclient.AnswerResult, true},
		{"unusable after a result", map[string]any{"twice": "unusable", "gap_ms": 100}, 0, mcpclient.DeliveryResult, false, mcpclient.AnswerUnusable, false},
		{"result after an unusable one", map[string]any{"form": "null", "twice": "different", "gap_ms": 100}, 0, mcpclient.DeliveryUnknown, false, mcpclient.AnswerResult, true},
		{"error, then a result", map[string]any{"form": "rpc_error", "twice": "different"}, 0, mcpclient.DeliveryRPCError, false, mcpclient.AnswerResult, true},
		{"both late", map[string]any{"delay_ms": 700, "twice": "different", "gap_ms": 100}, 150 * time.Millisecond, mcpclient.DeliveryUnknown, true, mcpclient.AnswerResult, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprintf("k-second-%06d", i)
			var a answers
			out := call(t, c, "answer", tt.args, mcpclient.CallOptions{Key: key, IdleTimeout: tt.idle, OnAnswer: a.on})
			if out.Kind != tt.kind {
				t.Fatalf("outcome %+v", out)
			}
			want := 1
			if tt.firstIsLate {
				want = 2
			}
			got := late.waitN(t, key, want)
			if tt.firstIsLate && (got[0].Second || got[0].Class != mcpclient.AnswerResult) {
				t.Errorf("the first, late answer: %+v", got[0])
			}
			second := got[want-1]
			if !second.Second || second.Class != tt.class || second.RPCID != out.RPCID || second.Session != out.Session {
				t.Fatalf("second answer %+v", second)
			}
			switch tt.class {
			case mcpclient.AnswerResult:
				if second.ResultJSON == nil || bytes.Contains(second.ResultJSON, []byte(`"isError":true`)) != tt.isError || second.Raw != nil {
					t.Errorf("second result %s", second.ResultJSON)
				}
				if out.Kind == mcpclient.DeliveryResult && !tt.isError && !bytes.Equal(second.ResultJSON, out.ResultJSON) {
					t.Errorf("the same answer twice: %s, then %s", out.ResultJSON, second.ResultJSON)
				}
			case mcpclient.AnswerUnusable:
				if second.ResultJSON != nil || second.RPCError != nil || second.Raw == nil || second.Why != "result is null" {
					t.Errorf("second unusable %+v", second)
				}
			}
			if n := a.count(); n > 1 || (n == 1) != (out.Kind != mcpclient.DeliveryUnknown) {
				t.Errorf("OnAnswer was given %d answers", n)
			}
		})
	}

	// A server that repeats itself is heard a few times, no more.
	out := call(t, c, "answer", map[string]any{"twice": "many"}, mcpclient.CallOptions{Key: "k-second-many0001"})
	if out.Kind != mcpclient.DeliveryResult {
		t.Fatalf("many: %+v", out)
	}
	late.waitN(t, "k-second-many0001", 4)
	// Answers are passed on in the order they came: once a late answer
	// written after them is, all the repeats have been read.
	if out := call(t, c, "answer", map[string]any{"delay_ms": 600}, mcpclient.CallOptions{Key: "k-second-flush001", IdleTimeout: 100 * time.Millisecond}); out.Kind != mcpclient.DeliveryUnknown {
		t.Fatalf("flush: %+v", out)
	}
	late.wait(t, "k-second-flush001")
	if n := len(late.all("k-second-many0001")); n != 4 {
		t.Errorf("%d of 8 repeats passed on, want 4", n)
	}
	// The session is none the worse for it.
	if out := call(t, c, "echo", nil, mcpclient.CallOptions{}); out.Kind != mcpclient.DeliveryResult {
		t.Errorf("echo after: %+v", out)
	}
}
