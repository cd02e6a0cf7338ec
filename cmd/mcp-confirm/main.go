// Command mcp-confirm is an MCP host that never resends a write call whose
// outcome is unknown. See README.md for usage; cli.go builds the
// command tree; each command is in a file of its own.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	buildversion "github.com/mcp-confirm/mcp-confirm/internal/version"
)

// build is this binary's identity, as the go command stamped it
// (internal/version); version is it in one word, for serverInfo,
// clientInfo and logs.
var (
	build   = buildversion.Read()
	version = build.Short()
)

// Exit codes, as documented in SPEC §4 and the README.
const (
	exitOK          = 0 // done; for `call`: succeeded
	exitFailed      = 1 // the server answered with a failure
	exitBadInput    = 2 // bad flags, arguments, call id, or a decision not allowed
	exitUnknown     = 3 // the outcome of a write is unknown
	exitHeld        = 4 // an identical call is in flight or unknown: nothing sent
	exitUnavailable = 5 // server or journal unavailable: nothing sent
)

// env is what every command needs from the outside world; tests and main
// fill it differently.
type env struct {
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer
	serverCmd []string // words after a bare "--", if any
	getenv    func(string) string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv})
	stop()
	os.Exit(code)
}
