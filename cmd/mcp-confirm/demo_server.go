package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"strconv"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/spf13/cobra"

	"github.com/mcp-confirm/mcp-confirm/demo"
	"github.com/mcp-confirm/mcp-confirm/idempotency"
	"github.com/mcp-confirm/mcp-confirm/termtext"
)

// runDemoServer serves the built-in orders server over stdin/stdout until
// stdin closes. Logs go to stderr: stdout carries the protocol only.
func (c *cli) demoServerCommand() *cobra.Command {
	var o demo.Options
	var scope string
	cmd := c.leaf(&cobra.Command{
		Use:   "demo-server [--db FILE] [--http ADDR] [fault flags] [--dedupe-window DUR [--dedupe-scope S]] [--metrics ADDR]",
		Short: "the built-in orders server (MCP over stdio or HTTP), with faults to order",
		Long: `The built-in orders server: create_order (a write that honours idempotency
keys), find_orders, get_budget. Its flags make the faults mcp-confirm exists
for: an answer lost after the order is committed, a late answer, a garbled one.
Its --db is the demo's own orders file, not a journal.

--http serves it over Streamable HTTP at http://ADDR/mcp instead of stdio,
and logs the URL it bound (127.0.0.1:0 picks a free port); there
--cut-after-commit N closes the first N create_order connections after the
order is committed, without the response; --expire-sessions forgets each
create_order's session after it, answering 404 to what comes on it next.
The server keeps its SSE events, so a cut stream that carried events (with
--delay, progress) can be resumed; --protocols 2025-11-25 keeps clients on a
session, where streams resume (2026-07-28 removed resumption).
--tls-cert FILE --tls-key FILE serve https instead (PEM files; HTTP/2 is
negotiated, as Go's server does).

--dedupe-window is for clients that send no key: an identical keyless
create_order within the window is not ordered again (intentional_repeat:
true lets one through, logged). Off by default; never applies to keyed calls.
--metrics serves Prometheus metrics at http://ADDR/metrics and logs the
address it bound (127.0.0.1:0 picks a free port).`,
		Example: `  mcp-confirm demo-server --db /tmp/demo/orders.db
  mcp-confirm call create_order --args '{"item":"widget"}' -- mcp-confirm demo-server --hang-after-commit 1
  mcp-confirm demo-server --http 127.0.0.1:8808 --cut-after-commit 1
  mcp-confirm demo-server --dedupe-window 60s --dedupe-scope client --metrics 127.0.0.1:9464`,
	}, "serve", nil, func(pos []string) int { return runDemoServer(c.ctx, c.env, o, scope, pos) })
	fs := cmd.Flags()
	fs.StringVar(&o.DB, "db", "", "the demo's SQLite file (default: a temporary file, removed on exit)")
	fs.DurationVar(&o.Delay, "delay", 0, "every create_order takes this long, sending progress every 250ms")
	fs.IntVar(&o.HangAfterCommit, "hang-after-commit", 0, "the first N create_order executions commit, then never answer")
	fs.StringVar(&o.HTTPAddr, "http", "", "serve MCP over Streamable HTTP at http://ADDR/mcp, not stdio (HOST:PORT; port 0 picks one, logged)")
	fs.StringVar(&o.TLSCert, "tls-cert", "", "with --http: serve https with this certificate (PEM; with --tls-key), HTTP/2 negotiated")
	fs.StringVar(&o.TLSKey, "tls-key", "", "with --http and --tls-cert: the certificate's private key (PEM)")
	fs.IntVar(&o.CutAfterCommit, "cut-after-commit", 0, "with --http: the first N create_order executions commit, then their connection is closed unanswered")
	fs.BoolVar(&o.ExpireSessions, "expire-sessions", false, "with --http: after each create_order, its session is expired (later requests on it get 404)")
	fs.StringSliceVar(&o.Protocols, "protocols", nil, "with --http: the protocol versions offered, comma-separated (default: all mcp-go knows); 2025 versions only make clients keep a session, whose streams resume")
	fs.DurationVar(&o.AnswerAfter, "answer-after", 0, "with --hang-after-commit: answer after all, this long after the commit (a late, not lost, response)")
	fs.StringVar(&o.AnswerWhen, "answer-when", "", "with --hang-after-commit: answer after all, once this FILE exists (for tests)")
	fs.IntVar(&o.UnusableAnswer, "unusable-answer", 0, "the first N create_order answers are replaced by a line that is not a usable tool result (kind drawn per answer with --seed)")
	fs.IntVar(&o.AnswerTwice, "answer-twice", 0, "the first N create_order answers are written twice; the second copy differs (another order_id) when the order id is odd")
	fs.Float64Var(&o.FailRate, "fail-rate", 0, "share (0 to 1) of create_order executions that fail before committing")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed for --fail-rate draws")
	fs.DurationVar(&o.DedupeWindow, "dedupe-window", 0, "an identical create_order sent without a key within this long of the first is not ordered again (default: off)")
	fs.StringVar(&scope, "dedupe-scope", "", "with --dedupe-window, what else makes two keyless calls the same: none, client (its declared name) or arg:NAME (default none)")
	fs.StringVar(&o.MetricsAddr, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics (HOST:PORT; port 0 picks one, logged)")
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	return cmd
}

// runDemoServer serves the built-in orders server over stdin/stdout until
// stdin closes. Logs go to stderr: stdout carries the protocol only.
func runDemoServer(ctx context.Context, e *env, o demo.Options, scope string, pos []string) int {
	if scope != "" {
		var err error
		if o.DedupeScope, err = idempotency.ParseDedupeScope(scope); err != nil {
			return demoUsageError(e, "--dedupe-scope "+strconv.Quote(scope)+": want none, client or arg:NAME")
		}
	}
	switch {
	case len(pos) > 0:
		return demoUsageError(e, fmt.Sprintf("unexpected argument %q", pos[0]))
	case len(e.serverCmd) > 0:
		return demoUsageError(e, "the demo server takes no server command after --")
	case o.Delay < 0:
		return demoUsageError(e, "--delay must not be negative")
	case o.AnswerAfter < 0:
		return demoUsageError(e, "--answer-after must not be negative")
	case o.HangAfterCommit < 0:
		return demoUsageError(e, "--hang-after-commit must not be negative")
	case o.UnusableAnswer < 0:
		return demoUsageError(e, "--unusable-answer must not be negative")
	case o.AnswerTwice < 0:
		return demoUsageError(e, "--answer-twice must not be negative")
	case o.CutAfterCommit < 0:
		return demoUsageError(e, "--cut-after-commit must not be negative")
	case o.HTTPAddr != "" && !validHostPort(o.HTTPAddr):
		return demoUsageError(e, "--http "+strconv.Quote(o.HTTPAddr)+": want HOST:PORT, such as 127.0.0.1:8808 (port 0 picks one)")
	case (o.TLSCert == "") != (o.TLSKey == ""):
		return demoUsageError(e, "--tls-cert and --tls-key go together: give both, or neither")
	case o.TLSCert != "" && o.HTTPAddr == "":
		return demoUsageError(e, "--tls-cert and --tls-key are for --http (a stdio server has no connection to secure)")
	case o.TLSCert != "" && badKeyPair(o) != "":
		return demoUsageError(e, "--tls-cert, --tls-key: "+badKeyPair(o)+": give a PEM certificate and its key")
	case o.CutAfterCommit > 0 && o.HTTPAddr == "":
		return demoUsageError(e, "--cut-after-commit is for --http (over stdio, --hang-after-commit loses the answer)")
	case o.ExpireSessions && o.HTTPAddr == "":
		return demoUsageError(e, "--expire-sessions is for --http (a stdio server has no sessions to expire)")
	case len(o.Protocols) > 0 && o.HTTPAddr == "":
		return demoUsageError(e, "--protocols is for --http (a stdio demo answers the version its client asks for)")
	case badProtocol(o.Protocols) != "":
		return demoUsageError(e, "--protocols: "+strconv.Quote(badProtocol(o.Protocols))+" is not a protocol version mcp-go knows (such as 2025-11-25)")
	case o.HTTPAddr != "" && (o.UnusableAnswer > 0 || o.AnswerTwice > 0):
		return demoUsageError(e, "--unusable-answer and --answer-twice are stdio faults; not with --http")
	case o.FailRate < 0 || o.FailRate > 1:
		return demoUsageError(e, "--fail-rate must be between 0 and 1")
	case o.DedupeWindow < 0:
		return demoUsageError(e, "--dedupe-window must not be negative")
	case scope != "" && o.DedupeWindow == 0:
		return demoUsageError(e, "--dedupe-scope needs --dedupe-window")
	case o.MetricsAddr != "" && !validHostPort(o.MetricsAddr):
		return demoUsageError(e, "--metrics "+strconv.Quote(o.MetricsAddr)+": want HOST:PORT, such as 127.0.0.1:9464 (port 0 picks one)")
	}
	o.Logger = slog.New(slog.NewTextHandler(e.stderr, nil))
	serve := func() error { return demo.Serve(ctx, o, e.stdin, e.stdout) }
	if o.HTTPAddr != "" {
		serve = func() error { return demo.ServeHTTP(ctx, o) }
	}
	if err := serve(); err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm demo-server: %v\n%s.\n", err, demoOpenHint(err))
		return exitUnavailable
	}
	return exitOK
}

