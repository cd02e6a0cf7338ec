package main

import (
	"context"
	"fmt"
)

// runConsole opens the operator console (issue 5). Until it exists, say so.
func runConsole(ctx context.Context, e *env, args []string) int {
	fmt.Fprintln(e.stderr, "mcp-confirm: the console is not built yet; try 'mcp-confirm --help'")
	return exitUnavailable
}
