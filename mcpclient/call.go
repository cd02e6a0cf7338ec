package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
)

// CallOptions tune one Call.
type CallOptions struct {
	// Key is sent in params._meta[KeyMetaField] when not empty.
	Key string
	// KeyArg, when set, also puts Key in the arguments under this name (the
	// caller's map is not modified). KeyArg without Key is refused.
	KeyArg string
	// RawArgs, when set, are the arguments as JSON (an object), sent as
	// written instead of args encoded: a proxy passes its host's own bytes.
	// Ignored with KeyArg, which must add to them.
	RawArgs json.RawMessage
	// IdleTimeout ends the call as unknown when neither an answer nor a
	// progress notification came for this long; each progress resets it.
	// 0 means no idle clock.
	IdleTimeout time.Duration
	// MaxTotal ends the call as unknown this long after it began, whatever
	// progress says. 0 means no absolute clock.
	MaxTotal time.Duration
	// OnProgress receives progress for this call on the caller's own
	// goroutine, coalesced to the latest when it is slow; never after Call
	// returns.
	OnProgress func(Progress)
	// OnAnswer, when set, is given the server's answer as soon as the
	// session's reader has it (and has handled the server's lines before
	// it), on that goroutine, ahead of the caller's own goroutine waking up:
	// a proxy passes a read's answer on from there. It
	// gets only what Call will report: a usable answer (AnswerResult, see
	// ClassifyResult, or AnswerRPCError), to a request not cancelled; never
	// an unusable one, nor a second answer.
	// It is decided while the call is running, but when a clock fires just as
	// the answer comes it may run while, or just after, Call returns (with
	// that same answer): a caller that acts on both must let only one of
	// them act. While it runs, the session reads nothing else from the
	// server: it must not wait on anything but a write.
	OnAnswer func(result json.RawMessage, rpcErr *RPCError)
	// OnSent is called with the JSON-RPC id of each tools/call request
	// written for this call (one call may send several); all of them before
	// Call returns.
	OnSent func(session int, rpcID string)
}

// Markers used as context causes, so the outcome can say which clock fired.
var (
	errCauseIdle     = fmt.Errorf("%w", ErrIdleTimeout)
	errCauseAbsolute = fmt.Errorf("%w", ErrAbsoluteTimeout)
)

// Call sends one tools/call and reports what is known about it. It never
// resends on its own, except that a request provably not written because
// the session had just died is sent once on a fresh session.
//
// On either clock, and when ctx ends, the call's context is cancelled; the
// server is then sent notifications/cancelled for the request (for every
// tools/call cancelled after the write, see toolsCall), and the outcome
// is unknown: a cancel is a request, not proof that nothing happened.
func (c *Client) Call(ctx context.Context, tool string, args map[string]any, o CallOptions) Delivery {
	if o.KeyArg != "" && o.Key == "" {
		return Delivery{Kind: DeliveryNotSent, EndedAt: time.Now(),
			Err: fmt.Errorf("call %s: key argument %q set without a key", tool, o.KeyArg)}
	}
	for attempt := 0; ; attempt++ {
		s, err := c.session(ctx)
		if err != nil {
			return Delivery{Kind: DeliveryNotSent, EndedAt: time.Now(), Err: fmt.Errorf("call %s: %w", tool, err)}
		}
		out := c.callOn(ctx, s, tool, args, o)
		if out.Kind == DeliveryNotSent && !s.alive() && ctx.Err() == nil && attempt == 0 {
			continue
		}
		return out
	}
}

