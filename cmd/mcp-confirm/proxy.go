package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"
	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/metrics"
	"github.com/mcp-confirm/mcp-confirm/proxy"
	"github.com/mcp-confirm/mcp-confirm/termtext"
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

type proxyFlags struct {
	logPath            string
	logMax, logBackups int
	demo               bool
	hostTimeout        time.Duration
	metrics            string // --metrics HOST:PORT
}

func (c *cli) proxyCommand() *cobra.Command {
	var f proxyFlags
	cmd := c.leaf(&cobra.Command{
		Use:   "proxy [--log FILE] (-- SERVER_COMMAND [ARGS...] | --url URL)",
		Short: "stdio MCP proxy for hosts: guards tool calls on the way to the server",
		Long: fmt.Sprintf(`Serve an MCP host on stdin/stdout in front of the server given after -- (or
--config/--server, or a remote one at --url), guarding its tool calls: every write is journaled before
it is sent and never resent. stdout carries MCP messages only; logs go to
stderr or --log.

The proxy answers a write it cannot settle (unknown: do not retry) before
the host gives up on its own. It knows the deadlines of common hosts by the
name they send (Claude Desktop 4m, goose 300s, Gemini CLI 600s, the
TypeScript SDK's 60s, ...) and sets its write clock at 80%% of it; a host it
does not know gets %s. The log's "write clock" line says which applies;
--host-timeout gives the host's deadline, --timeout the clock itself.`, proxy.DefaultTimeout),
		Example: `  mcp-confirm proxy --db ~/orders.db -- npx -y @acme/orders-mcp
  mcp-confirm proxy --url https://orders.example.com/mcp --header 'Authorization: Bearer ${ORDERS_TOKEN}'
  mcp-confirm proxy --config ~/.cursor/mcp.json --server orders --log /tmp/proxy.log`,
	}, "serve", withServer, func(pos []string) int { return runProxy(c.ctx, c.env, &c.g, f, pos) })
	fl := cmd.Flags()
	fl.StringVar(&f.logPath, "log", "", "write the proxy's log (and the server's stderr) to this file instead of stderr")
	fl.IntVar(&f.logMax, "log-max-mb", 10, "with --log: rotate the log at this many MiB")
	fl.IntVar(&f.logBackups, "log-backups", 3, "with --log: keep this many rotated logs (FILE-<time>.log)")
	fl.DurationVar(&f.hostTimeout, "host-timeout", 0, "the host's own deadline for a tool call, where the table of known hosts does not fit (default: by the host's name; the policy's host_timeout)")
	fl.BoolVar(&f.demo, "demo", false, "serve the built-in demo orders server (when no server is given)")
	fl.StringVar(&f.metrics, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics (HOST:PORT; without a host, loopback; port 0 picks one, logged)")
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	return cmd
}

// runProxy serves an MCP host on stdin/stdout in front of the server given
// after -- (or --config/--server), guarding its tool calls (SPEC §5a).
// stdout carries MCP messages only; logs go to stderr or --log.
func runProxy(ctx context.Context, e *env, g *globalOpts, f proxyFlags, pos []string) int {
	// What is wrong before the proxy can serve is said twice: on stderr (a
	// log the host may keep) and as the answer to the host's first request,
	// which the host shows (else it says only "server disconnected").
	var said bytes.Buffer
	pe := *e
	pe.stderr = io.MultiWriter(e.stderr, &said)
	p, closeAll, code := prepareProxy(ctx, &pe, e.stderr, g, f, pos)
	if p == nil {
		refuseHost(ctx, e, said.String())
		return code
	}
	defer closeAll()
	if err := p.Run(ctx, e.stdin, e.stdout); err != nil {
		hint := "Check that the server starts on its own (run its command by hand)."
		if errors.Is(err, mcpclient.ErrAuthorization) {
			hint = fmt.Sprintf("Run 'mcp-confirm login --url %s' in a terminal, then restart the host.", shellQuote(authURL(g, err)))
		} else if g.url != "" {
			hint = "Check that the server at " + mcpclient.MaskURL(g.url) + " is up and answers (its logs, --url, --header)."
		}
		// It may quote the server's stderr or its own error text.
		fmt.Fprintf(e.stderr, "mcp-confirm proxy: %s\n%s\n", termtext.Strip(mcpclient.MaskURLsIn(err.Error())), hint)
		return exitUnavailable
	}
	return exitOK
}

type closerFunc func()

func (f closerFunc) Close() error { f(); return nil }

// refuseWait bounds how long a proxy that cannot serve waits for the host's
// first request to answer it.
const refuseWait = 10 * time.Second

// refuseHost answers the host's first request with the reason the proxy
// cannot serve, unless stdin is a terminal (a person, who has read stderr).
func refuseHost(ctx context.Context, e *env, reason string) {
	if f, ok := e.stdin.(*os.File); ok && term.IsTerminal(f.Fd()) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, refuseWait)
	defer cancel()
	_ = proxy.Refuse(ctx, e.stdin, e.stdout, reason)
}

