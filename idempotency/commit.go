package idempotency

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// ErrNotWrapped is returned by Commit when the handler was not called through
// a Middleware.
var ErrNotWrapped = errors.New("idempotency: Commit called outside a handler wrapped by Middleware.Wrap")

// ErrCommitted is returned by a second Commit in one call.
var ErrCommitted = errors.New("idempotency: this call already committed")

// call is one execution under the middleware, carried to the handler in its
// context so Commit can reach the claim.
type call struct {
	store     Store
	key       string // the caller's key; "" for a call without one
	recordKey string // the store record it holds: key, a window record's, or "" for none
	owner     string
	now       func() time.Time

	mu        sync.Mutex
	committed *mcp.CallToolResult
	outcome   Outcome
}

type callCtxKey struct{}

func withCall(ctx context.Context, c *call) context.Context {
	return context.WithValue(ctx, callCtxKey{}, c)
}

// KeyFromContext returns the idempotency key of the call a wrapped handler is
// serving, or "" when the call carries none.
func KeyFromContext(ctx context.Context) string {
	if c, ok := ctx.Value(callCtxKey{}).(*call); ok {
		return c.key
	}
	return ""
}

// Commit runs effect in the transaction that finishes the call's key record:
// the effect's writes and the record of the result it returns commit
// together, or neither does. A result with isError true is stored as a
// failure (effect should not write before returning one). With no key, effect
// simply runs in a transaction of its own.
//
// An error from effect is returned as it is (mark it Retryable if nothing was
// done); an error from the store itself is returned marked Retryable, because
// then nothing was committed. After Commit succeeds the handler should return
// its result; the middleware answers with the committed one in any case.
func Commit(ctx context.Context, effect func(tx *sql.Tx) (*mcp.CallToolResult, error)) (*mcp.CallToolResult, error) {
	c, ok := ctx.Value(callCtxKey{}).(*call)
	if !ok {
		return nil, ErrNotWrapped
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.committed != nil {
		return nil, ErrCommitted
	}
	var res *mcp.CallToolResult
	var out Outcome
	var effectErr error
	run := func(tx *sql.Tx) (Outcome, error) {
		res, effectErr = effect(tx)
		if effectErr != nil {
			return Outcome{}, effectErr
		}
		if res == nil {
			effectErr = errors.New("idempotency: Commit effect returned no result")
			return Outcome{}, effectErr
		}
		b, err := json.Marshal(res)
		if err != nil {
			effectErr = fmt.Errorf("encode result: %w", err)
			return Outcome{}, effectErr
		}
		out = Outcome{State: StateCompleted, Result: b, At: c.now()}
		if res.IsError {
			out.State = StateFailed
		}
		return out, nil
	}
	var err error
	if c.recordKey == "" {
		err = c.store.InTx(ctx, func(tx *sql.Tx) error { _, err := run(tx); return err })
	} else {
		err = c.store.Finish(ctx, c.recordKey, c.owner, run)
	}
	switch {
	case effectErr != nil:
		return nil, effectErr
	case err != nil:
		return nil, Retryable(fmt.Errorf("commit: %w", err))
	}
	c.committed, c.outcome = res, out
	return res, nil
}

// failed is the store-failure event for this call's record.
func (c *call) failed(req mcp.CallToolRequest, err error, at time.Time) Event {
	e := Event{Kind: EventStoreFailed, Key: c.key, Tool: req.Params.Name, Err: err, At: at}
	if c.key == "" {
		e.Window = strings.TrimPrefix(c.recordKey, windowKeyPrefix)
	}
	return e
}

func (c *call) committedResult() (*mcp.CallToolResult, Outcome, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.committed, c.outcome, c.committed != nil
}
