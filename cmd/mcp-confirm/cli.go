package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/internal/closest"
	"github.com/mcp-confirm/mcp-confirm/proxy"
)

// The command tree is cobra's: per-command help with positional arguments
// and examples, "did you mean" for a mistyped command, shell completion.
// What stays the product's own: the exit codes, the bare "--" before the
// server command (split off before cobra sees the line), and the two-line
// error messages, so cobra prints no errors or usage of its own.

// cli is one run of the command line: the outside world, the global flags
// as parsed, and the exit code the command chose.
type cli struct {
	ctx  context.Context
	env  *env
	g    globalOpts
	code int
}

// globalOpts are the flags every command accepts, before or after its name.
type globalOpts struct {
	db      string
	policy  string
	timeout time.Duration
	json    bool
	config  string
	server  string
	url     string // a remote server over Streamable HTTP
	// --url-env NAME: the URL is NAME's value in the environment (init
	// writes it so for a URL with a key in it, which the command line
	// would show to every local user through ps).
	urlEnv  string
	headers []string // --header 'Name: value', for --url
	// --header-env NAME: the header line "Name: value" is NAME's value in
	// the environment (init writes these, so that a token in a host's
	// config goes to the proxy's environment, not its command line).
	headerEnv []string
	// observe is not a flag: the console sets it (--metrics) before it
	// opens its engine, whose guard then tells it of every call.
	observe func(guard.Observation)
	console consoleFlags // the console's own flags (on the root and on tui)
}

// consoleFlags are the console's own flags.
type consoleFlags struct {
	metrics     string // --metrics HOST:PORT
	concurrency int    // --concurrency: queries out at once in a bulk query (S)
}

// addConsoleFlags puts the console's own flags on cmd (the root, and tui).
func (c *cli) addConsoleFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&c.g.console.metrics, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics while the console runs (HOST:PORT; without a host, loopback; port 0 picks one)")
	fl.IntVar(&c.g.console.concurrency, "concurrency", 8, "queries out at once when the console queries selected calls in bulk (S), 1 to 64")
}

// Which global flags a command uses. A global flag given to a command that
// does not use it is refused (it would silently do nothing), and a
// command's help lists only the global flags it uses.
var (
	journalOnly = []string{"db"}
	journalJSON = []string{"db", "json"}
	withServer  = []string{"db", "json", "policy", "timeout", "config", "server", "url", "url-env", "header", "header-env"}
)

const annotationGlobals = "mcp-confirm/globals"

// run dispatches a command line and returns the exit code (SPEC §4).
func run(ctx context.Context, args []string, e *env) int {
	if len(args) == 0 || !strings.HasPrefix(args[0], cobra.ShellCompRequestCmd) {
		for i, a := range args {
			if a == "--" {
				e.serverCmd = args[i+1:]
				args = args[:i]
				break
			}
		}
	}
	c := &cli{ctx: ctx, env: e}
	root := c.root()
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		return c.report(root, err)
	}
	return c.code
}

