package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/hostconfig"
	"github.com/mcp-confirm/mcp-confirm/internal/closest"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/termtext"
)

type initFlags struct {
	hosts   []string
	all     bool
	dryRun  bool
	exclude []string
}

func (c *cli) initCommand() *cobra.Command {
	var f initFlags
	cmd := c.leaf(&cobra.Command{
		Use:   "init [--host NAME] [--all] [--dry-run] [--exclude LIST]",
		Short: "put mcp-confirm proxy in front of a host's MCP servers (Claude, Cursor, VS Code, ...)",
		Long: `Rewrite the MCP host's config so that each stdio server starts through
'mcp-confirm proxy --db J --policy P -- <its command and args>', keeping its
env, cwd and every other field. A remote (url) entry over Streamable HTTP
becomes 'mcp-confirm proxy --db J --policy P --url URL', its headers moved
into env and read with --header-env; a URL with a query, a user or a
fragment (?api_key=..., a key maybe) moves into env too, read with
--url-env, so that ps does not show it. Shows a diff of each file before writing it
and keeps a byte-exact backup, which 'mcp-confirm uninstall' restores.

Hosts: ` + strings.Join(hostconfig.HostNames(), ", ") + `. Without --host, the hosts
whose config files exist are listed and you are asked (or give --all).
SSE, WebSocket and OAuth entries, disabled entries, entries already wrapped and those
named in --exclude are left alone. Running init again changes nothing.
The journal is --db (else the default journal); the policy --policy (else
policy.toml beside the journal, created with comments only if missing).`,
		Example: `  mcp-confirm init --host claude-desktop --dry-run
  mcp-confirm init --host cursor,vscode --exclude github
  mcp-confirm init --all --db ~/work.db --policy ~/policy.toml`,
	}, "serve", []string{"db", "policy"}, func(pos []string) int { return runInit(c.env, &c.g, f, pos) })
	fl := cmd.Flags()
	fl.StringSliceVar(&f.hosts, "host", nil, "the host(s) to set up: "+strings.Join(hostconfig.HostNames(), ", "))
	fl.BoolVar(&f.all, "all", false, "set up every host whose config file exists, without asking")
	fl.BoolVar(&f.dryRun, "dry-run", false, "show what would change; write nothing")
	fl.StringSliceVar(&f.exclude, "exclude", nil, "server names to leave alone (comma-separated)")
	cmd.RegisterFlagCompletionFunc("host", hostCompletion)
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	return cmd
}

func hostCompletion(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return hostconfig.HostNames(), cobra.ShellCompDirectiveNoFileComp
}

// policyTemplate is the policy init writes when none is given and none is
// beside the journal: comments only, so every tool is judged by its own
// readOnlyHint until the operator says otherwise.
const policyTemplate = `# The policy of the servers 'mcp-confirm init' put behind mcp-confirm proxy.
# See README "Policy". With nothing here, a tool that declares readOnlyHint
# is a read and every other tool is a write (journaled, never resent).
#
# [tools.create_order]
# kind = "write"
# query_tool = "find_orders"
# query_args = { idempotency_key = "{key}" }
`

