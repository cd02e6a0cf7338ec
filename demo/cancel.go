package demo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/idempotency"
)

// cancelOrder cancels the order created under order_key and refunds its
// cost to the buyer's budget, in one transaction with the cancel's own key
// record: the cancel by key that payment APIs offer for a charge whose
// outcome is unknown, and what mcp-confirm compensate calls (the policy's
// cancel_tool). No order under the key, or one already cancelled, is a
// definite failure that changed nothing.
func (s *Server) cancelOrder(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	orderKey, err := req.RequireString("order_key")
	if err != nil || orderKey == "" {
		return nil, idempotency.Reject(errors.New("order_key is required: the idempotency key the order was created under"))
	}
	if s.failNow() {
		return nil, idempotency.Retryable(errors.New("cancel_order failed before committing (injected by --fail-rate); nothing was cancelled"))
	}
	res, err := idempotency.Commit(ctx, func(tx *sql.Tx) (*mcp.CallToolResult, error) {
		var (
			id, quantity, price int64
			buyer, cancelledAt  string
		)
		err := tx.QueryRowContext(ctx, `SELECT o.order_id, o.quantity, o.buyer, COALESCE(o.cancelled_at, ''), p.unit_price
			FROM orders o JOIN prices p ON p.item = o.item WHERE o.idempotency_key = ? ORDER BY o.order_id LIMIT 1`, orderKey).
			Scan(&id, &quantity, &buyer, &cancelledAt, &price)
		if errors.Is(err, sql.ErrNoRows) {
			return failure(fmt.Sprintf("no order was created under key %s; nothing was cancelled", orderKey),
				map[string]any{"error": "no_such_order", "order_key": orderKey}), nil
		}
		if err != nil {
			return nil, fmt.Errorf("read order: %w", err)
		}
		if cancelledAt != "" {
			return failure(fmt.Sprintf("order %d was already cancelled at %s; nothing was changed", id, cancelledAt),
				map[string]any{"error": "already_cancelled", "order_id": id, "cancelled_at": cancelledAt}), nil
		}
		now := s.opts.Now().UTC().Format(time.RFC3339)
		if _, err := tx.ExecContext(ctx, `UPDATE orders SET cancelled_at = ? WHERE order_id = ?`, now, id); err != nil {
			return nil, fmt.Errorf("cancel order: %w", err)
		}
		refund := quantity * price
		var left int64
		if err := tx.QueryRowContext(ctx, `UPDATE budgets SET budget_left = budget_left + ? WHERE buyer = ? RETURNING budget_left`,
			refund, buyer).Scan(&left); err != nil {
			return nil, fmt.Errorf("refund budget: %w", err)
		}
		return structured(map[string]any{"cancelled": true, "order_id": id, "order_key": orderKey, "buyer": buyer,
			"refunded": refund, "budget_left": left}), nil
	})
	if err != nil {
		return nil, idempotency.Retryable(err) // nothing was committed
	}
	if !res.IsError {
		s.log.Info("order cancelled", "order_key", orderKey, "key", idempotency.KeyFromContext(ctx))
	}
	return res, nil
}
