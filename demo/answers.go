package demo

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
)

// Answer faults (--unusable-answer, --answer-twice) are injected on the
// wire, around the stdio transport, not in the tool handler: what they
// damage is the response line itself, which a handler never writes.
//
// How it works, and what it relies on:
//
//   - stdin is wrapped by a reader that passes every byte through to mcp-go
//     unchanged and, on the side, splits it into lines; a line that is a
//     JSON-RPC request with method "tools/call" and params.name
//     "create_order" has its id noted. A line is noted when Read returns it,
//     so before mcp-go has even seen it, let alone answered it.
//   - stdout is wrapped by a line-oriented writer: bytes are buffered up to a
//     newline, and each complete line is looked at once. A response (an "id"
//     and no "method") to a noted id is a create_order answer: the id is
//     forgotten, and the line is rewritten or doubled; every other line
//     (notifications, other answers) is written unchanged. mcp-go v1.2.1
//     writes each message as one fmt.Fprintf(w, "%s\n", json) under a mutex
//     (StdioServer.writeResponse; its requests to the client also end in a
//     newline), so a line never straddles two Writes in practice; the buffer
//     only makes that an optimisation, not an assumption.
//
// Counting is per process: "the first N" create_order answers this process
// writes, whatever they say (a fresh commit, a replay, a failure). The first
// --unusable-answer N answers are replaced; the first --answer-twice N are
// written twice (an answer replaced by an unusable one is not also doubled).

// Kinds of unusable answer (--unusable-answer). Each keeps the response's
// JSON-RPC id, so the client can tell which request it answers.
const (
	UnusableNull          = "null"           // "result": null
	UnusableString        = "string"         // "result": "a string"
	UnusableIsErrorString = "iserror_string" // the result, with "isError": "yes"
	UnusableInputRequired = "input_required" // the result, with "resultType": "input_required"
	UnusableInvalidJSON   = "invalid_json"   // the line cut short: not valid JSON, "id" still before the damage
)

// UnusableKinds are the kinds --unusable-answer picks from.
var UnusableKinds = []string{UnusableNull, UnusableString, UnusableIsErrorString, UnusableInputRequired, UnusableInvalidJSON}

// UnusableAnswerKind is the kind of the n-th (from 1) unusable answer a
// server started with --seed seed writes: a draw per execution, the same for
// the same seed (so a test that chose the seed knows what was sent).
func UnusableAnswerKind(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, 0x756e757361626c65^uint64(n)))
	return UnusableKinds[r.IntN(len(UnusableKinds))]
}

// SecondAnswerDiffers says whether --answer-twice writes a second copy that
// differs from the first, for an answer whose order_id is orderID: it does
// when the order id is odd (order_id + 1000000 in the copy), so half the
// orders get a contradicting second answer and half an identical one; an
// answer with no order id (a failure) is repeated identically.
func SecondAnswerDiffers(orderID int64) bool { return orderID%2 != 0 }

// secondAnswerShift is added to order_id in a differing second copy.
const secondAnswerShift = 1000000

// answerFaults is the state both wrappers share.
type answerFaults struct {
	unusable, twice int // the flags
	seed            uint64
	log             *slog.Logger

	mu       sync.Mutex
	noted    map[string]string // normalised request id → idempotency key, for create_order requests not yet answered
	answers  int               // create_order answers written so far
	replaced int               // of them replaced by an unusable line
	doubled  int               // of them written twice
}

func newAnswerFaults(o Options, log *slog.Logger) *answerFaults {
	return &answerFaults{unusable: o.UnusableAnswer, twice: o.AnswerTwice, seed: o.Seed, log: log, noted: map[string]string{}}
}

// wrap returns the transport's stdin and stdout with the faults in place.
func (f *answerFaults) wrap(stdin io.Reader, stdout io.Writer) (io.Reader, io.Writer) {
	return &requestTap{r: stdin, f: f}, &answerWriter{w: stdout, f: f}
}

// maxLine bounds the bytes either wrapper keeps of a line not yet ended; a
// longer line is passed through (stdin) or written as is (stdout) unexamined.
const maxLine = 4 << 20

// requestTap passes stdin through and notes create_order request ids.
type requestTap struct {
	r    io.Reader
	f    *answerFaults
	buf  []byte
	skip bool // inside an over-long line
}

func (t *requestTap) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	b := p[:n]
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if !t.skip {
				t.buf = append(t.buf, b...)
				if len(t.buf) > maxLine {
					t.buf, t.skip = nil, true
				}
			}
			break
		}
		if !t.skip {
			t.buf = append(t.buf, b[:i]...)
			t.f.request(t.buf)
		}
		t.buf, t.skip = t.buf[:0], false
		b = b[i+1:]
	}
	return n, err
}

