package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// The tap sits between mcp-go's stdio transport and the child's pipes, and
// it is how a tools/call reaches the server and comes back (toolscall.go):
// mcp-go hides the JSON-RPC ids it assigns and drops any response that
// arrives after the caller's context ended, and the engine needs both (the
// id for the journal, the late response as evidence). So the tap reads
// every line that crosses: outgoing tools/call requests are tied to their
// call by the unique progress token in _meta (one call is one wire request
// today; the tap keeps a list per call so it stays right if that changes),
// outgoing notifications/cancelled are noted, and incoming responses are
// matched by id and, when they answer a tools/call, kept from mcp-go: the
// first answer to a request is its call's (or, once the call has ended as
// unknown, a late result), a further one is passed on as a second answer
// (within bounds: maxSecondAnswers, answeredWindow). Every answer is judged
// by one classifier (answer.go), wherever it goes. The handshake,
// tools/list and relayed requests still go through mcp-go.
// It must stay cheap: lines that cannot matter are rejected by a substring
// test before any JSON is decoded.

// wireCall is one Call as the tap sees it. Fields are guarded by tap.mu.
type wireCall struct {
	token   string
	key     string
	tool    string
	session int
	reqs    []*wireReq
	ended   bool
	unknown bool
	cancel  func(error) // ends the call's context with a cause
	events  *callEvents // nil when the caller wants no callbacks
	idle    *time.Timer // reset by progress; nil without an idle clock
	idleFor time.Duration
	// onAnswer is CallOptions.OnAnswer; it is not given an answer that
	// comes after ended.
	onAnswer func(json.RawMessage, *RPCError)
}

// wireReq is one tools/call request on the wire.
type wireReq struct {
	call       *wireCall
	id         string // the id's JSON text, as written
	written    bool   // at least one byte reached the pipe
	sentAt     time.Time
	cancelSent bool // notifications/cancelled for it was written
	resp       *wireResp
	answered   chan struct{} // closed when resp is set
	seconds    int           // further answers passed on as Second (at most maxSecondAnswers)
}

// wireResp is one answer line. Everything but line, afterCancel and at is
// set by classify, which reads the line once.
type wireResp struct {
	line []byte // the whole response line (a copy)
	// Before classify: the result as sliced out of a known layout (a
	// subslice of line, unchecked), or nil. After: the result member of an
	// AnswerResult.
	result      json.RawMessage
	rpcErr      *RPCError // an AnswerRPCError's error object
	afterCancel bool
	at          time.Time

	classified bool
	class      AnswerClass
	isError    bool   // AnswerResult: its isError
	why        string // AnswerUnusable: what is wrong
}

// classify judges the answer, once (judge, answer.go): valid JSON, then
// exactly one of a usable result and a JSON-RPC error object, else
// unusable. Called by one goroutine at a time: the read loop's (for
// OnAnswer, before the answer is shared), the caller's (toolsCall, finish),
// or the late queue's once the call ended.
func (r *wireResp) classify() AnswerClass {
	if !r.classified {
		r.class, r.isError, r.why = r.judge()
		r.classified = true
	}
	return r.class
}

func (c *wireCall) firstSent() time.Time {
	for _, r := range c.reqs {
		if r.written {
			return r.sentAt
		}
	}
	return time.Time{}
}

func (c *wireCall) lastWritten() *wireReq {
	for i := len(c.reqs) - 1; i >= 0; i-- {
		if c.reqs[i].written {
			return c.reqs[i]
		}
	}
	return nil
}

// maxSecondAnswers bounds the further answers to one request that are
// passed on (LateResult.Second); more are read and dropped.
const maxSecondAnswers = 4

// answeredWindow bounds how many answered requests of ended calls a tap
// remembers, to recognise a second answer to them: the last 1024 of the
// session. An answer to one answered earlier than that is read off the pipe
// and dropped, as is one to a request the session never sent.
const answeredWindow = 1024

// answeredReq is what the tap remembers of an answered request of an ended
// call (not its answer: a line may be large).
type answeredReq struct {
	key, tool  string
	session    int
	id         string
	cancelSent bool
	seconds    int
}