func (c *Client) callOn(ctx context.Context, s *session, tool string, args map[string]any, o CallOptions) Delivery {
	rawArgs := o.RawArgs
	if o.KeyArg != "" {
		rawArgs = nil
		a := make(map[string]any, len(args)+1)
		for k, v := range args {
			a[k] = v
		}
		a[o.KeyArg] = o.Key
		args = a
	}
	// The token names the call on the wire twice: progress token and
	// JSON-RPC id.
	token := c.newToken()

	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	wc := &wireCall{token: token, key: o.Key, tool: tool, session: s.n, cancel: cancel, onAnswer: o.OnAnswer}

	var eventsDone chan struct{}
	if o.OnProgress == nil {
		// Only OnSent, which comes from this goroutine's own write: toolsCall
		// calls it right after the write. A goroutine to hand it to cost a
		// guarded write its start and, before Call could return, a wait for
		// its end (BenchmarkWriteThroughProxy).
		wc.onSent = o.OnSent
	} else {
		// Progress comes from the session's read loop, which must not wait
		// on a slow callback; sent ids go the same way, in order.
		wc.events = newCallEvents()
		eventsDone = make(chan struct{})
		go func() {
			defer close(eventsDone)
			wc.events.run(s.n, o.OnSent, o.OnProgress)
		}()
	}
	if o.IdleTimeout > 0 {
		// Created before register: the read loop may reset it from then on.
		wc.idleFor = o.IdleTimeout
		wc.idle = time.AfterFunc(o.IdleTimeout, func() { cancel(errCauseIdle) })
	}
	var abs *time.Timer
	if o.MaxTotal > 0 {
		abs = time.AfterFunc(o.MaxTotal, func() { cancel(errCauseAbsolute) })
	}
	stopClocks := func() {
		if wc.idle != nil {
			wc.idle.Stop()
		}
		if abs != nil {
			abs.Stop()
		}
	}

	var out Delivery
	if !s.tap.register(wc) {
		stopClocks()
		out = Delivery{Kind: DeliveryNotSent, Session: s.n, EndedAt: time.Now(),
			Err: fmt.Errorf("call %s: %w", tool, s.lostError())}
	} else {
		err := s.toolsCall(callCtx, wc, args, rawArgs)
		out = s.tap.finish(wc, err, ctx, callCtx, stopClocks)
		if out.Kind == DeliveryUnknown && out.Reason == ReasonConnectionLost {
			out.Err = fmt.Errorf("call %s: %w", tool, s.lostError())
		} else if out.Err != nil && out.Kind != DeliveryRPCError {
			out.Err = fmt.Errorf("call %s (session %d): %w", tool, s.n, out.Err)
		}
	}
	if wc.events != nil {
		wc.events.close()
		<-eventsDone
	}
	return out
}

// finish decides the outcome of a call once toolsCall has returned (decide)
// and stops the tap tracking what the outcome settles (settle).
func (t *tap) finish(wc *wireCall, err error, parent, callCtx context.Context, stopClocks func()) Delivery {
	t.mu.Lock()
	defer t.mu.Unlock()
	// From here on, progress for this call is ignored and any answer to it
	// is late.
	wc.ended = true
	delete(t.byToken, wc.token)
	stopClocks()
	var terr *transport.Error
	e := ending{err: err}
	e.reason, e.reasonErr = unknownReason(err, parent, callCtx, errors.As(err, &terr))
	last := wc.lastWritten()
	if last != nil {
		e.sent, e.resp = true, last.resp
	}
	out := decide(e)
	out.Session, out.SentAt, out.EndedAt = wc.session, wc.firstSent(), time.Now()
	if last != nil {
		out.RPCID = rpcIDText(last.id)
	}
	t.settle(wc, last, out.Kind == DeliveryUnknown)
	return out
}

// ending is what is known of a call when toolsCall has returned.
type ending struct {
	sent bool      // a byte of its last request reached the pipe
	resp *wireResp // the answer to that request, whatever toolsCall made of it; nil if none came
	err  error     // what toolsCall returned
	// Why toolsCall gave up (unknownReason), for a call that is unknown.
	reason    UnknownReason
	reasonErr error
}