func runInit(e *env, g *globalOpts, f initFlags, pos []string) int {
	if len(pos) > 0 {
		return (&cli{env: e}).unexpected("init", pos[0], "Name hosts with --host, e.g. mcp-confirm init --host cursor.")
	}
	henv, code := hostEnv(e, "init")
	if code != exitOK {
		return code
	}
	chosen, code := chooseHosts(e, henv, f)
	if code != exitOK || len(chosen) == 0 {
		return code
	}
	w, newPolicy, code := initWrap(e, g, f)
	if code != exitOK {
		return code
	}

	// Read every file first: a malformed one stops init before anything
	// is written.
	var files []*hostconfig.File
	bad := false
	for _, h := range chosen {
		n := 0
		for _, loc := range h.Files(henv) {
			file, err := hostconfig.Read(loc, w)
			if err != nil {
				bad = true
				var pe *hostconfig.ParseError
				if errors.As(err, &pe) {
					fmt.Fprintf(e.stderr, "mcp-confirm init: %v\nFix the file (%s would not read it either) and run init again; nothing was changed.\n", pe, h.Title)
				} else {
					fmt.Fprintf(e.stderr, "mcp-confirm init: cannot read %s: %v\nNothing was changed.\n", loc.Path, err)
				}
				continue
			}
			if file != nil {
				files, n = append(files, file), n+1
			}
		}
		if n == 0 && !bad {
			var paths []string
			for _, loc := range h.Files(henv) {
				paths = append(paths, loc.Path)
			}
			fmt.Fprintf(e.stderr, "mcp-confirm init: no %s config: looked for %s\nAdd a server in %s first, or name another host with --host.\n",
				h.Title, strings.Join(paths, ", "), h.Title)
			return exitBadInput
		}
	}
	if bad {
		return exitBadInput
	}
	if code := checkExcludes(e, f.exclude, files); code != exitOK {
		return code
	}

	changed, wrapped := 0, 0
	for _, file := range files {
		printFile(e, file, w.Self)
		if file.Changed() {
			changed++
			for _, en := range file.Entries {
				if en.Action == hostconfig.Wrapped {
					wrapped++
				}
			}
		}
	}
	if changed == 0 {
		fmt.Fprintln(e.stdout, "Nothing to change: every stdio server already goes through mcp-confirm proxy or is left alone as said above. Nothing written.")
		return exitOK
	}
	if f.dryRun {
		fmt.Fprintf(e.stdout, "Dry run: %d file(s) would change, %d server(s) would start through mcp-confirm proxy. Nothing written.\n", changed, wrapped)
		return exitOK
	}
	for _, file := range files {
		if file.Changed() {
			if err := file.Writable(); err != nil {
				return writeFailed(e, "init", err, "nothing was changed")
			}
		}
	}
	if newPolicy {
		if err := writeNewFile(w.Policy, []byte(policyTemplate)); err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm init: cannot write the policy %s: %v\nGive one with --policy FILE; nothing was changed.\n", w.Policy, err)
			return exitUnavailable
		}
		fmt.Fprintf(e.stdout, "wrote the policy %s (comments only: edit it to name reads, writes and queries)\n", w.Policy)
	}
	store, code := initStore(e, "init")
	if code != exitOK {
		return code
	}
	done := 0
	for _, file := range files {
		if !file.Changed() {
			continue
		}
		res, err := store.Install(file, time.Now())
		if err != nil {
			what := "nothing was changed"
			if done > 0 {
				what = fmt.Sprintf("%d file(s) above were written; run 'mcp-confirm uninstall' to put them back", done)
			}
			return writeFailed(e, "init", err, what)
		}
		done++
		if !res.KeptFrom.IsZero() {
			fmt.Fprintf(e.stdout, "wrote %s; kept the backup from the first init (%s): %s\n", file.Path, res.KeptFrom.Local().Format("2006-01-02 15:04"), res.Backup)
		} else {
			fmt.Fprintf(e.stdout, "wrote %s; backup of the original: %s\n", file.Path, res.Backup)
		}
	}
	fmt.Fprintf(e.stdout, "%d file(s) changed, %d server(s) now start through mcp-confirm proxy. Restart the host to use them; 'mcp-confirm uninstall' puts the files back.\n", done, wrapped)
	return exitOK
}

// hostEnv is where the hosts' files are looked for: $HOME, and the working
// folder for per-project files.
func hostEnv(e *env, cmd string) (hostconfig.Env, int) {
	dir, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm %s: no working folder: %v\nRun it from a folder that exists.\n", cmd, err)
		return hostconfig.Env{}, exitUnavailable
	}
	henv := hostconfig.EnvFrom(e.getenv, runtime.GOOS, dir)
	if henv.Home == "" {
		if henv.Home, err = os.UserHomeDir(); err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm %s: no home folder: %v\nSet $HOME.\n", cmd, err)
			return hostconfig.Env{}, exitBadInput
		}
	}
	return henv, exitOK
}

// lookupHosts turns --host names into hosts; an unknown one is refused
// with the nearest name.
func lookupHosts(e *env, cmd string, names []string) ([]hostconfig.Host, int) {
	var out []hostconfig.Host
	for _, n := range names {
		h, err := hostconfig.Lookup(strings.TrimSpace(n))
		var unknown *hostconfig.UnknownHostError
		if errors.As(err, &unknown) {
			hint := ""
			if unknown.Suggestion != "" {
				hint = fmt.Sprintf("Did you mean '%s'? ", unknown.Suggestion)
			}
			fmt.Fprintf(e.stderr, "mcp-confirm %s: unknown host %q\n%sHosts: %s.\n", cmd, unknown.Name, hint, strings.Join(hostconfig.HostNames(), ", "))
			return nil, exitBadInput
		}
		if !slices.ContainsFunc(out, func(o hostconfig.Host) bool { return o.Name == h.Name }) {
			out = append(out, h)
		}
	}
	return out, exitOK
}

