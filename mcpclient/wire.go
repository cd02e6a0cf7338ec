package mcpclient

import (
	"bytes"
	"encoding/json"
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
// test before any JSON is decoded, and responses are read by field order
// (parse.go, which names its fallback and the tests that hold the two
// equal). The pipes themselves are tapio.go; late answers leave through a
// mailbox (mailbox.go).

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
	events  *callEvents // nil when the caller wants no progress
	// onSent is CallOptions.OnSent when events is nil: called by toolsCall
	// on the caller's goroutine once the request is written.
	onSent  func(session int, rpcID string)
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

// tap is one session's view of the child's pipes: the tools/call requests
// it wrote and is waiting on, the answers it has seen, and its late queue.
//
// Lock order, for every lock in this package: Client.startSem is taken
// before Client.mu, Client.mu before tap.mu (declare asks closeIfIdle),
// tapWriter.mu before tap.mu (a request is registered as it is written),
// and tap.mu before mailbox.mu (late answers and events are posted under
// it); never the reverse. mailbox.mu, session.mu and stderrTail.mu are
// innermost: nothing is locked under them, and no callback (OnLateResult,
// OnSent, OnProgress, OnAnswer) runs under any of these locks.
type tap struct {
	session int
	late    *lateQueue

	mu      sync.Mutex           // guards byToken to next, and the fields of its wireCalls and wireReqs
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

var markCancelled = []byte(`"notifications/cancelled"`)

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
