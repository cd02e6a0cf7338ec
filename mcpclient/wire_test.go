package mcpclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestParseResponse(t *testing.T) {
	tests := []struct {
		name, line, id, result string
		ok                     bool
	}{
		{"mcp-go layout", `{"jsonrpc":"2.0","id":4,"result":{"content":[]}}`, "4", `{"content":[]}`, true},
		{"mcp-go error", `{"jsonrpc":"2.0","id":5,"error":{"code":-32603,"message":"x"}}`, "5", "", true},
		{"ts layout", `{"result":{"content":[]},"jsonrpc":"2.0","id":7}`, "7", `{"content":[]}`, true},
		{"ts string id", `{"result":{"a":{"jsonrpc":"2.0","id":5}},"jsonrpc":"2.0","id":"mcp-confirm-x-3"}`, `"mcp-confirm-x-3"`, `{"a":{"jsonrpc":"2.0","id":5}}`, true},
		{"ts error", `{"jsonrpc":"2.0","id":8,"error":{"code":-32602,"message":"x"}}`, "8", "", true},
		{"ts odd id", `{"result":{},"jsonrpc":"2.0","id":"a\"b"}`, `"a\"b"`, "", true},
		{"string id", `{"jsonrpc":"2.0","id":"a-1","result":{}}`, `"a-1"`, `{}`, true},
		{"spaced id", `{"jsonrpc":"2.0","id": "a-1" ,"result":{}}`, `"a-1"`, "", true},
		{"comma in id", `{"jsonrpc":"2.0","id":"a,b","result":{}}`, `"a,b"`, "", true},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t"}}`, "", "", false},
		{"server request", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "", "", false},
		{"other notification order", `{"method":"notifications/message","jsonrpc":"2.0","params":{"id":3}}`, "", "", false},
		// Not valid JSON: an answer all the same when its id comes first.
		{"other layout, malformed", `{"id":"a-1","jsonrpc":"2.0","result":{"content":[],}}`, `"a-1"`, "", true},
		{"other layout, cut", `{"id":"a-1","jsonrpc":"2.0","result":{"content":[{"type":"te`, `"a-1"`, "", true},
		{"other layout, too deep", `{"id":7,"jsonrpc":"2.0","result":{"x":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}}`, "7", "", true},
		{"garbage after an id", `{"id":"a-1" oops`, `"a-1"`, "", true},
		{"malformed request", `{"id":3,"jsonrpc":"2.0","method":"ping","params":{,}}`, "", "", false},
		{"damage before the id", `{"jsonrpc":"2.0" oops,"id":"a-1"}`, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, result, ok := parseResponse([]byte(tt.line))
			if id != tt.id || string(result) != tt.result || ok != tt.ok {
				t.Errorf("got (%q, %q, %v), want (%q, %q, %v)", id, result, ok, tt.id, tt.result, tt.ok)
			}
		})
	}
}

// A result sliced out of a fast layout but followed by other fields is
// caught when validated, and read from the whole line instead.
func TestResultJSONFallsBackToFullDecode(t *testing.T) {
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":4,"result":{"content":[]},"extra":1}`,
		`{"result":{"content":[]},"extra":1,"jsonrpc":"2.0","id":4}`, // TypeScript layout
	} {
		_, result, ok := parseResponse([]byte(line))
		if !ok {
			t.Fatalf("%s: not a response", line)
		}
		r := &wireResp{line: []byte(line), result: result}
		if class := r.classify(); class != AnswerResult || string(r.result) != `{"content":[]}` {
			t.Errorf("%s: %s, result = %s (%s)", line, class, r.result, r.why)
		}
	}
}

// pipeEnd is a child's stdin that takes at most max bytes per write (all
// when max < 0), then fails.
// pipeEnd takes at most max bytes (all when max < 0) and then fails, or,
// with silent, stops short without an error, as no Writer should.
type pipeEnd struct {
	max    int
	silent bool
}

func (p pipeEnd) Write(b []byte) (int, error) {
	if p.max < 0 {
		return len(b), nil
	}
	if p.silent {
		return min(p.max, len(b)), nil
	}
	return min(p.max, len(b)), errors.New("broken pipe")
}
func (pipeEnd) Close() error { return nil }