type tap struct {
	session int
	late    *lateQueue

	mu      sync.Mutex
	byToken map[string]*wireCall // calls still running
	byID    map[string]*wireReq  // requests we still want the response of
	gone    bool                 // the session is over: no new calls
	// Answered requests of ended calls, for their second answers: at most
	// answeredWindow, the oldest forgotten first (ring holds their ids in
	// the order they came, next is where the next one goes).
	answered map[string]answeredReq
	ring     []string
	next     int
	tracked  atomic.Int32 // len(byID)+len(answered), read without the lock

	// Lines on stdout that are not JSON-RPC: counted for error messages,
	// since a server that logs to stdout is the most common broken setup.
	nonJSON      atomic.Int64
	firstNonJSON atomic.Pointer[string]
}

func newTap(session int, late *lateQueue) *tap {
	return &tap{
		session:  session,
		late:     late,
		byToken:  map[string]*wireCall{},
		byID:     map[string]*wireReq{},
		answered: map[string]answeredReq{},
	}
}

// track updates tracked after byID or answered changed. Called with mu held.
func (t *tap) track() { t.tracked.Store(int32(len(t.byID) + len(t.answered))) }

// remember keeps r, answered and no longer in byID, for its second answers,
// forgetting the oldest beyond answeredWindow. Called with mu held.
func (t *tap) remember(r *wireReq) {
	if t.ring == nil {
		t.ring = make([]string, answeredWindow)
	}
	if old := t.ring[t.next]; old != "" {
		delete(t.answered, old)
	}
	t.ring[t.next] = r.id
	t.next = (t.next + 1) % len(t.ring)
	t.answered[r.id] = answeredReq{key: r.call.key, tool: r.call.tool, session: r.call.session,
		id: r.id, cancelSent: r.cancelSent, seconds: r.seconds}
}

// second passes on a further answer to a request already answered, within
// the bound. Called with mu held.
func (t *tap) second(key, tool string, session int, id string, afterCancel bool, seconds *int, line []byte) {
	if *seconds >= maxSecondAnswers {
		return
	}
	*seconds++
	resp := &wireResp{line: bytes.Clone(line), afterCancel: afterCancel, at: time.Now()}
	t.late.push(lateItem{key: key, tool: tool, session: session, rpcID: rpcIDText(id), resp: resp, second: true})
}

// register adds a call before its request is written. It fails when the
// session is already over, in which case nothing will be written.
func (t *tap) register(c *wireCall) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gone {
		return false
	}
	t.byToken[c.token] = c
	return true
}

// failAll ends the session for the tap: every running call is cancelled with
// cause, at once, and no new call may register.
func (t *tap) failAll(cause error) {
	t.mu.Lock()
	t.gone = true
	calls := make([]*wireCall, 0, len(t.byToken))
	for _, c := range t.byToken {
		calls = append(calls, c)
	}
	t.mu.Unlock()
	for _, c := range calls {
		c.cancel(cause)
	}
}

var (
	markCancelled = []byte(`"notifications/cancelled"`)
	markID        = []byte(`"id"`)
	// mcp-go marshals every message with these fields first, in this order.
	fastRequest  = []byte(`{"jsonrpc":"2.0","id":`)
	fastMethod   = []byte(`,"method":"`)
	fastResult   = []byte(`,"result":`)
	fastNotifRPC = []byte(`{"jsonrpc":"2.0","method":`)
	// The TypeScript SDK writes a response as {"result":...,"jsonrpc":"2.0","id":N}.
	tsResult = []byte(`{"result":`)
	tsTail   = []byte(`,"jsonrpc":"2.0","id":`)
)

// parseResponse returns the id of an incoming response and, on the fast
// paths (mcp-go's layout and the TypeScript SDK's), its raw result, a
// subslice of line. ok is false for anything that is not a
// response. With ok and neither result nor error, the caller decodes in full.
func parseResponse(line []byte) (id string, result json.RawMessage, ok bool) {
	if bytes.HasPrefix(line, fastNotifRPC) {
		return "", nil, false // a notification or a request from the server
	}
	if rest, found := bytes.CutPrefix(line, fastRequest); found {
		if i := bytes.IndexByte(rest, ','); i > 0 {
			after := rest[i:]
			if bytes.HasPrefix(after, fastResult) && after[len(after)-1] == '}' {
				return string(rest[:i]), after[len(fastResult) : len(after)-1], true
			}
			if !bytes.HasPrefix(after, fastMethod) {
				return string(rest[:i]), nil, true
			}
		}
	}
	if bytes.HasPrefix(line, tsResult) && line[len(line)-1] == '}' {
		if i := bytes.LastIndex(line, tsTail); i > len(tsResult) {
			if id := line[i+len(tsTail) : len(line)-1]; plainID(id) {
				return string(id), line[len(tsResult):i], true
			}
		}
	}
	if !bytes.Contains(line, markID) {
		return "", nil, false
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return idBeforeDamage(line)
	}
	if m.Method != "" || len(m.ID) == 0 {
		return "", nil, false
	}
	return string(bytes.TrimSpace(m.ID)), nil, true
}

