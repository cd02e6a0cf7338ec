package guard

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// read sends a read call, retrying timeouts and lost connections with
// exponential backoff and jitter, up to the policy's read_attempts. Reads
// change nothing, so resending them is safe; they are not journaled and
// never become unknown: after the last attempt they fail.
//
// With Options.ReadBudget set, all attempts and pauses end within it: a
// proxy must answer its host before the host gives up on its own.
func (g *Guard) read(ctx context.Context, tool string, req Request) (Result, error) {
	timeout, attempts := g.opts.Policy.readSettings()
	var deadline time.Time
	if g.opts.ReadBudget > 0 {
		deadline = time.Now().Add(g.opts.ReadBudget)
	}
	var out mcpclient.Delivery
	expiredOnce := false
	for i := 0; i < attempts; i++ {
		var pause time.Duration
		switch {
		case i > 0 && out.SessionExpired() && !expiredOnce:
			// The server says it forgot the session (HTTP 404); a read is
			// safe to repeat, and the next attempt goes on a new one at
			// once, not after a backoff meant for a server in trouble.
			// Once: a server that forgets every session gets the backoff
			// like any other failure.
			expiredOnce = true
		case i > 0:
			pause = g.backoff(i)
		}
		perAttempt := timeout
		if !deadline.IsZero() {
			left := time.Until(deadline) - pause
			if left <= 0 {
				break // no time for another attempt: fail with the last outcome
			}
			perAttempt = min(perAttempt, left)
		}
		if pause > 0 {
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				// A read was sent and may be retried by the caller at will:
				// report it failed, not as bad input or an outage.
				e, _ := json.Marshal(map[string]any{"code": 0, "message": "read cancelled before an answer: " + context.Cause(ctx).Error()})
				return Result{State: pending.StateFailed, Error: e}, nil
			}
		}
		// One clock per attempt: progress does not extend a read.
		out = g.srv.Call(ctx, tool, req.Args, mcpclient.CallOptions{RawArgs: req.RawArgs, MaxTotal: perAttempt,
			OnProgress: req.OnProgress, OnAnswer: req.OnReadAnswer})
		if out.Kind == mcpclient.DeliveryResult || out.Kind == mcpclient.DeliveryRPCError || ctx.Err() != nil {
			break
		}
	}
	switch out.Kind {
	case mcpclient.DeliveryResult:
		state := pending.StateSucceeded
		if readSignals(out.ResultJSON).isError {
			state = pending.StateFailed
		}
		return Result{State: state, Result: out.ResultJSON}, nil
	case mcpclient.DeliveryRPCError:
		e, _ := json.Marshal(out.RPCError)
		return Result{State: pending.StateFailed, Error: e}, nil
	case mcpclient.DeliveryNotSent:
		return Result{State: pending.StateFailed}, unavailable(out.Err)
	}
	if out.Refusal() != nil {
		// The server said it did not run the read (a 401 wants a login):
		// an outage to report as such; a read is safe to repeat.
		return Result{State: pending.StateFailed}, unavailable(out.Err)
	}
	e, _ := json.Marshal(map[string]any{"code": 0, "message": "read gave no answer after " + itoa(attempts) + " attempts: " + errText(out.Err)})
	return Result{State: pending.StateFailed, Error: e}, nil
}

// backoff before read attempt i (1-based retries): 200ms, 400ms, 800ms ...
// capped at 5s, each with ±50% jitter so many clients do not resend in step.
func (g *Guard) backoff(i int) time.Duration {
	base := 200 * time.Millisecond << (i - 1)
	if base > 5*time.Second {
		base = 5 * time.Second
	}
	g.jmu.Lock()
	f := 0.5 + g.opts.Jitter.Float64()
	g.jmu.Unlock()
	return time.Duration(float64(base) * f)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
