package demo

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-confirm/mcp-confirm/idempotency"
)

// Order is one row of the orders table, as find_orders returns it.
type Order struct {
	OrderID        int64  `json:"order_id"`
	Item           string `json:"item"`
	Quantity       int64  `json:"quantity"`
	Buyer          string `json:"buyer"`
	IdempotencyKey string `json:"idempotency_key"`
	CreatedAt      string `json:"created_at"`
	CancelledAt    string `json:"cancelled_at,omitempty"`
}

// createOrder validates, waits out --delay, draws --fail-rate, then commits
// the order, the budget change and the key's record in one transaction.
func (s *Server) createOrder(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	item, err := req.RequireString("item")
	if err != nil {
		return nil, idempotency.Reject(err)
	}
	buyer, err := req.RequireString("buyer")
	if err != nil {
		return nil, idempotency.Reject(err)
	}
	q, err := req.RequireFloat("quantity")
	if err != nil || q < 1 || q != math.Trunc(q) || q > 1e6 {
		return nil, idempotency.Reject(fmt.Errorf("quantity must be a whole number from 1 to 1000000"))
	}
	quantity := int64(q)
	var price int64
	err = s.db.QueryRowContext(ctx, `SELECT unit_price FROM prices WHERE item = ?`, item).Scan(&price)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, idempotency.Reject(fmt.Errorf("unknown item %q; items are widget, gadget, gizmo", item))
	}
	if err != nil {
		return nil, idempotency.Retryable(fmt.Errorf("read price: %w", err))
	}

	if err := s.work(ctx, req); err != nil {
		// Stopped during the delay: nothing was committed, so a retry is safe.
		return nil, idempotency.Retryable(fmt.Errorf("create_order stopped before committing: %w", err))
	}
	if s.failNow() {
		return nil, idempotency.Retryable(errors.New("create_order failed before committing (injected by --fail-rate); nothing was ordered"))
	}

	key := idempotency.KeyFromContext(ctx)
	res, err := idempotency.Commit(ctx, func(tx *sql.Tx) (*mcp.CallToolResult, error) {
		var left int64
		err := tx.QueryRowContext(ctx, `SELECT budget_left FROM budgets WHERE buyer = ?`, buyer).Scan(&left)
		if errors.Is(err, sql.ErrNoRows) {
			return failure(fmt.Sprintf("unknown buyer %q; nothing was ordered", buyer), map[string]any{"error": "unknown_buyer", "buyer": buyer}), nil
		}
		if err != nil {
			return nil, fmt.Errorf("read budget: %w", err)
		}
		cost := quantity * price
		if cost > left {
			return failure(fmt.Sprintf("%s's budget is %d, the order costs %d; nothing was ordered", buyer, left, cost),
				map[string]any{"error": "insufficient_budget", "buyer": buyer, "budget_left": left, "cost": cost}), nil
		}
		var keyArg any
		if key != "" {
			keyArg = key
		}
		created := s.opts.Now().UTC().Format(time.RFC3339)
		r, err := tx.ExecContext(ctx, `INSERT INTO orders (item, quantity, buyer, idempotency_key, created_at) VALUES (?, ?, ?, ?, ?)`,
			item, quantity, buyer, keyArg, created)
		if err != nil {
			return nil, fmt.Errorf("insert order: %w", err)
		}
		id, _ := r.LastInsertId()
		if _, err := tx.ExecContext(ctx, `UPDATE budgets SET budget_left = budget_left - ? WHERE buyer = ?`, cost, buyer); err != nil {
			return nil, fmt.Errorf("deduct budget: %w", err)
		}
		return structured(map[string]any{"order_id": id, "item": item, "quantity": quantity, "buyer": buyer,
			"budget_left": left - cost, "idempotency_key": key}), nil
	})
	if err != nil {
		return nil, idempotency.Retryable(err) // nothing was committed
	}
	if !res.IsError {
		s.log.Info("order committed", "key", key, "item", item, "quantity", quantity, "buyer", buyer)
		if f, ok := ctx.Value(hangKey{}).(*hangFlag); ok && s.hangs.Add(1) <= int64(max(s.opts.HangAfterCommit, s.opts.CutAfterCommit)) {
			f.hang = true
		}
	}
	return res, nil
}

