package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/proxy"
)

// openLog is the proxy's --log: a server flooding its stderr must not fill
// the disk, so the file is rotated at maxMB and at most backups old ones are
// kept (lumberjack removes the oldest in the background, so for a moment
// after a rotation one more may exist). The file is opened once here so that
// an unwritable path is refused at start, not at the first log line.
func openLog(path string, maxMB, backups int) (io.WriteCloser, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return &lumberjack.Logger{Filename: path, MaxSize: maxMB, MaxBackups: backups}, nil
}

// runProxy serves an MCP host on stdin/stdout in front of the server given
// after -- (or --config/--server), guarding its tool calls (SPEC §5a).
// stdout carries MCP messages only; logs go to stderr or --log.
func runProxy(ctx context.Context, e *env, args []string) int {
	var g globalOpts
	fs := newFlagSet("proxy", &g)
	logPath := fs.String("log", "", "write the proxy's log (and the server's stderr) to this file instead of stderr")
	logMax := fs.Int("log-max-mb", 10, "with --log: rotate the log at this many MiB")
	logBackups := fs.Int("log-backups", 3, "with --log: keep this many rotated logs (FILE-<time>.log)")
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
	if *logMax < 1 || *logBackups < 0 {
		fmt.Fprintf(e.stderr, "mcp-confirm proxy: --log-max-mb must be at least 1 and --log-backups at least 0\nGive sizes like --log-max-mb 10 --log-backups 3.\n")
		return exitBadInput
	}
	logw := io.Writer(e.stderr)
	if *logPath != "" {
		f, err := openLog(*logPath, *logMax, *logBackups)
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