func (c *cli) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "mcp-confirm",
		Short: "an MCP host that never resends a write whose outcome is unknown",
		Long: `mcp-confirm — an MCP host that never resends a write whose outcome is unknown.

With no command it opens the operator console: the guided demo when no server
or journal is given, else over the server after -- (or --config/--server).`,
		Example: `  mcp-confirm                                   # the guided demo
  mcp-confirm --db j.db -- npx -y @acme/orders  # the console over your server
  mcp-confirm list --state unknown              # what needs a decision`,
		Version:           version,
		Args:              unknownCommand,
		SilenceErrors:     true,
		SilenceUsage:      true,
		PersistentPreRunE: c.checkGlobals,
		Run:               func(*cobra.Command, []string) { c.code = runConsole(c.ctx, c.env, &c.g) },
		Annotations:       map[string]string{annotationGlobals: strings.Join(withServer, ",")},
	}
	root.SetIn(c.env.stdin)
	root.SetOut(c.env.stdout)
	root.SetErr(c.env.stderr)
	// --version prints what the version command does (no "{{" can occur
	// in it: a module version has none).
	root.SetVersionTemplate(build.Long())
	root.SetUsageTemplate(usageTemplate)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return &usageError{cmd: cmd, err: err} })

	c.addConsoleFlags(root)
	pf := root.PersistentFlags()
	pf.StringVar(&c.g.db, "db", "", "journal file (else $MCP_CONFIRM_DB, else $XDG_STATE_HOME/mcp-confirm/journal.db)")
	pf.StringVar(&c.g.policy, "policy", "", "policy file (TOML; see README \"Policy\")")
	pf.DurationVar(&c.g.timeout, "timeout", 0, fmt.Sprintf("write timeout per attempt (default: the policy's, else %s; the proxy's %s)", guard.DefaultWriteTimeout, proxy.DefaultTimeout))
	pf.BoolVar(&c.g.json, "json", false, "machine-readable output")
	pf.StringVar(&c.g.config, "config", "", "host config file with mcpServers/servers (Claude, VS Code, Cursor)")
	pf.StringVar(&c.g.server, "server", "", "which server in --config")
	pf.StringVar(&c.g.url, "url", "", "a remote MCP server's Streamable HTTP endpoint (https://host/mcp)")
	pf.StringVar(&c.g.urlEnv, "url-env", "", "--url from an environment variable (for a URL with a key in it: off the command line)")
	pf.StringArrayVar(&c.g.headers, "header", nil, "HTTP header for --url, 'Name: value'; ${VAR} is read from the environment (repeatable)")
	pf.StringArrayVar(&c.g.headerEnv, "header-env", nil, "HTTP header for --url from an environment variable holding 'Name: value' (repeatable)")
	root.RegisterFlagCompletionFunc("server", c.completeServers)
	root.RegisterFlagCompletionFunc("db", fileCompletion("db"))
	root.RegisterFlagCompletionFunc("policy", fileCompletion("toml"))
	root.RegisterFlagCompletionFunc("config", fileCompletion("json"))

	root.AddGroup(&cobra.Group{ID: "calls", Title: "Calls:"}, &cobra.Group{ID: "decide", Title: "Decisions on a call:"},
		&cobra.Group{ID: "read", Title: "Reading the journal:"}, &cobra.Group{ID: "serve", Title: "Serving:"})
	root.SetHelpCommandGroupID("read")
	root.SetCompletionCommandGroupID("read")
	root.AddCommand(
		c.consoleCommand(), c.callCommand(), c.toolsCommand(), c.policyCommand(),
		c.queryCommand(), c.retryCommand(), c.compensateCommand(),
		c.decideCommand("abandon", "ID", "give up on a call: it did not happen, or it no longer matters",
			"  mcp-confirm abandon 17 --note \"customer cancelled\""),
		c.decideCommand("mark", "ID applied", "mark a call applied: you checked that it took effect",
			"  mcp-confirm mark 17 applied --note \"order 4412 in the shop's admin\""),
		c.decideCommand("note", "ID TEXT", "add a note to a call; its state does not change",
			"  mcp-confirm note 17 \"asked finance\""),
		c.decideCommand("ack", "ID", "you have seen a call that settled late: identical calls are sent again",
			"  mcp-confirm ack 17"),
		c.reconcileCommand(),
		c.listCommand(), c.showCommand(), c.exportCommand(), c.statsCommand(), c.reportCommand(), c.watchCommand(), c.verifyCommand(), c.journalCommand(),
		c.proxyCommand(), c.loginCommand(), c.initCommand(), c.uninstallCommand(), c.demoServerCommand(), c.versionCommand(),
	)
	// cobra adds these two itself; made now so their help reads like the rest.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, sub := range root.Commands() {
		switch sub.Name() {
		case "help":
			sub.Short = "help about any command"
		case "completion":
			sub.Short = "shell completion: source <(mcp-confirm completion bash), or zsh, fish"
		}
	}
	return root
}