// decide is the sent / not sent / unknown truth table: the outcome of a call
// from its ending, its answer classified once, the same way everywhere. It
// is a pure function (but for classify's caching) and fills only the
// members that say what happened: Kind, Reason, Err and the answer's.
func decide(e ending) Delivery {
	var out Delivery
	switch {
	case !e.sent:
		// Not one byte of any request for this call reached the pipe.
		out.Kind, out.Err = DeliveryNotSent, e.err
	case e.resp == nil:
		out.Kind, out.Reason, out.Err = DeliveryUnknown, e.reason, e.reasonErr
	default:
		resp := e.resp
		switch class := resp.classify(); {
		case class == AnswerRPCError && !resp.afterCancel:
			// The server answered with an error before any cancel of ours.
			out.Kind, out.RPCError, out.Err = DeliveryRPCError, resp.rpcErr, resp.rpcErr
		case class == AnswerResult && !(resp.isError && resp.afterCancel):
			// A result is a result, even one that came as the call was
			// giving up on it.
			out.Kind, out.ResultJSON = DeliveryResult, resp.result
		case class == AnswerUnusable && !resp.afterCancel:
			// Not an answer that says anything: unknown, its bytes kept.
			out.Kind, out.Reason = DeliveryUnknown, ReasonProtocolError
			out.Raw, out.RawTruncated = bounded(resp.line)
			out.Why = resp.why
			out.Err = fmt.Errorf("%w: %s", ErrUnusableAnswer, resp.why)
		default:
			// An answer to our cancel: an error or a tool error says how
			// the handler stopped, not whether the work took effect, and an
			// unusable one says nothing. The call stays unknown and the
			// answer goes out as late evidence (settle).
			out.Kind, out.Reason, out.Err = DeliveryUnknown, e.reason, e.reasonErr
		}
	}
	return out
}

// settle forgets the requests of an ended call whose answers no longer
// matter, remembers the answered ones for their second answers, and sends
// an answer to our cancel of an unknown call out as late evidence. Called
// with mu held.
func (t *tap) settle(wc *wireCall, last *wireReq, unknown bool) {
	for _, r := range wc.reqs {
		if r.resp == nil {
			if unknown {
				continue // keep listening for its answer: it comes late
			}
			delete(t.byID, r.id)
			continue
		}
		// Answered: further answers to it are second answers.
		delete(t.byID, r.id)
		t.remember(r)
		// Earlier requests of a multi round-trip call were answered with
		// input_required; only the last one can carry the outcome.
		if unknown && r == last && r.resp.afterCancel {
			t.late.push(lateFrom(r))
		}
	}
	if unknown {
		wc.unknown = true
	}
	t.track()
}

func unknownReason(err error, parent, callCtx context.Context, isTransport bool) (UnknownReason, error) {
	cause := context.Cause(callCtx)
	switch {
	case errors.Is(cause, ErrIdleTimeout):
		return ReasonIdleTimeout, fmt.Errorf("%w; the request was sent and may have taken effect", ErrIdleTimeout)
	case errors.Is(cause, ErrAbsoluteTimeout):
		return ReasonAbsoluteTimeout, fmt.Errorf("%w; the request was sent and may have taken effect", ErrAbsoluteTimeout)
	case errors.Is(cause, ErrConnectionLost):
		return ReasonConnectionLost, ErrConnectionLost
	case parent.Err() != nil:
		return ReasonCancelled, fmt.Errorf("cancelled after the request was sent (%w); it may have taken effect", context.Cause(parent))
	case errorsIsAny(err, transport.ErrTransportClosed) || isTransport:
		return ReasonConnectionLost, ErrConnectionLost
	case err == nil:
		// The client library has an answer that mcp-confirm did not see as
		// this request's (not expected: every stream of the request is
		// watched). Nothing was cancelled, so the reason must not say so.
		return ReasonProtocolError, errors.New("the client reported an answer that was not seen on the wire; the request was sent and may have taken effect")
	default:
		return ReasonProtocolError, fmt.Errorf("no usable answer: %w", err)
	}
}
