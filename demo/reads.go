package demo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
)

func (s *Server) findOrders(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	orders, err := queryOrders(ctx, s.db, req.GetString("idempotency_key", ""), req.GetString("buyer", ""))
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return structured(map[string]any{"orders": orders}), nil
}

func (s *Server) getBudget(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	buyer, err := req.RequireString("buyer")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	var left int64
	err = s.db.QueryRowContext(ctx, `SELECT budget_left FROM budgets WHERE buyer = ?`, buyer).Scan(&left)
	if errors.Is(err, sql.ErrNoRows) {
		return failure(fmt.Sprintf("unknown buyer %q", buyer), map[string]any{"error": "unknown_buyer", "buyer": buyer}), nil
	}
	if err != nil {
		return mcp.NewToolResultError("read budget: " + err.Error()), nil
	}
	return structured(map[string]any{"buyer": buyer, "budget_left": left}), nil
}

// queryOrders lists orders, oldest first, filtered by key and buyer when
// they are not empty.
func queryOrders(ctx context.Context, db *sql.DB, key, buyer string) ([]Order, error) {
	rows, err := db.QueryContext(ctx, `SELECT order_id, item, quantity, buyer, COALESCE(idempotency_key, ''), created_at, COALESCE(cancelled_at, '')
		FROM orders WHERE (? = '' OR idempotency_key = ?) AND (? = '' OR buyer = ?) ORDER BY order_id`, key, key, buyer, buyer)
	if err != nil {
		return nil, fmt.Errorf("query orders: %w", err)
	}
	defer rows.Close()
	orders := []Order{} // "orders": [] rather than null when there are none
	for rows.Next() {
		var o Order
		if err := rows.Scan(&o.OrderID, &o.Item, &o.Quantity, &o.Buyer, &o.IdempotencyKey, &o.CreatedAt, &o.CancelledAt); err != nil {
			return nil, fmt.Errorf("read order: %w", err)
		}
		orders = append(orders, o)
	}
	return orders, rows.Err()
}

// CountOrders counts the orders in the demo database at dbPath created under
// key, reading the file directly (tests use it to see what the server did
// behind a lost response).
func CountOrders(ctx context.Context, dbPath, key string) (int, error) {
	db, err := openDB(ctx, dbPath)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM orders WHERE idempotency_key = ?`, key).Scan(&n); err != nil {
		return 0, fmt.Errorf("count orders: %w", err)
	}
	return n, nil
}