// leaf makes a command whose run returns the exit code. Positional
// arguments are checked by the command itself, so that its messages say
// what is expected in the product's words.
func (c *cli) leaf(cmd *cobra.Command, group string, globals []string, run func(pos []string) int) *cobra.Command {
	cmd.GroupID = group
	cmd.Annotations = map[string]string{annotationGlobals: strings.Join(globals, ",")}
	cmd.Args = cobra.ArbitraryArgs
	cmd.Run = func(_ *cobra.Command, pos []string) { c.code = run(pos) }
	return cmd
}

func (c *cli) consoleCommand() *cobra.Command {
	cmd := c.leaf(&cobra.Command{
		Use:   "tui [-- SERVER_COMMAND [ARGS...]]",
		Short: "the operator console (the same as no command)",
		Example: `  mcp-confirm tui --db journal.db -- node orders-server.js
  mcp-confirm tui --config .mcp.json --server orders`,
	}, "calls", withServer, func(pos []string) int {
		if len(pos) > 0 {
			return c.unexpected("tui", pos[0], "Give the server after --, e.g. mcp-confirm tui -- node server.js.")
		}
		return runConsole(c.ctx, c.env, &c.g)
	})
	c.addConsoleFlags(cmd)
	return cmd
}

func (c *cli) versionCommand() *cobra.Command {
	return c.leaf(&cobra.Command{Use: "version", Short: "print the version, commit, commit date and Go version (also --version)"}, "read", nil, func(pos []string) int {
		if len(pos) > 0 {
			return c.unexpected("version", pos[0], "mcp-confirm version takes no arguments.")
		}
		fmt.Fprint(c.env.stdout, build.Long())
		return exitOK
	})
}

// unexpected reports a positional argument a command does not take.
func (c *cli) unexpected(cmd, arg, hint string) int {
	fmt.Fprintf(c.env.stderr, "mcp-confirm %s: unexpected argument %q\n%s\n", cmd, arg, hint)
	return exitBadInput
}

// checkGlobals refuses a global flag the command does not use, and a
// timeout that is not a positive duration (0 used to mean "no idle clock",
// silently: a call could hang until killed).
func (c *cli) checkGlobals(cmd *cobra.Command, _ []string) error {
	if cmd.Name() == cobra.ShellCompRequestCmd || cmd.Name() == cobra.ShellCompNoDescRequestCmd {
		return nil
	}
	uses := usedGlobals(cmd)
	var err error
	cmd.Root().PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if err != nil || !f.Changed || slices.Contains(uses, f.Name) {
			return
		}
		if local := cmd.LocalNonPersistentFlags().Lookup(f.Name); local != nil {
			return // the command has a flag of its own by that name
		}
		err = &usageError{cmd: cmd, err: fmt.Errorf("--%s does not apply to %s", f.Name, cmd.Name())}
	})
	if err != nil {
		return err
	}
	if c.g.urlEnv != "" {
		if c.g.url != "" {
			return &usageError{cmd: cmd, err: errors.New("--url and --url-env both name the server; give one")}
		}
		v := c.env.getenv(c.g.urlEnv)
		if v == "" {
			return &usageError{cmd: cmd, err: fmt.Errorf("--url-env %s: %s is not set in the environment (or is empty)", c.g.urlEnv, c.g.urlEnv)}
		}
		c.g.url = v
	}
	if f := cmd.Flags().Lookup("timeout"); f != nil && f.Changed && c.g.timeout <= 0 {
		return &usageError{cmd: cmd, err: fmt.Errorf("--timeout must be more than 0 (got %s): a write needs a clock to become unknown; give e.g. 30s", f.Value)}
	}
	if f := cmd.Flags().Lookup("host-timeout"); f != nil && f.Changed && f.Value.String() != "" {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d <= 0 {
			return &usageError{cmd: cmd, err: fmt.Errorf("--host-timeout must be more than 0 (got %s): it is how long the host waits for a tool call; give e.g. 4m", f.Value)}
		}
	}
	return nil
}