// idBeforeDamage reads the id of a line that is not valid JSON (or nests too
// deep) when it comes before the damage, and no method does: then the line
// is an answer to that id, unusable, rather than noise, so that its call
// ends with the bytes as evidence instead of waiting for its clock.
func idBeforeDamage(line []byte) (id string, result json.RawMessage, ok bool) {
	var idVal []byte
	it := members{b: line, i: 1}
	for it.next() {
		switch name, _ := memberName(it.key); string(name) {
		case "method":
			return "", nil, false
		case "id":
			idVal = it.val
		}
	}
	if !plainID(idVal) {
		return "", nil, false
	}
	return string(idVal), nil, true
}

// plainID: b is a JSON-RPC id as written by a server in its own layout: a
// number, or a string without escapes or quotes inside.
func plainID(b []byte) bool {
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		return !bytes.ContainsAny(b[1:len(b)-1], `"\\`)
	}
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// outgoing is called with each line mcp-go writes, before it is written:
// a notifications/cancelled for one of our requests is marked, before the
// write, since the server's answer to it may be read before Write returns.
// It returns an undo for when the write fails without a byte written, or
// nil. (Our tools/call lines are written by tapWriter.send, which registers
// them itself.)
func (t *tap) outgoing(p []byte) (undo func()) {
	if !bytes.Contains(p, markCancelled) {
		return nil
	}
	var m struct {
		Method string `json:"method"`
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(p, &m) != nil || m.Method != string(mcp.MethodNotificationCancelled) {
		return nil
	}
	id := string(bytes.TrimSpace(m.Params.RequestID))
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.byID[id]; r != nil {
		if r.cancelSent {
			return nil
		}
		r.cancelSent = true
		return func() {
			t.mu.Lock()
			r.cancelSent = false
			t.mu.Unlock()
		}
	}
	// Answered, and its call ended before the cancel went out (it is written
	// off the caller's goroutine): noted for a second answer.
	if a, ok := t.answered[id]; ok && !a.cancelSent {
		a.cancelSent = true
		t.answered[id] = a
		return func() {
			t.mu.Lock()
			if a, ok := t.answered[id]; ok {
				a.cancelSent = false
				t.answered[id] = a
			}
			t.mu.Unlock()
		}
	}
	return nil
}

// incoming is called with each complete line read from the child's stdout,
// before mcp-go sees it. It reports whether the line was the answer to a
// tools/call of ours: those are the tap's alone (toolsCall waits for them
// here), and mcp-go, which did not send the request, never sees them. An
// answer that is news comes with deliver, which hands it to its call (the
// caller's OnAnswer, then toolsCall): the caller runs it once the lines
// before it have reached mcp-go, so that the server's order holds.
func (t *tap) incoming(line []byte) (ours bool, deliver func()) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return false, nil
	}
	if line[0] != '{' {
		t.noteNonJSON(line)
		return false, nil
	}
	if t.tracked.Load() == 0 {
		return false, nil
	}
	id, result, ok := parseResponse(line)
	if !ok {
		return false, nil
	}
	r, pass, ours := t.record(id, line, result)
	if r == nil {
		return ours, nil
	}
	return true, func() {
		// The caller's OnAnswer runs before toolsCall wakes, not under the
		// lock: it writes to a pipe.
		if pass != nil {
			pass()
		}
		close(r.answered)
	}
}

// tooLarge ends the request an over-long line answers, when its head names
// one of ours, with an unusable answer (why); the line itself is gone.
func (t *tap) tooLarge(head []byte, why string, hand func(deliver func())) {
	head = bytes.TrimSpace(head)
	if len(head) == 0 || head[0] != '{' || t.tracked.Load() == 0 {
		return
	}
	id, _, ok := parseResponse(head)
	if !ok {
		return
	}
	r, pass, _ := t.recordWhy(id, head, nil, why)
	if r == nil {
		return
	}
	hand(func() {
		if pass != nil {
			pass()
		}
		close(r.answered)
	})
}

