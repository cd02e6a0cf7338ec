package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/term"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/metrics"
	"github.com/mcp-confirm/mcp-confirm/notify"
	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/tui"
)

// The guided demo (SPEC §4): the built-in server, on a journal of its own,
// losing the first create_order answer, with a short write timeout.
const (
	demoTimeout = 5 * time.Second
	demoDelay   = "1500ms" // create_order takes this long, with progress, so the bar shows
	demoPolicy  = `# The guided demo's policy, written by mcp-confirm. See README "Policy".
# A query for create_order: find the order by the call's idempotency key.
[tools.create_order]
query_tool = "find_orders"
query_args = { idempotency_key = "{key}" }
`
)

// runConsole opens the operator console. With no server and no journal
// given it is the guided demo.
func runConsole(ctx context.Context, e *env, g *globalOpts) int {
	cf := g.console
	if cf.concurrency < 1 || cf.concurrency > 64 {
		fmt.Fprintf(e.stderr, "mcp-confirm: --concurrency %d: want 1 to 64 queries at once\n", cf.concurrency)
		return exitBadInput
	}
	if cf.metrics != "" {
		if err := metrics.CheckAddr(cf.metrics); err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm: --metrics %q: %v\nGive HOST:PORT, such as 127.0.0.1:9464 (port 0 picks one).\n", cf.metrics, err)
			return exitBadInput
		}
	}
	if !isTerminal(e) {
		fmt.Fprintln(e.stderr, "mcp-confirm: the console needs a terminal on stdin and stdout.\nFor scripts use 'mcp-confirm list', 'show', 'call', 'retry' (see --help).")
		return exitBadInput
	}
	demo := len(e.serverCmd) == 0 && g.config == "" && g.server == "" && g.db == "" && e.getenv("MCP_CONFIRM_DB") == ""
	if demo {
		if code := setUpDemo(e, g); code != exitOK {
			return code
		}
	}
	// The metrics are made before the engine, so that its guard tells them
	// of every call; they read the engine's server and journal at scrape.
	// Over several servers there is no one server to name: the server
	// label is empty, and the sessions are those of all of them.
	var m *metrics.Metrics
	var en *engine
	var fl *fleet
	if cf.metrics != "" {
		m = metrics.New(metrics.Options{
			Server: func() string {
				if fl != nil {
					return ""
				}
				return en.client.ServerInfo().Name
			},
			Sessions: func() int {
				if fl != nil {
					return fl.sessionsStarted()
				}
				return en.client.Session()
			},
		})
		g.observe = m.ObserveCall
	}
	var code int
	if !demo && allServers(e, g) {
		fl, en, code = openFleet(ctx, e, g)
	} else {
		en, code = openEngine(ctx, e, g, "console", 0)
	}
	if fl == nil && en == nil {
		return code
	}
	opts := tui.Options{
		Demo:         demo,
		WriteTimeout: g.timeout, // 0: the policy's clock for each tool, else the default
		Home:         e.getenv("HOME"),
		Concurrency:  cf.concurrency,
		Login:        consoleLogin(e), // O on a remote server that wants a login (issue 19)
		LoginWait:    defaultLoginWait,
	}
	var j *pending.Journal
	var notifier *notify.Notifier // told of the calls a watch finds recovered; nil: none
	if fl != nil {
		defer fl.close()
		j, notifier = fl.journal, fl.sessions.notifier
		opts.Engine, opts.Servers, opts.Policy = fl, fl, fl.policy
	} else {
		defer en.close()
		j, notifier = en.journal, en.notifier
		opts.Engine, opts.Server, opts.Policy = en.guard, en.client, en.policy
	}
	opts.Journal = j
	if m != nil {
		m.SetJournal(j)
		mctx, stop := context.WithCancel(ctx)
		defer stop()
		// The console owns the terminal: the server's log lines go to
		// nowhere, and the address to stderr before the screen opens.
		url, err := m.Serve(mctx, cf.metrics, slog.New(slog.DiscardHandler))
		if err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm: %v\nGive a free HOST:PORT for --metrics, such as 127.0.0.1:9464 (port 0 picks one).\n", err)
			return exitBadInput
		}
		fmt.Fprintf(e.stderr, "mcp-confirm: metrics at %s\n", url)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts.Context = ctx
	opts.Watch = guard.Watch(ctx, j, 250*time.Millisecond, 5*time.Second, func(ids []int64) {
		notifier.Recovered(ctx, j, ids) // nil notifier: nothing
	})
	if demo {
		opts.Prefill = map[string]map[string]any{
			"create_order": {"item": "widget", "quantity": 2, "buyer": "alice"},
			"find_orders":  {"buyer": "alice"},
			"get_budget":   {"buyer": "alice"},
		}
	}
	p := tea.NewProgram(tui.New(opts), tea.WithAltScreen(), tea.WithInput(e.stdin), tea.WithOutput(e.stdout))
	if _, err := p.Run(); err != nil && !errors.Is(err, tea.ErrProgramKilled) {
		fmt.Fprintf(e.stderr, "mcp-confirm: the console stopped: %v\n", err)
		return exitUnavailable
	}
	return exitOK
}

// setUpDemo points the console at the demo's own journal and a demo server
// that loses its first create_order answer, and writes the demo's policy.
func setUpDemo(e *env, g *globalOpts) int {
	dir, err := demoDir(e.getenv)
	if err == nil {
		err = os.MkdirAll(dir, 0o700)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm: cannot make the demo's folder: %v\nPass a journal with --db to skip the demo.\n", err)
		return exitUnavailable
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm: cannot find this program to run the demo server: %v\n", err)
		return exitUnavailable
	}
	g.db = filepath.Join(dir, "journal.db")
	e.serverCmd = []string{self, "demo-server", "--db", filepath.Join(dir, "demo-server.db"), "--hang-after-commit", "1", "--delay", demoDelay}
	if g.timeout == 0 {
		g.timeout = demoTimeout
	}
	if g.policy == "" {
		g.policy = filepath.Join(dir, "policy.toml")
		if _, err := os.Stat(g.policy); errors.Is(err, os.ErrNotExist) {
			if err := os.WriteFile(g.policy, []byte(demoPolicy), 0o600); err != nil {
				fmt.Fprintf(e.stderr, "mcp-confirm: cannot write the demo policy: %v\n", err)
				return exitUnavailable
			}
		}
	}
	return exitOK
}

// demoDir is the guided demo's folder: beside the default journal, never
// the operator's journal itself.
func demoDir(getenv func(string) string) (string, error) {
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "mcp-confirm", "demo"), nil
	}
	home := getenv("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		home = h
	}
	return filepath.Join(home, ".local", "state", "mcp-confirm", "demo"), nil
}

func isTerminal(e *env) bool {
	in, ok1 := e.stdin.(*os.File)
	out, ok2 := e.stdout.(*os.File)
	return ok1 && ok2 && term.IsTerminal(in.Fd()) && term.IsTerminal(out.Fd())
}