func usedGlobals(cmd *cobra.Command) []string {
	for ; cmd != nil; cmd = cmd.Parent() {
		if v, ok := cmd.Annotations[annotationGlobals]; ok {
			if v == "" {
				return nil
			}
			return strings.Split(v, ",")
		}
		if cmd.Name() == "completion" || cmd.Name() == "help" {
			return nil
		}
	}
	return nil
}

// unknownCommand is the root's argument rule: with no command named, the
// root is the console and takes no words (the server comes after --).
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	near, _ := closest.Name(args[0], names)
	return &unknownCommandError{name: args[0], suggestion: near}
}

type unknownCommandError struct {
	name       string
	suggestion string // the command it is nearest to, if any
}

func (e *unknownCommandError) Error() string { return fmt.Sprintf("unknown command %q", e.name) }

// usageError is a flag cobra or pflag could not parse, or one a command
// refuses; cmd is the command it was given to.
type usageError struct {
	cmd *cobra.Command
	err error
}

func (e *usageError) Error() string { return e.err.Error() }

// report prints an error cobra returned, in two lines, and gives its exit
// code. Errors of the commands themselves never get here: they print their
// own and return a code.
func (c *cli) report(root *cobra.Command, err error) int {
	var unknown *unknownCommandError
	var usage *usageError
	switch {
	case errors.As(err, &unknown):
		hint := "Run 'mcp-confirm --help' for the list of commands."
		if unknown.suggestion != "" {
			hint = fmt.Sprintf("Did you mean '%s'? Run 'mcp-confirm --help' for the list of commands.", unknown.suggestion)
		}
		fmt.Fprintf(c.env.stderr, "mcp-confirm: unknown command %q\n%s\n", unknown.name, hint)
	case errors.As(err, &usage):
		name := usage.cmd.CommandPath()
		msg := usage.err.Error()
		if flag, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
			if near, ok := closest.Name(flag, flagNames(usage.cmd)); ok {
				msg += fmt.Sprintf(" (did you mean --%s?)", near)
			}
		}
		fmt.Fprintf(c.env.stderr, "%s: %s\nRun '%s --help' for its flags.\n", name, msg, name)
	default:
		fmt.Fprintf(c.env.stderr, "mcp-confirm: %v\nRun 'mcp-confirm --help' for usage.\n", err)
	}
	return exitBadInput
}

func flagNames(cmd *cobra.Command) []string {
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	return names
}

// globalFlagUsages is the "Global flags" part of a command's help: only
// those it uses.
func globalFlagUsages(cmd *cobra.Command) string {
	if !cmd.HasParent() {
		return "" // the root lists them as its own
	}
	uses := usedGlobals(cmd)
	fs := pflag.NewFlagSet(cmd.Name(), pflag.ContinueOnError)
	cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) {
		if slices.Contains(uses, f.Name) {
			fs.AddFlag(f)
		}
	})
	return strings.TrimRight(fs.FlagUsages(), " \n")
}

func init() { cobra.AddTemplateFunc("globalFlagUsages", globalFlagUsages) }

const usageTemplate = `Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} COMMAND [flags] [-- SERVER_COMMAND [ARGS...]]{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}{{range $group := .Groups}}

{{.Title}}{{range $.Commands}}{{if (and (eq .GroupID $group.ID) .IsAvailableCommand)}}
  {{rpad .Name .NamePadding}} {{.Short}}{{end}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{with globalFlagUsages .}}

Global flags (the same before or after the command name):
{{.}}{{end}}

Exit codes: 0 ok/succeeded, 1 failed, 2 bad input, 3 unknown, 4 held, 5 server or journal unavailable.
`