// record keeps the response line of request id, if it is one of ours, and
// returns that request, whose answered channel the caller must close, and
// the call's OnAnswer bound to the answer when it is to be called. A
// further answer to a request already answered is ours too: it goes to the
// late queue as Second, and record returns no request.
func (t *tap) record(id string, line []byte, result json.RawMessage) (_ *wireReq, pass func(), ours bool) {
	return t.recordWhy(id, line, result, "")
}

// recordWhy is record; a why not empty judges the answer unusable for that
// reason, unread (an over-long line, of which line is the head).
func (t *tap) recordWhy(id string, line []byte, result json.RawMessage, why string) (_ *wireReq, pass func(), ours bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.byID[id]
	if r == nil {
		if a, ok := t.answered[id]; ok {
			t.second(a.key, a.tool, a.session, a.id, a.cancelSent || t.gone, &a.seconds, line)
			t.answered[id] = a
			return nil, nil, true
		}
		return nil, nil, false
	}
	if r.resp != nil {
		// Answered already, and its call has not ended yet.
		c := r.call
		t.second(c.key, c.tool, c.session, r.id, r.cancelSent || t.gone, &r.seconds, line)
		return nil, nil, true
	}
	// Once the session is gone every running call has been cancelled, and
	// its stdin is about to close, which mcp-go servers treat as a cancel of
	// everything in flight: an error from then on answers a cancel.
	resp := &wireResp{afterCancel: r.cancelSent || t.gone, at: time.Now(), line: bytes.Clone(line)}
	if why != "" {
		resp.classified, resp.class, resp.why = true, AnswerUnusable, why
	}
	if result != nil {
		// Sliced out of a known layout; judged off the read loop, by
		// wireResp.classify. result is a subslice of line, so its offset
		// is the difference of their capacities.
		off := cap(line) - cap(result)
		resp.result = resp.line[off : off+len(result)]
	}
	if c := r.call; c.onAnswer != nil && !c.ended && !resp.afterCancel {
		// What toolsCall will make of it, judged here, before resp is
		// shared: only a usable answer is passed on.
		switch resp.classify() {
		case AnswerRPCError:
			e := resp.rpcErr
			pass = func() { c.onAnswer(nil, e) }
		case AnswerResult:
			res := resp.result
			pass = func() { c.onAnswer(res, nil) }
		}
	}
	r.resp = resp
	if r.call.ended {
		// The call already returned to its caller: this is a late answer,
		// usable or not (the late queue classifies it).
		delete(t.byID, id)
		t.remember(r)
		t.track()
		if r.call.unknown {
			t.late.push(lateFrom(r))
		}
	}
	return r, pass, true
}

func lateFrom(r *wireReq) lateItem {
	return lateItem{
		key: r.call.key, tool: r.call.tool, session: r.call.session,
		rpcID: rpcIDText(r.id), resp: r.resp,
	}
}

// onNotification runs on mcp-go's read loop, so it only looks up, resets a
// timer and hands off without blocking.
func (t *tap) onNotification(n mcp.JSONRPCNotification) {
	if n.Method != string(mcp.MethodNotificationProgress) {
		return
	}
	f := n.Params.AdditionalFields
	tok, ok := f["progressToken"].(string)
	if !ok {
		return
	}
	p := Progress{At: time.Now()}
	p.Progress, _ = f["progress"].(float64)
	p.Total, _ = f["total"].(float64)
	p.Message, _ = f["message"].(string)
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.byToken[tok]
	if c == nil || c.ended {
		return // progress after the answer or after we gave up: ignored
	}
	if c.idle != nil {
		c.idle.Reset(c.idleFor)
	}
	if c.events != nil {
		c.events.progress(p)
	}
}

func (t *tap) noteNonJSON(line []byte) {
	if t.nonJSON.Add(1) == 1 {
		s := string(line)
		if len(s) > 200 {
			s = s[:200] + "…"
		}
		t.firstNonJSON.Store(&s)
	}
}

// rpcIDText turns an id's JSON text into the plain string the engine stores.
func rpcIDText(raw string) string {
	if len(raw) > 0 && raw[0] == '"' {
		if s, err := strconv.Unquote(raw); err == nil {
			return s
		}
	}
	return raw
}

// tapWriter is the child's stdin, written by mcp-go (Write) and by
// toolsCall (send). Each writes one whole line per call; the lock keeps the
// lines whole.
type tapWriter struct {
	t      *tap
	w      io.WriteCloser
	broken func()
	mu     sync.Mutex
	// gone ends when the session does; a write still blocked then (a
	// server that stopped reading its stdin) is cut by a write deadline.
	gone context.Context
}