// badKeyPair is why o's --tls-cert and --tls-key are no certificate and
// key ("" if they are), so that a wrong file is a usage error, not one of
// serving.
func badKeyPair(o demo.Options) string {
	if _, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey); err != nil {
		return termtext.Line(err.Error())
	}
	return ""
}

func validHostPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 0 && n <= 65535
}

func demoUsageError(e *env, msg string) int {
	fmt.Fprintf(e.stderr, "mcp-confirm demo-server: %s\nRun 'mcp-confirm demo-server --help' for its flags.\n", msg)
	return exitBadInput
}

// demoOpenHint says what to do about an error opening the demo database, by
// its cause.
func demoOpenHint(err error) string {
	var folder *demo.FolderError
	var listen *demo.ListenError
	switch {
	case errors.As(err, &listen):
		flag := "--metrics"
		if listen.What != "" {
			flag = "--http"
		}
		return "Another program may be using that port, or the host is not this machine's: " +
			"give " + flag + " another address (127.0.0.1:0 picks a free port)"
	case errors.As(err, &folder):
		return "The folder was missing and could not be made: check that you may write its parent, " +
			"or give --db a path in a folder of yours"
	case errors.Is(err, fs.ErrPermission):
		return "This user cannot write the --db file or its folder (SQLite writes a WAL beside it): " +
			"fix the permissions, or give --db another path"
	}
	return "Check that the --db file is a demo database and not locked by another program"
}

// badProtocol returns the first of versions that is not a protocol version
// mcp-go knows, or "".
func badProtocol(versions []string) string {
	for _, v := range versions {
		if !mcp.IsValidProtocolVersion(v) {
			return v
		}
	}
	return ""
}
