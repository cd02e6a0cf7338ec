package mcpclient

import (
	"bytes"
	"context"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The tap's two ends of the child's pipes: tapWriter, its stdin, on which
// mcp-go's lines and the tap's own tools/call requests are written whole;
// and tapReader, its stdout as mcp-go reads it, split into lines that are
// shown to the tap first, and bounded in length.

// tapWriter is the child's stdin, written by mcp-go (Write) and by
// toolsCall (send). Each writes one whole line per call; the lock keeps the
// lines whole.
type tapWriter struct {
	t      *tap
	w      io.WriteCloser
	broken func()
	// mu guards w: it is held across each write, so that lines stay whole,
	// and is taken before tap.mu (lock order: see tap).
	mu sync.Mutex
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
	stops := []func() bool{context.AfterFunc(ctx, cut)}
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
	// A plain write has no context of its own: only the session's end cuts it.
	stop := w.bound(context.Background())
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

// feed splits what the child wrote into lines, shows each to the tap, and
// queues for mcp-go those the tap does not take. A line without its end
// waits in partial (up to maxLine), so that a whole line is either taken
// or passed on.
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