// chooseHosts is --host, or --all, or the answer of the person at the
// terminal; with none of them, init refuses (exit 2).
func chooseHosts(e *env, henv hostconfig.Env, f initFlags) ([]hostconfig.Host, int) {
	if len(f.hosts) > 0 && f.all {
		fmt.Fprintln(e.stderr, "mcp-confirm init: --host and --all together\nGive one: --host NAME for those hosts, --all for every host found.")
		return nil, exitBadInput
	}
	if len(f.hosts) > 0 {
		return lookupHosts(e, "init", f.hosts)
	}
	found := hostconfig.Detect(henv)
	if len(found) == 0 {
		fmt.Fprintf(e.stderr, "mcp-confirm init: found no MCP host config (in %s and %s)\nName the host with --host NAME (%s) once it has a server.\n",
			henv.Home, henv.Dir, strings.Join(hostconfig.HostNames(), ", "))
		return nil, exitBadInput
	}
	if f.all {
		return found, exitOK
	}
	var names []string
	for _, h := range found {
		names = append(names, h.Name)
	}
	if !isTerminal(e) {
		fmt.Fprintf(e.stderr, "mcp-confirm init: which hosts? Found config of: %s\nGive --host NAME (several: --host a,b) or --all; there is no terminal to ask on.\n", strings.Join(names, ", "))
		return nil, exitBadInput
	}
	chosen, err := hostconfig.Choose(e.stdin, e.stdout, found, func(h hostconfig.Host) string {
		var paths []string
		for _, loc := range h.Files(henv) {
			if _, err := os.Stat(loc.Path); err == nil {
				paths = append(paths, loc.Path)
			}
		}
		return strings.Join(paths, ", ")
	})
	if err != nil {
		fmt.Fprintln(e.stderr, "mcp-confirm init: no answer; nothing was changed\nGive --host NAME or --all to choose without a question.")
		return nil, exitBadInput
	}
	if len(chosen) == 0 {
		fmt.Fprintln(e.stdout, "No host chosen; nothing was changed.")
	}
	return chosen, exitOK
}

// initWrap is what each wrapped entry will run: this binary, the journal
// and the policy, as absolute paths (a host starts servers from a folder
// of its own). newPolicy: the default policy is to be created.
func initWrap(e *env, g *globalOpts, f initFlags) (w hostconfig.Wrap, newPolicy bool, code int) {
	exe, err := os.Executable()
	if err == nil {
		w.Self, err = hostconfig.SelfPath(exe, exec.LookPath)
	}
	if errors.Is(err, hostconfig.ErrTemporaryBinary) {
		fmt.Fprintf(e.stderr, "mcp-confirm init: %v\nInstall it first (go install ./cmd/mcp-confirm) and run that mcp-confirm init; nothing was changed.\n", err)
		return w, false, exitBadInput
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm init: cannot tell where this mcp-confirm is: %v\nRun it by its full path.\n", err)
		return w, false, exitUnavailable
	}
	journal := g.db
	if journal == "" {
		if journal, err = pending.DefaultPath(e.getenv); err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm init: %s\n", noPathText(err))
			return w, false, exitBadInput
		}
	}
	policyDir := ""
	switch {
	case pending.HasPassword(journal):
		fmt.Fprintf(e.stderr, "mcp-confirm init: --db %s has a password, which init would write into the host's config\n"+
			"Leave it out and keep it in ~/.pgpass (or $PGPASSWORD); nothing was changed.\n", pending.HidePassword(journal))
		return w, false, exitBadInput
	case pending.IsPostgres(journal):
		w.Journal = journal // a team's journal: the policy stays on this machine
		policyDir = localStateDir(e)
	default:
		if w.Journal, err = filepath.Abs(journal); err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm init: --db %s: %v\nGive the journal's full path.\n", journal, err)
			return w, false, exitBadInput
		}
		policyDir = filepath.Dir(w.Journal)
	}
	policy := g.policy
	if policy == "" {
		policy = filepath.Join(policyDir, "policy.toml")
		if _, err := os.Stat(policy); errors.Is(err, fs.ErrNotExist) {
			newPolicy = true
		}
	}
	if w.Policy, err = filepath.Abs(policy); err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm init: --policy %s: %v\nGive the policy's full path.\n", policy, err)
		return w, false, exitBadInput
	}
	if !newPolicy {
		// The proxy refuses to start on a policy it cannot read: say so now.
		if _, err := guard.LoadPolicy(w.Policy); err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm init: %v\nFix the policy (see README, \"Policy\") or give another with --policy; nothing was changed.\n", err)
			return w, false, exitBadInput
		}
	}
	w.Exclude = f.exclude
	return w, newPolicy, exitOK
}

