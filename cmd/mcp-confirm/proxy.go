package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/proxy"
)

// runProxy serves an MCP host on stdin/stdout in front of the server given
// after -- (or --config/--server), guarding its tool calls (SPEC §5a).
// stdout carries MCP messages only; logs go to stderr or --log.
func runProxy(ctx context.Context, e *env, args []string) int {
	var g globalOpts
	fs := newFlagSet("proxy", &g)
	logPath := fs.String("log", "", "write the proxy's log (and the server's stderr) to this file instead of stderr")
	fs.Lookup("timeout").Usage = fmt.Sprintf("write timeout (default %s, under the hosts' own 40-60s)", proxy.DefaultTimeout)
	pos, done := parseFlags(fs, args, e)
	if done >= 0 {
		return done
	}
	if len(pos) > 0 {
		fmt.Fprintf(e.stderr, "mcp-confirm proxy: unexpected argument %q\nGive the server after --, e.g. mcp-confirm proxy -- npx -y @modelcontextprotocol/server-filesystem /tmp\n", pos[0])
		return exitBadInput
	}
	if g.timeout < 0 {
		fmt.Fprintf(e.stderr, "mcp-confirm proxy: --timeout must be positive\nGive a duration like 50s.\n")
		return exitBadInput
	}
	var policy *guard.Policy
	if g.policy != "" {
		p, err := guard.LoadPolicy(g.policy)
		if err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm proxy: %v\nFix the policy file (see README, \"Policy\") and run again.\n", err)
			return exitBadInput
		}
		policy = p
	}
	logw := e.stderr
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm proxy: --log: %v\nGive a writable file.\n", err)
			return exitBadInput
		}
		defer f.Close()
		logw = f
	}
	j, code := openJournal(ctx, e, &g)
	if j == nil {
		return code
	}
	defer j.Close()
	choice, err := serverSpec(e, &g, filepath.Join(filepath.Dir(j.Path()), "demo-server.db"))
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm proxy: %v\nRun 'mcp-confirm --help' for server selection.\n", err)
		return exitBadInput
	}
	p := proxy.New(proxy.Options{
		Server: choice.spec, Identity: choice.identity, Journal: j, Policy: policy, Timeout: g.timeout, Version: version,
		Logger:       slog.New(slog.NewTextHandler(logw, nil)).With("from", "mcp-confirm proxy"),
		ServerStderr: logw,
	})
	if err := p.Run(ctx, e.stdin, e.stdout); err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm proxy: %v\nCheck that the server starts on its own (run its command by hand).\n", err)
		return exitUnavailable
	}
	return exitOK
}