// deadliner is what a pipe from os.Pipe is: a write blocked on a full pipe
// can be cut short.
type deadliner interface{ SetWriteDeadline(time.Time) error }

// bound makes a write blocked on a full pipe return once ctx or the session
// ends, so that no lock is held forever by a server that stopped reading.
// The returned stop must be called when the write is over.
func (w *tapWriter) bound(ctx context.Context) (stop func()) {
	d, ok := w.w.(deadliner)
	if !ok {
		return func() {}
	}
	cut := func() { _ = d.SetWriteDeadline(time.Now()) }
	stops := []func() bool{}
	if ctx != nil {
		stops = append(stops, context.AfterFunc(ctx, cut))
	}
	if w.gone != nil {
		stops = append(stops, context.AfterFunc(w.gone, cut))
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}

// send writes one tools/call request line for c; id is the request id's
// JSON text. The request is registered before the write, since the answer
// can come back before Write returns, and marked written as soon as one
// byte reached the pipe: from then on the call can only end answered or
// unknown, never "not sent". It returns nil when not one byte was written.
func (w *tapWriter) send(ctx context.Context, c *wireCall, id string, line []byte) (*wireReq, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.t
	r := &wireReq{call: c, id: id, answered: make(chan struct{})}
	t.mu.Lock()
	c.reqs = append(c.reqs, r)
	t.byID[id] = r
	t.track()
	t.mu.Unlock()

	stop := w.bound(ctx)
	n, err := w.w.Write(line)
	stop()
	if err == nil && n < len(line) {
		// A Writer must say why it stopped short; one that does not would
		// otherwise leave a call with no request and no error to end it.
		err = io.ErrShortWrite
	}
	if err != nil {
		w.fail()
	}
	t.mu.Lock()
	if n == 0 {
		c.reqs = c.reqs[:len(c.reqs)-1]
		delete(t.byID, id)
		t.track()
		t.mu.Unlock()
		return nil, err
	}
	r.written, r.sentAt = true, time.Now()
	ev := c.events
	t.mu.Unlock()
	if ev != nil {
		ev.sent(rpcIDText(id))
	}
	return r, err
}

func (w *tapWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	undo := w.t.outgoing(p)
	stop := w.bound(nil)
	n, err := w.w.Write(p)
	stop()
	if n == 0 && undo != nil {
		undo()
	}
	if err != nil {
		w.fail()
	}
	return n, err
}

// fail ends the session after a write failed or was cut short (a line may
// be half written: nothing more can be written after it), and returns once
// the session is marked gone, so that the next request starts a new one.
func (w *tapWriter) fail() {
	w.broken()
	if w.gone != nil {
		<-w.gone.Done()
	}
}

func (w *tapWriter) Close() error { return w.w.Close() }

// maxLine bounds one line from the server: a longer one is read off the
// pipe and discarded as it streams, never held, and its call, when its
// start names one of ours, ends unknown: "answer too large". lineLimit is
// maxLine but for tests (export_test.go).
const maxLine = 64 << 20

var lineLimit atomic.Int64

func init() { lineLimit.Store(maxLine) }

// tooLargeHead is how much of an over-long line is kept: enough for its id
// and as bounded evidence.
const tooLargeHead = 4 << 10

// tooLargeWhy says why an over-long answer is not usable.
func tooLargeWhy(limit int) string {
	if limit >= 1<<20 {
		return "answer too large (over " + strconv.Itoa(limit>>20) + " MiB)"
	}
	return "answer too large (over " + strconv.Itoa(limit) + " bytes)"
}

// tapReader is the child's stdout as mcp-go sees it: every line but the
// answers to our tools/call requests, which the tap takes (tap.incoming).
type tapReader struct {
	t   *tap
	r   io.Reader
	buf []byte // read from the child
	out []byte // lines for mcp-go, from off on
	off int
	// The start of a line not yet complete: the pieces as read (copies),
	// joined once the line ends, so that a long line costs its length and
	// no garbage from growing one slice; plen is their total length.
	partial [][]byte
	plen    int
	long    bool  // inside an over-long line, being discarded
	max     int   // lineLimit when the session began
	err     error // the child's stdout ended
	eof     func()
	// Answers read behind lines still on their way to mcp-go: delivered
	// once mcp-go asks for more, by when it has handled all of those
	// (it handles a notification before it reads the next line), so that a
	// server's notification reaches the host before the answer after it.
	held []func()
}

func (r *tapReader) Read(p []byte) (int, error) {
	for r.off == len(r.out) {
		for _, deliver := range r.held {
			deliver()
		}
		r.held = r.held[:0]
		if r.err != nil {
			// mcp-go logs any error other than EOF as a failure; for us a
			// closed or broken pipe is the normal end of a session.
			return 0, io.EOF
		}
		r.out, r.off = r.out[:0], 0
		if r.buf == nil {
			r.buf = make([]byte, 64<<10)
		}
		n, err := r.r.Read(r.buf)
		if n > 0 {
			r.feed(r.buf[:n])
		}
		if err != nil {
			r.err = err
			r.eof()
		}
	}
	n := copy(p, r.out[r.off:])
	r.off += n
	return n, nil
}

// feed splits what the child wrote into lines, shows each to the tap, and
// queues for mcp-go those the tap does not take. A line without its end
// waits in partial (up to maxLine), so that a whole line is either taken
// or passed on.
// take passes a complete line (with its newline) to mcp-go, or hands the
// answer it is to its call: at once when nothing is waiting for mcp-go,
// else after it.
func (r *tapReader) take(line []byte) {
	ours, deliver := r.t.incoming(line[:len(line)-1])
	switch {
	case !ours:
		r.out = append(r.out, line...)
	case deliver == nil:
	case r.off < len(r.out) || len(r.held) > 0:
		r.held = append(r.held, deliver)
	default:
		deliver()
	}
}

func (r *tapReader) feed(b []byte) {
	if r.max == 0 {
		r.max = int(lineLimit.Load())
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			switch {
			case r.long:
			case r.plen+len(b) > r.max:
				r.tooLong(b)
			default:
				r.keep(b)
			}
			return
		}
		line := b[:i+1] // with its newline, as mcp-go reads it
		b = b[i+1:]
		switch {
		case r.long:
			r.long = false
		case r.plen+len(line)-1 > r.max:
			r.tooLong(line)
			r.long = false
		case r.plen > 0:
			whole := make([]byte, 0, r.plen+len(line))
			for _, p := range r.partial {
				whole = append(whole, p...)
			}
			r.dropPartial()
			r.take(append(whole, line...))
		default:
			r.take(line)
		}
	}
}