// prepareProxy checks everything the proxy needs before it serves: the
// flags, the policy, the log, the journal and the server. Errors are
// printed; p is nil when one stops it, and code is then the exit code.
//
// e.stderr also feeds the reason for the host, and is written by this
// goroutine only; the running proxy logs to logTo (the real stderr) from
// many goroutines.
func prepareProxy(ctx context.Context, e *env, logTo io.Writer, g *globalOpts, f proxyFlags, pos []string) (p *proxy.Proxy, closeAll func(), code int) {
	if len(pos) > 0 {
		fmt.Fprintf(e.stderr, "mcp-confirm proxy: unexpected argument %q\nGive the server after --, e.g. mcp-confirm proxy -- npx -y @modelcontextprotocol/server-filesystem /tmp\n", pos[0])
		return nil, nil, exitBadInput
	}
	if len(e.serverCmd) == 0 && g.config == "" && g.server == "" && g.url == "" && !f.demo {
		fmt.Fprintln(e.stderr, "mcp-confirm proxy: no server given: the proxy would serve the built-in demo orders server to the model\n"+
			"Give the server after -- (mcp-confirm proxy -- npx -y @acme/orders), --url URL, or --config F --server N; --demo serves the demo.")
		return nil, nil, exitBadInput
	}
	var policy *guard.Policy
	if g.policy != "" {
		pol, err := guard.LoadPolicy(g.policy)
		if err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm proxy: %v\nFix the policy file (see README, \"Policy\") and run again.\n", err)
			return nil, nil, exitBadInput
		}
		policy = pol
	}
	if f.logMax < 1 || f.logBackups < 0 {
		fmt.Fprintf(e.stderr, "mcp-confirm proxy: --log-max-mb must be at least 1 and --log-backups at least 0\nGive sizes like --log-max-mb 10 --log-backups 3.\n")
		return nil, nil, exitBadInput
	}
	if f.metrics != "" {
		if err := metrics.CheckAddr(f.metrics); err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm proxy: %v\nNothing was started.\n", err)
			return nil, nil, exitBadInput
		}
	}
	// What is open so far, closed in reverse if a later step refuses.
	var opened []io.Closer
	closeAll = func() {
		for i := len(opened) - 1; i >= 0; i-- {
			opened[i].Close()
		}
	}
	logw := logTo
	if f.logPath != "" {
		lf, err := openLog(f.logPath, f.logMax, f.logBackups)
		if err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm proxy: --log: %v\nGive a writable file.\n", err)
			return nil, nil, exitBadInput
		}
		logw, opened = lf, append(opened, lf)
	}
	j, code := openJournal(ctx, e, g)
	if j == nil {
		closeAll()
		return nil, nil, code
	}
	opened = append(opened, j)
	choice, err := serverSpec(e, g, filepath.Join(journalDir(e, j), "demo-server.db"))
	if err == nil {
		err = addHeaders(&choice.spec, g.headers, g.headerEnv)
	}
	withLogins(e, &choice)
	if err != nil {
		closeAll()
		fmt.Fprintf(e.stderr, "mcp-confirm proxy: %v\nRun 'mcp-confirm proxy --help' for server selection.\n", err)
		return nil, nil, exitBadInput
	}
	if choice.spec.URL != "" {
		// What mcpclient would refuse later (headers that let Go's HTTP
		// client resend a POST by itself) is refused here, before serving.
		if _, err := mcpclient.NewRemote(choice.spec, mcpclient.Options{OAuth: choice.logins}); err != nil {
			closeAll()
			fmt.Fprintf(e.stderr, "mcp-confirm proxy: %v\nRun 'mcp-confirm proxy --help' for server selection.\n", err)
			return nil, nil, exitBadInput
		}
	}
	log := slog.New(slog.NewTextHandler(logw, nil)).With("from", "mcp-confirm proxy")
	// The log's first line says which build wrote it, before the server
	// (whose stderr shares the log) is started.
	log.Info("mcp-confirm proxy starting", build.LogArgs()...)
	var m *metrics.Metrics
	var observe func(guard.Observation)
	if f.metrics != "" {
		m = metrics.New(metrics.Options{Journal: j, Server: func() string { return p.ServerName() },
			Sessions: func() int { return p.Sessions() }})
		observe = m.ObserveCall
	}
	p = proxy.New(proxy.Options{
		Server: choice.spec, Identity: choice.identity, Journal: j, Policy: policy, Timeout: g.timeout, HostTimeout: f.hostTimeout, Version: version,
		Logger: log, ServerStderr: logw, Observe: observe, OAuth: choice.logins,
	})
	if m != nil {
		mctx, stop := context.WithCancel(ctx)
		metricsURL, err := m.Serve(mctx, f.metrics, log)
		if err != nil {
			stop()
			closeAll()
			fmt.Fprintf(e.stderr, "mcp-confirm proxy: %v\nGive a free HOST:PORT for --metrics, such as 127.0.0.1:9464 (port 0 picks one).\n", err)
			return nil, nil, exitBadInput
		}
		opened = append(opened, closerFunc(stop))
		log.Info("metrics listening", "metrics_url", metricsURL)
	}
	return p, closeAll, exitOK
}