// send registers a tools/call with its call before writing it. A write that
// put not one byte on the pipe leaves nothing behind (the call was not
// sent); one byte is enough for the request to count as written (the call
// can then only be answered or unknown, never "not sent").
func TestSendTracksWhatReachedThePipe(t *testing.T) {
	line := []byte(`{"jsonrpc":"2.0","id":"p-1","method":"tools/call","params":{}}` + "\n")
	for _, tc := range []struct {
		name    string
		max     int
		silent  bool
		written bool
		err     bool
	}{
		{"whole", -1, false, true, false},
		{"nothing", 0, false, false, true},
		{"in part", 5, false, true, true},
		{"nothing, no error said", 0, true, false, true},
		{"in part, no error said", 5, true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTap(1, newLateQueue())
			broken := false
			w := &tapWriter{t: tp, w: pipeEnd{tc.max, tc.silent}, broken: func() { broken = true }}
			c := &wireCall{token: "p-1", cancel: func(error) {}}
			tp.register(c)
			r, err := w.send(context.Background(), c, `"p-1"`, line)
			if (err != nil) != tc.err || broken != tc.err {
				t.Errorf("err = %v, broken = %v", err, broken)
			}
			if tc.written {
				if r == nil || !r.written || r.sentAt.IsZero() || len(c.reqs) != 1 || tp.byID[`"p-1"`] != r {
					t.Errorf("a request that reached the pipe is not tracked as written: %+v", r)
				}
			} else if r != nil || len(c.reqs) != 0 || len(tp.byID) != 0 || c.lastWritten() != nil {
				t.Errorf("a request that never reached the pipe left %+v, %d requests", r, len(c.reqs))
			}
		})
	}
}

// BenchmarkTapLine is the tap's cost per round trip on mcp-go's layout: one
// tools/call sent and one incoming response for it.
func BenchmarkTapLine(b *testing.B) {
	tp := newTap(1, newLateQueue())
	w := &tapWriter{t: tp, w: pipeEnd{max: -1}, broken: func() {}}
	req := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.github.mcp-confirm/idempotency-key":"k","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"mcp-confirm","version":"dev"},"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":"mcp-confirm-abc-1"},"arguments":{"text":"hello"},"name":"echo"}}`)
	resp := []byte(`{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"fixture","version":"1.2.3"}},"content":[{"type":"text","text":"echo"}],"resultType":"complete","structuredContent":{"args":{"text":"hello"},"has_token":true,"meta_key":"k"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		c := &wireCall{token: "mcp-confirm-abc-1", cancel: func(error) {}}
		tp.register(c)
		if _, err := w.send(context.Background(), c, "1", req); err != nil {
			b.Fatal(err)
		}
		if _, deliver := tp.incoming(resp); deliver != nil {
			deliver()
		}
		if c.reqs[0].resp == nil {
			b.Fatal("response not captured")
		}
		if c.reqs[0].resp.classify() != AnswerResult {
			b.Fatal("no result")
		}
		tp.finish(c, nil, context.Background(), context.Background(), func() {})
	}
}

// chunks is a reader that returns its pieces one Read at a time, as a pipe
// may split lines anywhere.
type chunks struct{ parts []string }

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.parts[0])
	if n < len(c.parts[0]) {
		c.parts[0] = c.parts[0][n:]
	} else {
		c.parts = c.parts[1:]
	}
	return n, nil
}

