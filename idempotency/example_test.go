package idempotency_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-confirm/mcp-confirm/idempotency"
)

// A server author wraps a write tool's handler: open a store, make the
// middleware, wrap. Calls that carry a key in _meta (or in the
// idempotency_key argument) now run once; repeats get the stored result.
func Example() {
	dir, _ := os.MkdirTemp("", "idem-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	store, err := idempotency.OpenSQLite(ctx, filepath.Join(dir, "keys.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	mw, _ := idempotency.New(idempotency.Options{Store: store, KeyArg: "idempotency_key"})

	s := server.NewMCPServer("shop", "1.0.0")
	s.AddTool(mcp.NewTool("create_order", mcp.WithString("item", mcp.Required()), mcp.WithString("idempotency_key")),
		mw.Wrap(createOrder))

	// Two sends of one call, as a client resending after a lost response.
	for i := 0; i < 2; i++ {
		var req mcp.CallToolRequest
		req.Params.Name = "create_order"
		req.Params.Arguments = map[string]any{"item": "widget", "idempotency_key": "order-7f3a9c"}
		res, _ := mw.Wrap(createOrder)(ctx, req)
		fmt.Println(res.Content[0].(mcp.TextContent).Text, "replayed:", res.Meta.AdditionalFields[idempotency.MetaReplayed] == true)
	}
	fmt.Println("orders placed:", placed)
	// Output:
	// ordered widget replayed: false
	// ordered widget replayed: true
	// orders placed: 1
}

var placed int

func createOrder(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	placed++
	return mcp.NewToolResultText("ordered " + req.GetString("item", "")), nil
}
