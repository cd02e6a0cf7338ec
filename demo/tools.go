package demo

import (
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/idempotency"
)

// addTools registers the four tools. Annotations are set truthfully (mcp.NewTool
// presets all four hints, so each is stated here).
func (s *Server) addTools() {
	description := "Create an order and deduct quantity × unit price from the buyer's budget. " +
		"Send an idempotency key (in _meta io.github.mcp-confirm/idempotency-key or the idempotency_key argument) " +
		"to make a resend return the first result instead of ordering twice."
	order := []mcp.ToolOption{
		mcp.WithTitleAnnotation("Create order"),
		mcp.WithString("item", mcp.Required(), mcp.Description("item to order"), mcp.Enum("widget", "gadget", "gizmo")),
		mcp.WithNumber("quantity", mcp.Required(), mcp.Description("how many, at least 1"), mcp.Min(1)),
		mcp.WithString("buyer", mcp.Required(), mcp.Description("buyer whose budget pays")),
		mcp.WithString("idempotency_key", mcp.Description("optional key naming this operation; a resend with the same key is not executed twice")),
		mcp.WithReadOnlyHintAnnotation(false),
		// Deducting a budget changes an existing row: not purely additive.
		mcp.WithDestructiveHintAnnotation(true),
		// Without a key, a second identical call orders again (unless
		// --dedupe-window, which a client cannot rely on).
		mcp.WithIdempotentHintAnnotation(false),
		mcp.WithOpenWorldHintAnnotation(false),
	}
	if w := s.opts.DedupeWindow; w > 0 {
		description += fmt.Sprintf(" Without a key, an order identical to one sent less than %v before (same item, quantity and buyer; "+
			"arguments this tool does not take are not compared) "+
			"is taken for a resend: it is not placed again and gets the first order's result. "+
			"To place the same order again on purpose, set %s true.", w, idempotency.IntentionalRepeatArg)
		order = append(order, mcp.WithBoolean(idempotency.IntentionalRepeatArg,
			mcp.Description(fmt.Sprintf("true to place an order identical to one of the last %v on purpose (logged)", w))))
	}
	// WrapTool: the dedupe window compares only the arguments declared
	// here, so a keyless resend carrying an extra one is still a resend.
	createOrder := mcp.NewTool("create_order", append(order, mcp.WithDescription(description))...)
	s.mcp.AddTool(createOrder, s.hangAfterCommit(s.idem.WrapTool(createOrder, s.createOrder)))

	s.mcp.AddTool(mcp.NewTool("cancel_order",
		mcp.WithDescription("Cancel the order created under an idempotency key and refund its cost to the buyer's budget. "+
			"Fails, changing nothing, when no order was created under that key or it is already cancelled. "+
			"Its own idempotency key (in _meta or idempotency_key) makes a resend return the first result."),
		mcp.WithTitleAnnotation("Cancel order"),
		mcp.WithString("order_key", mcp.Required(), mcp.Description("the idempotency key the order was created under")),
		mcp.WithString("idempotency_key", mcp.Description("optional key naming this cancel")),
		mcp.WithReadOnlyHintAnnotation(false),
		mcp.WithDestructiveHintAnnotation(true),
		// A second cancel of the same order changes nothing more.
		mcp.WithIdempotentHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
	), s.idem.Wrap(s.cancelOrder))

	s.mcp.AddTool(mcp.NewTool("find_orders",
		mcp.WithDescription("List orders, optionally only those under one idempotency key or for one buyer; use it to check whether a write took effect."),
		mcp.WithTitleAnnotation("Find orders"),
		mcp.WithString("idempotency_key", mcp.Description("only the order(s) created under this key")),
		mcp.WithString("buyer", mcp.Description("only this buyer's orders")),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithIdempotentHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
	), s.findOrders)

	s.mcp.AddTool(mcp.NewTool("get_budget",
		mcp.WithDescription("The buyer's remaining budget."),
		mcp.WithTitleAnnotation("Get budget"),
		mcp.WithString("buyer", mcp.Required()),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithIdempotentHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
	), s.getBudget)
}