// request notes line's id when it is a tools/call of create_order.
func (f *answerFaults) request(line []byte) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name string         `json:"name"`
			Args map[string]any `json:"arguments"`
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil || m.Method != "tools/call" || m.Params.Name != "create_order" {
		return
	}
	id, ok := idKey(m.ID)
	if !ok {
		return
	}
	key, _ := m.Params.Meta["io.github.mcp-confirm/idempotency-key"].(string)
	if key == "" {
		key, _ = m.Params.Args["idempotency_key"].(string)
	}
	f.mu.Lock()
	f.noted[id] = key
	f.mu.Unlock()
}

// idKey normalises a JSON-RPC id (a number or a string) so that a request's
// and its response's spellings compare equal.
func idKey(raw json.RawMessage) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return "", false
	}
	switch x := v.(type) {
	case json.Number:
		return "n:" + x.String(), true
	case string:
		return "s:" + x, true
	}
	return "", false
}

// answerWriter writes stdout line by line, applying the faults to
// create_order answers.
type answerWriter struct {
	w   io.Writer
	f   *answerFaults
	mu  sync.Mutex
	buf []byte
}

func (a *answerWriter) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.buf = append(a.buf, p...)
	var out []byte
	for {
		i := bytes.IndexByte(a.buf, '\n')
		if i < 0 {
			break
		}
		out = append(out, a.f.response(a.buf[:i+1])...)
		a.buf = a.buf[i+1:]
	}
	if len(a.buf) > maxLine {
		out, a.buf = append(out, a.buf...), nil
	}
	if len(a.buf) == 0 {
		a.buf = nil // do not keep a large backing array
	}
	if len(out) > 0 {
		if _, err := a.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// response returns what to write for one line (newline included): the line
// itself, or, for a create_order answer under a fault, its replacement.
func (f *answerFaults) response(line []byte) []byte {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	if json.Unmarshal(line, &m) != nil || m.Method != nil || len(m.ID) == 0 {
		return line
	}
	id, ok := idKey(m.ID)
	if !ok {
		return line
	}
	f.mu.Lock()
	key, ours := f.noted[id]
	if !ours {
		f.mu.Unlock()
		return line
	}
	delete(f.noted, id)
	f.answers++
	replace := f.replaced < f.unusable
	double := !replace && f.doubled < f.twice
	if replace {
		f.replaced++
	}
	if double {
		f.doubled++
	}
	n := f.replaced
	f.mu.Unlock()

	switch {
	case replace:
		kind := UnusableAnswerKind(f.seed, n)
		f.log.Warn("create_order answered with an unusable line (--unusable-answer)", "key", key, "kind", kind)
		return unusableLine(kind, m.ID, line)
	case double:
		second, differs := secondCopy(line)
		f.log.Warn("create_order answered twice (--answer-twice)", "key", key, "second_differs", differs)
		return append(append([]byte{}, line...), second...)
	}
	return line
}

// unusableLine is a response to id that is not a usable tool result.
func unusableLine(kind string, id json.RawMessage, line []byte) []byte {
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(line, &resp)
	head := `{"jsonrpc":"2.0","id":` + string(id) + `,"result":`
	switch kind {
	case UnusableNull:
		return []byte(head + "null}\n")
	case UnusableString:
		return []byte(head + `"a string"}` + "\n")
	case UnusableIsErrorString, UnusableInputRequired:
		var r map[string]json.RawMessage
		if json.Unmarshal(resp.Result, &r) != nil || r == nil {
			r = map[string]json.RawMessage{"content": json.RawMessage(`[]`)}
		}
		if kind == UnusableIsErrorString {
			r["isError"] = json.RawMessage(`"yes"`)
		} else {
			r["resultType"] = json.RawMessage(`"input_required"`)
		}
		b, _ := json.Marshal(r)
		return []byte(head + string(b) + "}\n")
	default: // UnusableInvalidJSON
		body := resp.Result
		if len(body) < 2 {
			body = json.RawMessage(`{"content":[{"type":"text","text":"cut off"}]}`)
		}
		return []byte(head + string(body[:len(body)/2]) + "\n")
	}
}

// secondCopy is the second copy of an answer line: the same bytes, or, when
// SecondAnswerDiffers for its order id, the same answer with order_id moved
// by secondAnswerShift (in structuredContent and in the text block that
// repeats it).
func secondCopy(line []byte) (second []byte, differs bool) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var resp map[string]any
	if dec.Decode(&resp) != nil {
		return line, false
	}
	result, _ := resp["result"].(map[string]any)
	sc, _ := result["structuredContent"].(map[string]any)
	num, _ := sc["order_id"].(json.Number)
	orderID, err := strconv.ParseInt(string(num), 10, 64)
	if err != nil || !SecondAnswerDiffers(orderID) {
		return line, false
	}
	sc["order_id"] = orderID + secondAnswerShift
	if content, ok := result["content"].([]any); ok {
		text, _ := json.Marshal(sc)
		for _, c := range content {
			if block, ok := c.(map[string]any); ok && block["type"] == "text" {
				block["text"] = string(text)
			}
		}
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return line, false
	}
	return append(b, '\n'), true
}