// checkExcludes refuses an --exclude name that is no server in the files: a
// typo would wrap the server meant to be left alone.
func checkExcludes(e *env, exclude []string, files []*hostconfig.File) int {
	var names []string
	for _, file := range files {
		for _, en := range file.Entries {
			names = append(names, en.Name)
		}
	}
	for _, x := range exclude {
		if slices.Contains(names, x) {
			continue
		}
		hint := ""
		if near, ok := closest.Name(x, names); ok {
			hint = fmt.Sprintf(" (did you mean %s?)", near)
		}
		fmt.Fprintf(e.stderr, "mcp-confirm init: --exclude %s: no server of that name in these files%s\nGive the names as the config spells them; nothing was changed.\n", x, hint)
		return exitBadInput
	}
	return exitOK
}

// printFile says what init does with each entry of a file, then shows the
// diff.
func printFile(e *env, file *hostconfig.File, self string) {
	fmt.Fprintf(e.stdout, "%s: %s\n", file.Host, file.Path)
	if len(file.Entries) == 0 {
		fmt.Fprintln(e.stdout, "  no MCP servers in this file")
	}
	for _, en := range file.Entries {
		name := en.Name
		if p, ok := strings.CutPrefix(en.At, "projects."); ok {
			name += " (project " + strings.TrimSuffix(p, ".mcpServers") + ")"
		}
		switch en.Action {
		case hostconfig.Wrapped:
			remote := ""
			if en.URL != "" {
				remote = "remote " + termtext.Line(mcpclient.MaskURL(en.URL)) + " through proxy --url, "
			}
			fmt.Fprintf(e.stdout, "  %s: wrapped: %sjournal %s, %s\n", name, remote, en.Journal, policyWords(en.Policy))
			if len(en.LoginArgs) > 0 {
				// The host did this login itself; the proxy cannot open a
				// browser for it, so the operator does it once, now.
				words := make([]string, len(en.LoginArgs))
				for i, a := range en.LoginArgs {
					words[i] = shellQuote(termtext.Line(a))
				}
				fmt.Fprintf(e.stdout, "    its host logged in with OAuth itself: log in once before it starts: %s %s\n", shellQuote(self), strings.Join(words, " "))
			}
		case hostconfig.AlreadyWrapped:
			fmt.Fprintf(e.stdout, "  %s: skipped: %s (journal %s, %s)\n", name, en.Reason, orDefault(en.Journal, "the default"), policyWords(en.Policy))
		default:
			fmt.Fprintf(e.stdout, "  %s: skipped: %s\n", name, en.Reason)
		}
	}
	if d := hostconfig.Diff(file.Path, "after mcp-confirm init", file.Before, file.After); d != "" {
		// A key in a URL's query is masked here as everywhere it is shown.
		fmt.Fprint(e.stdout, mcpclient.MaskURLsIn(d))
	} else {
		fmt.Fprintln(e.stdout, "  nothing to change in this file")
	}
}

func policyWords(p string) string {
	if p == "" {
		return "no policy"
	}
	return "policy " + p
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// initStore is the backups' folder in the state folder.
func initStore(e *env, cmd string) (hostconfig.Store, int) {
	dir, err := hostconfig.DefaultStoreDir(e.getenv)
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm %s: %v\nSet $HOME or $XDG_STATE_HOME.\n", cmd, err)
		return hostconfig.Store{}, exitBadInput
	}
	return hostconfig.Store{Dir: dir}, exitOK
}

// writeFailed reports a file init or uninstall could not write.
func writeFailed(e *env, cmd string, err error, what string) int {
	var we *hostconfig.WriteError
	switch {
	case errors.As(err, &we) && we.ReadOnly:
		fmt.Fprintf(e.stderr, "mcp-confirm %s: %s is read-only to you; %s\nMake it writable (chmod u+w %s), or leave this host out with --host.\n", cmd, we.Path, what, shellQuote(we.Path))
	case errors.Is(err, hostconfig.ErrChangedMeanwhile):
		fmt.Fprintf(e.stderr, "mcp-confirm %s: %v; %s\nRun it again (quit the host first if it keeps rewriting the file).\n", cmd, err, what)
	default:
		fmt.Fprintf(e.stderr, "mcp-confirm %s: %v; %s\nCheck the file's folder and disk, and run it again.\n", cmd, err, what)
	}
	return exitUnavailable
}

// writeNewFile creates path (0600, in a 0700 folder) unless it exists.
func writeNewFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