// work waits out --delay, sending progress every 250ms when the caller asked
// for it with a progressToken.
func (s *Server) work(ctx context.Context, req mcp.CallToolRequest) error {
	if s.opts.Delay <= 0 {
		return nil
	}
	var token mcp.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	done := time.NewTimer(s.opts.Delay)
	defer done.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done.C:
			return nil
		case <-tick.C:
			if token == nil {
				continue
			}
			elapsed := time.Since(start)
			err := server.ServerFromContext(ctx).SendNotificationToClient(ctx, "notifications/progress", map[string]any{
				"progressToken": token,
				"progress":      elapsed.Milliseconds(),
				"total":         s.opts.Delay.Milliseconds(),
				"message":       fmt.Sprintf("creating order: %s of %s", elapsed.Round(time.Millisecond), s.opts.Delay),
			})
			if err != nil {
				s.log.Warn("progress notification not sent", "err", err)
			}
		}
	}
}

// hangAfterCommit wraps the guarded handler: when the inner handler says this
// execution is one of the first --hang-after-commit N, the answer (already
// committed, key record included) is never sent, the way a response is lost.
// It sits outside the middleware so the record is completed before the hang.
// Over HTTP, --cut-after-commit closes the connection instead.
func (s *Server) hangAfterCommit(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	if s.opts.HangAfterCommit <= 0 && s.opts.CutAfterCommit <= 0 {
		return next
	}
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		f := &hangFlag{}
		res, err := next(context.WithValue(ctx, hangKey{}, f), req)
		if !f.hang {
			return res, err
		}
		if cut, ok := ctx.Value(cutKey{}).(func() bool); ok && s.opts.CutAfterCommit > 0 {
			if cut() {
				// The answer is still the answer: it cannot reach this
				// connection, but it goes into the event store, whence a
				// client that resumes the stream gets it.
				s.log.Warn("committed, connection closed without the answer (--cut-after-commit)", "key", idempotencyKey(req))
				return res, err
			}
			s.log.Error("--cut-after-commit: the connection could not be cut; answering", "key", idempotencyKey(req))
			return res, err
		}
		if s.opts.AnswerAfter > 0 {
			// Deaf to the cancel: the answer is only late.
			s.log.Warn("committed, answering late (--answer-after)", "key", idempotencyKey(req), "after", s.opts.AnswerAfter)
			time.Sleep(s.opts.AnswerAfter)
			return res, err
		}
		if s.opts.AnswerWhen != "" {
			s.log.Warn("committed, answering once the file exists (--answer-when)", "key", idempotencyKey(req), "file", s.opts.AnswerWhen)
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				if _, statErr := os.Stat(s.opts.AnswerWhen); statErr == nil {
					return res, err
				}
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-tick.C:
				}
			}
		}
		s.log.Warn("committed, now hanging without an answer (--hang-after-commit)", "key", idempotencyKey(req))
		<-ctx.Done()
		return nil, ctx.Err()
	}
}

type hangKey struct{}

// hangFlag is set by the inner handler, which alone knows a fresh execution
// committed (a replay or a failure must not hang).
type hangFlag struct{ hang bool }

func idempotencyKey(req mcp.CallToolRequest) any {
	if k := req.Params.Meta.GetMetaField(idempotency.MetaKey); k != nil {
		return k
	}
	return req.GetArguments()["idempotency_key"]
}

// structured is a result with structured content and, as the spec asks, the
// same JSON in a text block.
func structured(v any) *mcp.CallToolResult {
	b, _ := json.Marshal(v)
	return mcp.NewToolResultStructured(v, string(b))
}

func failure(text string, v map[string]any) *mcp.CallToolResult {
	res := mcp.NewToolResultError(text)
	res.StructuredContent = v
	return res
}
