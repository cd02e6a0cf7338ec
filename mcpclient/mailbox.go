package mcpclient

import "sync"

// mailbox carries what goroutines that must not block (the session's read
// loop, mostly) post, to one goroutine that may (run), which takes all that
// was posted since it last looked in one go. What a post does to the
// waiting value is the poster's to say: append to a queue, or replace a
// value with a newer one.
//
// Invariant: nothing is posted once close has run, and everything posted
// before is delivered: the last delivery says closed, and run then
// returns.
type mailbox[T any] struct {
	wake chan struct{} // buffered 1: a post or close since run last looked

	mu      sync.Mutex // guards following
	waiting T          // posted since run last took it
	closed  bool
}

func newMailbox[T any]() *mailbox[T] {
	return &mailbox[T]{wake: make(chan struct{}, 1)}
}

// post changes the waiting value with f, under the lock, and wakes run;
// after close it does nothing. f must not block.
func (m *mailbox[T]) post(f func(waiting *T)) {
	m.mu.Lock()
	if !m.closed {
		f(&m.waiting)
	}
	m.mu.Unlock()
	m.poke()
}

// close stops the posts; run delivers what waits and returns.
func (m *mailbox[T]) close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.poke()
}

func (m *mailbox[T]) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// run gives deliver the waiting value (the zero T waits after) each time it
// is woken, until it delivers with closed, after close.
func (m *mailbox[T]) run(deliver func(v T, closed bool)) {
	var zero T
	for range m.wake {
		m.mu.Lock()
		v, closed := m.waiting, m.closed
		m.waiting = zero
		m.mu.Unlock()
		deliver(v, closed)
		if closed {
			return
		}
	}
}

// callEvents hands OnSent and OnProgress to the caller's own goroutine, so a
// slow callback never stalls the read loop. Sent events are queued (each is
// a wire id the journal needs); progress is coalesced to the latest, and
// progress still waiting at close is not reported.
type callEvents struct{ box *mailbox[callBatch] }

// callBatch is what waits for callEvents.run.
type callBatch struct {
	ids  []string
	prog *Progress
}

func newCallEvents() *callEvents { return &callEvents{box: newMailbox[callBatch]()} }

func (e *callEvents) sent(id string) {
	e.box.post(func(b *callBatch) { b.ids = append(b.ids, id) })
}

func (e *callEvents) progress(p Progress) {
	e.box.post(func(b *callBatch) { b.prog = &p })
}

func (e *callEvents) close() { e.box.close() }

// run delivers events until close; the sent ids queued before close are all
// delivered, so OnSent has seen every written request when Call returns.
func (e *callEvents) run(session int, onSent func(int, string), onProgress func(Progress)) {
	e.box.run(func(b callBatch, closed bool) {
		for _, id := range b.ids {
			if onSent != nil {
				onSent(session, id)
			}
		}
		if b.prog != nil && !closed && onProgress != nil {
			onProgress(*b.prog) // progress after the end is not reported
		}
	})
}

// lateQueue carries late answers off the read loop to Options.OnLateResult,
// in order and without dropping any: each one is evidence.
type lateQueue struct{ box *mailbox[[]lateItem] }

type lateItem struct {
	key, tool string
	session   int
	rpcID     string
	resp      *wireResp
	second    bool
}

func newLateQueue() *lateQueue { return &lateQueue{box: newMailbox[[]lateItem]()} }

func (q *lateQueue) push(it lateItem) {
	q.box.post(func(items *[]lateItem) { *items = append(*items, it) })
}

func (q *lateQueue) close() { q.box.close() }

func (q *lateQueue) run(deliver func(LateResult)) {
	q.box.run(func(items []lateItem, _ bool) {
		for _, it := range items {
			if deliver != nil {
				deliver(it.result())
			}
		}
	})
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