// keep adds b to partial: into the last piece while it has room (a server
// that writes a byte at a time costs no more), else in a new one.
func (r *tapReader) keep(b []byte) {
	r.plen += len(b)
	if n := len(r.partial); n > 0 {
		last := r.partial[n-1]
		if room := cap(last) - len(last); room > 0 {
			k := min(room, len(b))
			r.partial[n-1], b = append(last, b[:k]...), b[k:]
		}
	}
	if len(b) > 0 {
		r.partial = append(r.partial, append(make([]byte, 0, max(len(b), 64<<10)), b...))
	}
}

func (r *tapReader) dropPartial() {
	clear(r.partial)
	r.partial, r.plen = r.partial[:0], 0
}

// tooLong starts discarding a line that went over the limit (partial, then
// more): it is neither held nor passed on; when its start is an answer to
// one of our requests, that call ends unknown with the head as evidence.
func (r *tapReader) tooLong(more []byte) {
	var head []byte
	for _, p := range append(r.partial, more) {
		if len(head) >= tooLargeHead {
			break
		}
		head = append(head, p[:min(len(p), tooLargeHead-len(head))]...)
	}
	r.t.tooLarge(head, tooLargeWhy(r.max), func(deliver func()) {
		if r.off < len(r.out) || len(r.held) > 0 {
			r.held = append(r.held, deliver)
		} else {
			deliver()
		}
	})
	r.dropPartial()
	r.long = true
}

// result classifies the answer, on the late queue's goroutine (a late
// answer is never judged on the read loop), and says what it is.
func (it lateItem) result() LateResult {
	lr := LateResult{
		Key: it.key, Tool: it.tool, Session: it.session, RPCID: it.rpcID,
		AfterCancel: it.resp.afterCancel, At: it.resp.at, Second: it.second,
	}
	switch lr.Class = it.resp.classify(); lr.Class {
	case AnswerResult:
		lr.ResultJSON = it.resp.result
	case AnswerRPCError:
		lr.RPCError = it.resp.rpcErr
	default:
		lr.Raw, lr.RawTruncated = bounded(it.resp.line)
		lr.Why = it.resp.why
	}
	return lr
}