// The answer to a tracked tools/call is the tap's: mcp-go gets every other
// line, whole and in order, however the pipe split them; the line cut off
// by the end of the stream is not passed on (mcp-go would drop it too).
func TestTapReaderTakesOnlyOurAnswers(t *testing.T) {
	tp := newTap(1, newLateQueue())
	c := &wireCall{token: "mcp-confirm-abc-1", cancel: func(error) {}}
	tp.register(c)
	req := `{"jsonrpc":"2.0","id":"mcp-confirm-abc-1","method":"tools/call","params":{"name":"x","arguments":{},"_meta":{"progressToken":"mcp-confirm-abc-1"}}}` + "\n"
	w := &tapWriter{t: tp, w: pipeEnd{max: -1}, broken: func() {}}
	if _, err := w.send(context.Background(), c, `"mcp-confirm-abc-1"`, []byte(req)); err != nil {
		t.Fatal(err)
	}
	note := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"mcp-confirm-abc-1","progress":1}}` + "\n"
	other := `{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}` + "\n"
	ours := `{"jsonrpc":"2.0","id":"mcp-confirm-abc-1","result":{"content":[]}}` + "\n"
	stream := note + ours + other + `{"jsonrpc":"2.0","id":4`
	var eof bool
	r := &tapReader{t: tp, r: &chunks{parts: []string{stream[:10], stream[10:130], stream[130:131], stream[131:]}}, eof: func() { eof = true }}
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != note+other {
		t.Errorf("mcp-go read:\n%s\nwant:\n%s", got, note+other)
	}
	if !eof {
		t.Error("the end of the stream was not reported")
	}
	select {
	case <-c.reqs[0].answered:
		if resp := c.reqs[0].resp; resp.classify() != AnswerResult || string(resp.result) != `{"content":[]}` {
			t.Errorf("the tap's answer = %s (%s)", resp.result, resp.why)
		}
	default:
		t.Error("the answer did not reach the call")
	}
}

// A line longer than the limit (the real default here) is discarded as it
// streams, never passed on nor held whole, and the lines after it are read
// as usual.
func TestTapReaderDiscardsOverlongLines(t *testing.T) {
	tp := newTap(1, newLateQueue())
	long := `{"jsonrpc":"2.0","method":"x","params":"` + strings.Repeat("a", maxLine) + `"}` + "\n"
	next := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"
	r := &tapReader{t: tp, r: &chunks{parts: []string{long[:1000], long[1000:], next}}, eof: func() {}}
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != next {
		t.Errorf("read %d bytes, want %d", len(got), len(next))
	}
	if r.plen != 0 || len(r.partial) != 0 {
		t.Errorf("the reader still holds %d bytes", r.plen)
	}
}

// An answer over the limit, ended or not, ends its call with an unusable
// answer saying so; mcp-go never sees it.
func TestTapReaderOverlongAnswerIsTooLarge(t *testing.T) {
	for _, ended := range []bool{true, false} {
		tp := newTap(1, newLateQueue())
		c := &wireCall{token: "mcp-confirm-abc-1", cancel: func(error) {}}
		tp.register(c)
		req := `{"jsonrpc":"2.0","id":"mcp-confirm-abc-1","method":"tools/call","params":{}}` + "\n"
		w := &tapWriter{t: tp, w: pipeEnd{max: -1}, broken: func() {}}
		if _, err := w.send(context.Background(), c, `"mcp-confirm-abc-1"`, []byte(req)); err != nil {
			t.Fatal(err)
		}
		ans := `{"jsonrpc":"2.0","id":"mcp-confirm-abc-1","result":{"content":[{"type":"text","text":"` + strings.Repeat("a", 3000)
		if ended {
			ans += `"}]}}` + "\n"
		}
		r := &tapReader{t: tp, max: 1000, r: &chunks{parts: []string{ans[:500], ans[500:]}}, eof: func() {}}
		got, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 0 {
			t.Errorf("ended=%v: mcp-go read %d bytes", ended, len(got))
		}
		select {
		case <-c.reqs[0].answered:
			resp := c.reqs[0].resp
			if resp.classify() != AnswerUnusable || resp.why != "answer too large (over 1000 bytes)" {
				t.Errorf("ended=%v: answer %v (%s)", ended, resp.classify(), resp.why)
			}
			if len(resp.line) > tooLargeHead {
				t.Errorf("ended=%v: kept %d bytes", ended, len(resp.line))
			}
		default:
			t.Errorf("ended=%v: the call got no answer", ended)
		}
	}
}

// appendString's fast path writes what encoding/json writes.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "mcp-confirm-abc-12", "get_budget", `a"b`, `a\b`, "<x>&", "tab\there", "é", "\x7f", "\u2028"} {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); string(got) != string(want) {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	}
}

// OnAnswer is given what toolsCall will make of an answer: the error
// object, or the result when it is usable, and nothing for input_required
// or an unreadable answer.
func TestOnAnswerGetsWhatToolsCallReports(t *testing.T) {
	for _, tc := range []struct {
		name, line, wantResult, wantErr string
	}{
		{"result", `{"jsonrpc":"2.0","id":"t-1","result":{"content":[]}}`, `{"content":[]}`, ""},
		{"error", `{"jsonrpc":"2.0","id":"t-1","error":{"code":-32603,"message":"boom"}}`, "", "boom"},
		// A line with both is unusable, in either order: which one a
		// decoder takes is not the server's answer.
		{"error and result", `{"jsonrpc":"2.0","id":"t-1","error":{"code":-32603,"message":"both"},"result":{"content":[]}}`, "", ""},
		{"result and error", `{"jsonrpc":"2.0","id":"t-1","result":{"content":[]},"error":{"code":-32603,"message":"both"}}`, "", ""},
		{"null error beside a result", `{"jsonrpc":"2.0","id":"t-1","result":{"content":[]},"error":null}`, `{"content":[]}`, ""},
		{"null result beside an error", `{"jsonrpc":"2.0","id":"t-1","result":null,"error":{"code":-32603,"message":"e"}}`, "", "e"},
		{"input required", `{"jsonrpc":"2.0","id":"t-1","result":{"resultType":"input_required","inputRequests":{}}}`, "", ""},
		{"null result", `{"jsonrpc":"2.0","id":"t-1","result":null}`, "", ""},
		{"malformed", `{"jsonrpc":"2.0","id":"t-1","result":{"content":[],}}`, "", ""},
		{"isError not a boolean", `{"jsonrpc":"2.0","id":"t-1","result":{"content":[],"isError":"false"}}`, "", ""},
		{"neither", `{"jsonrpc":"2.0","id":"t-1"}`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTap(1, newLateQueue())
			var gotResult, gotErr string
			calls := 0
			c := &wireCall{token: "t-1", cancel: func(error) {}, onAnswer: func(res json.RawMessage, e *RPCError) {
				calls++
				gotResult = string(res)
				if e != nil {
					gotErr = e.Message
				}
			}}
			tp.register(c)
			w := &tapWriter{t: tp, w: pipeEnd{max: -1}, broken: func() {}}
			if _, err := w.send(context.Background(), c, `"t-1"`, []byte("{}\n")); err != nil {
				t.Fatal(err)
			}
			ours, deliver := tp.incoming([]byte(tc.line))
			if !ours || deliver == nil {
				t.Fatal("the answer was not taken as ours")
			}
			deliver()
			want := 0
			if tc.wantResult != "" || tc.wantErr != "" {
				want = 1
			}
			if calls != want || gotResult != tc.wantResult || gotErr != tc.wantErr {
				t.Errorf("OnAnswer called %d times with result %q error %q; want %d, %q, %q", calls, gotResult, gotErr, want, tc.wantResult, tc.wantErr)
			}
			select {
			case <-c.reqs[0].answered:
			default:
				t.Error("answered was not closed")
			}
		})
	}
}

// A server's notification read in the same chunk as an answer, before it,
// reaches mcp-go (which handles it before it reads on) before the answer
// reaches its call.
func TestAnswerWaitsForTheLinesBeforeIt(t *testing.T) {
	tp := newTap(1, newLateQueue())
	var events []string
	c := &wireCall{token: "t-1", cancel: func(error) {}, onAnswer: func(json.RawMessage, *RPCError) {
		events = append(events, "answer")
	}}
	tp.register(c)
	w := &tapWriter{t: tp, w: pipeEnd{max: -1}, broken: func() {}}
	if _, err := w.send(context.Background(), c, `"t-1"`, []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	note := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"working"}}` + "\n"
	ours := `{"jsonrpc":"2.0","id":"t-1","result":{"content":[]}}` + "\n"
	r := &tapReader{t: tp, r: &chunks{parts: []string{note + ours}}, eof: func() {}}
	br := bufio.NewReader(r) // as mcp-go reads: a line at a time
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			events = append(events, "mcp-go: "+strings.TrimSpace(line)[:30])
		}
		if err != nil {
			break
		}
	}
	want := []string{"mcp-go: " + note[:30], "answer"}
	if !reflect.DeepEqual(events, want) {
		t.Errorf("events %q, want %q", events, want)
	}
	select {
	case <-c.reqs[0].answered:
	default:
		t.Error("answered was not closed")
	}
}
