package main

import (
	"context"
	"fmt"
)

// runDemoServer is replaced by the demo/ work (issue 3).
func runDemoServer(ctx context.Context, e *env, args []string) int {
	fmt.Fprintln(e.stderr, "mcp-confirm demo-server: not built yet")
	return exitUnavailable
}
