package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/termtext"
)

type reconcileFlags struct {
	state, server, tool, since string
	concurrency                int
	applyFound                 bool
}

// defaultConcurrency is how many queries reconcile has out at once, over
// all servers (issue 21).
const defaultConcurrency = 8

func (c *cli) reconcileCommand() *cobra.Command {
	var f reconcileFlags
	cmd := c.leaf(&cobra.Command{
		Use:   "reconcile [--state unknown] [--server S] [--tool T] [--since WHEN] [--concurrency N] [--apply-found]",
		Short: "query every unknown call on its own server, and report what each query found",
		Long: `Run the policy's query (query_tool) for every selected call, each on the server
the call was made on (one session per server, shared by its queries; at most
--concurrency queries out at once), keep each answer as evidence, and report
per call what it proposes: found (applied), not found, query failed, or no
query configured. The calls' states do not change, unless --apply-found:
then each call found is marked applied, with the query's evidence, as
'query' then 'mark ID applied' would record it. Nothing is ever retried.
A call made on a URL whose key the journal masked (?api_key=***) is queried
only when --url (or --url-env) gives that URL again, with its --header.
Exit 0 when no selected call is left unknown, 3 otherwise.`,
		Example: `  mcp-confirm reconcile --policy policy.toml
  mcp-confirm reconcile --policy policy.toml --since 2h --tool create_order --apply-found
  mcp-confirm reconcile --policy policy.toml --json | jq '.calls[] | select(.proposal == "not found")'`,
	}, "decide", []string{"db", "json", "policy", "url", "url-env", "header", "header-env"}, func(pos []string) int { return runReconcile(c.ctx, c.env, &c.g, f, pos) })
	fl := cmd.Flags()
	fl.StringVar(&f.state, "state", string(pending.StateUnknown), "only calls in this state ("+stateNames()+")")
	fl.StringVar(&f.server, "server", "", "only calls made on this server (the name it declared, or its name in the host config)")
	fl.StringVar(&f.tool, "tool", "", "only calls of this tool")
	fl.StringVar(&f.since, "since", "", "only calls created at or after this time (RFC 3339, a date 2006-01-02, or a duration ago like 24h)")
	fl.IntVar(&f.concurrency, "concurrency", defaultConcurrency, "queries out at once, over all servers")
	fl.BoolVar(&f.applyFound, "apply-found", false, "mark each call the query found applied, with the evidence")
	cmd.RegisterFlagCompletionFunc("state", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return strings.Split(stateNames(), ", "), cobra.ShellCompDirectiveNoFileComp
	})
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	return cmd
}

// reconcileLine is one call of reconcile's report (--json: "calls").
type reconcileLine struct {
	ID       int64         `json:"id"`
	Server   string        `json:"server"`
	Tool     string        `json:"tool"`
	Key      string        `json:"key"`
	State    pending.State `json:"state"` // after reconcile
	Proposal guard.Finding `json:"proposal"`
	Evidence string        `json:"evidence"`
	Applied  bool          `json:"applied"`
	Error    string        `json:"error,omitempty"`
}

// reconcileSummary counts the report (--json: "summary").
type reconcileSummary struct {
	Calls     int                   `json:"calls"`
	Proposals map[guard.Finding]int `json:"proposals"`
	Applied   int                   `json:"applied"`
	Unknown   int                   `json:"left_unknown"`
	Servers   int                   `json:"servers"`
	Seconds   float64               `json:"seconds"`
}

func runReconcile(ctx context.Context, e *env, g *globalOpts, f reconcileFlags, pos []string) int {
	const usage = "Run 'mcp-confirm reconcile --help' for its flags; nothing was queried."
	bad := func(format string, args ...any) int {
		fmt.Fprintf(e.stderr, "mcp-confirm reconcile: "+format+"\n%s\n", append(args, usage)...)
		return exitBadInput
	}
	switch {
	case len(pos) > 0:
		return bad("unexpected argument %q", pos[0])
	case len(e.serverCmd) > 0:
		return bad("no server after --: each call is queried on the server it was made on")
	case f.concurrency < 1 || f.concurrency > 256:
		return bad("--concurrency must be from 1 to 256 (got %d)", f.concurrency)
	case !pending.State(f.state).Valid():
		return bad("no state %q; use one of: %s", f.state, stateNames())
	}
	since, err := parseSince(f.since, time.Now())
	if err != nil {
		return bad("--since %q: %v; give an RFC 3339 time, a date (2026-12-01) or a duration ago (24h)", f.since, err)
	}
	var policy *guard.Policy
	if g.policy != "" {
		if policy, err = guard.LoadPolicy(g.policy); err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm reconcile: %v\nFix the policy file (see README, \"Policy\") and run again; nothing was queried.\n", err)
			return exitBadInput
		}
	}
	j, code := openJournal(ctx, e, g)
	if j == nil {
		return code
	}
	defer j.Close()
	calls, err := j.List(ctx, pending.Filter{States: []pending.State{pending.State(f.state)}, Tool: f.tool, OldestFirst: true})
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm reconcile: list calls: %v\nCheck the journal file (--db); nothing was queried.\n", err)
		return exitUnavailable
	}
	selected := calls[:0]
	for _, c := range calls {
		if !c.CreatedAt.Before(since) && (f.server == "" || onServer(c, f.server)) {
			selected = append(selected, c)
		}
	}
	start := time.Now()
	r := &reconciler{policy: policy, servers: newServerSessions(e, j, policy, 0, nil)}
	defer r.servers.close()
	if g.url != "" {
		// The URL of calls whose key the journal masked: theirs when it
		// matches their recorded sum (serverKey), no other call's.
		if err := checkURL(g.url); err != nil {
			return bad("%v", err)
		}
		choice := serverChoice{spec: mcpclient.ServerSpec{URL: g.url}, identity: guard.RemoteIdentity(g.url), given: true}
		if err := addHeaders(&choice.spec, g.headers, g.headerEnv); err != nil {
			return bad("%v", err)
		}
		withLogins(e, &choice)
		r.servers.given = map[string]serverChoice{serverKey(choice.identity): choice}
	} else if len(g.headers) > 0 || len(g.headerEnv) > 0 {
		return bad("--header goes with --url, the server whose calls need it")
	}
	var progress func(done, total int, counts map[guard.Finding]int)
	if writesToTerminal(e.stderr) {
		progress = func(done, total int, counts map[guard.Finding]int) {
			fmt.Fprintf(e.stderr, "\rreconcile: %d/%d queried; found %d, not found %d, query failed %d, no query %d ",
				done, total, counts[guard.FindingFound], counts[guard.FindingNotFound],
				counts[guard.FindingQueryFailed], counts[guard.FindingNoQuery])
			if done == total {
				fmt.Fprintln(e.stderr)
			}
		}
	}
	lines := r.run(ctx, selected, f.concurrency, guard.ReconcileOptions{ApplyFound: f.applyFound}, progress)
	sum := reconcileSummary{Calls: len(lines), Proposals: map[guard.Finding]int{}, Servers: r.servers.count(),
		Seconds: time.Since(start).Seconds()}
	for _, f := range guard.Findings {
		sum.Proposals[f] = 0
	}
	for _, l := range lines {
		sum.Proposals[l.Proposal]++
		if l.Applied {
			sum.Applied++
		}
		if l.State == pending.StateUnknown {
			sum.Unknown++
		}
	}
	if g.json {
		if lines == nil {
			lines = []reconcileLine{}
		}
		if code := writeJSON(e, struct {
			Calls   []reconcileLine  `json:"calls"`
			Summary reconcileSummary `json:"summary"`
		}{lines, sum}); code != exitOK {
			return code
		}
	} else {
		printReconcile(e.stdout, lines, sum)
	}
	if sum.Unknown > 0 {
		if !g.json {
			fmt.Fprintf(e.stderr, "mcp-confirm reconcile: %d call(s) still unknown; decide each with '%s show ID', then retry, mark or abandon.\n",
				sum.Unknown, g.self())
		}
		return exitUnknown
	}
	return exitOK
}

func printReconcile(w io.Writer, lines []reconcileLine, sum reconcileSummary) {
	if len(lines) == 0 {
		fmt.Fprintln(w, "No calls to reconcile.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTOOL\tSTATE\tPROPOSAL\tEVIDENCE")
	for _, l := range lines {
		ev := l.Evidence
		if l.Applied {
			ev = "marked applied; " + ev
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", l.ID, termtext.Name(l.Tool), l.State, l.Proposal, termtext.Line(ev))
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d call(s) on %d server(s) in %.1fs: found %d, not found %d, query failed %d, no query configured %d; marked applied %d, left unknown %d\n",
		sum.Calls, sum.Servers, sum.Seconds, sum.Proposals[guard.FindingFound], sum.Proposals[guard.FindingNotFound],
		sum.Proposals[guard.FindingQueryFailed], sum.Proposals[guard.FindingNoQuery], sum.Applied, sum.Unknown)
}

// onServer: the call was made on the server called name (declared, or its
// name in a host config).
func onServer(c pending.Call, name string) bool {
	if c.Server == name || c.ServerAlias == name {
		return true
	}
	id, ok := guard.ParseServerIdentity(c.ServerIdentity)
	return ok && id.Server == name
}

func writesToTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(f.Fd())
}

// reconciler queries calls on their own servers: one session per distinct
// server, started on first use and shared by that server's queries.
type reconciler struct {
	policy  *guard.Policy
	servers *serverSessions
}

// sessionFor is the session of c's own server, or why there is none.
func (r *reconciler) sessionFor(ctx context.Context, c pending.Call) (*serverSession, error) {
	s, err := r.servers.forCall(c)
	if err != nil {
		return nil, err
	}
	s.ready.Do(func() {
		// One tools/list before the queries fan out, and one start error
		// for all of them: a server that cannot start is not started again
		// for each of its calls.
		if _, err := s.en.guard.ListTools(ctx); err != nil {
			s.readyErr = err
		}
	})
	return s, s.readyErr
}

// keepers is how many answers reconcile may have waiting for the journal
// at once, per query out: the journal commits them in batches while the
// next queries run.
const keepers = 4

// run reconciles calls with at most n queries out at once; the lines are
// in the order of calls. A query's slot is free as soon as its answer is
// in: keeping the answer (a journal commit) is done by other goroutines,
// several answers to one commit.
func (r *reconciler) run(ctx context.Context, calls []pending.Call, n int, o guard.ReconcileOptions,
	progress func(done, total int, counts map[guard.Finding]int)) []reconcileLine {
	lines := make([]reconcileLine, len(calls))
	type asked struct {
		i   int
		ans *guard.Answer
		res guard.Reconciled // when there is no answer to keep
	}
	next := make(chan int)
	answers := make(chan asked, n)
	var mu sync.Mutex // guards done, counts and progress
	done, counts := 0, map[guard.Finding]int{}
	var queries, keeps sync.WaitGroup
	for range min(n, len(calls)) {
		queries.Add(1)
		go func() {
			defer queries.Done()
			for i := range next {
				a := asked{i: i}
				if !hasQuery(r.policy, calls[i].Tool) {
					a.res = noQuery(calls[i]) // said without starting its server
					answers <- a
					continue
				}
				switch s, err := r.sessionFor(ctx, calls[i]); {
				case ctx.Err() != nil:
					a.res = guard.Reconciled{Call: calls[i], Finding: guard.FindingQueryFailed, Err: context.Cause(ctx)}
				case err != nil:
					a.res = guard.Reconciled{Call: calls[i], Finding: guard.FindingQueryFailed, Err: err}
				default:
					a.ans = s.en.guard.ReconcileQuery(ctx, calls[i])
				}
				answers <- a
			}
		}()
	}
	for range min(n*keepers, len(calls)) {
		keeps.Add(1)
		go func() {
			defer keeps.Done()
			for a := range answers {
				res := a.res
				if a.ans != nil {
					res = a.ans.Keep(ctx, o)
				}
				lines[a.i] = r.line(calls[a.i], res)
				mu.Lock()
				done++
				counts[lines[a.i].Proposal]++
				if progress != nil {
					progress(done, len(calls), counts)
				}
				mu.Unlock()
			}
		}()
	}
	for i := range calls {
		next <- i
	}
	close(next)
	queries.Wait()
	close(answers)
	keeps.Wait()
	return lines
}

// line is one call's line of the report.
func (r *reconciler) line(c pending.Call, res guard.Reconciled) reconcileLine {
	line := reconcileLine{ID: c.ID, Server: c.Server, Tool: c.Tool, Key: c.Key, State: c.State}
	line.Proposal, line.Applied = res.Finding, res.Applied
	if res.Call.ID != 0 && res.Call.State != "" {
		line.State = res.Call.State
	}
	line.Evidence = res.Evidence
	if res.Finding == guard.FindingNoQuery && r.policy == nil {
		line.Evidence = "no policy given: --policy FILE names the query_tool of " + termtext.Name(c.Tool)
	}
	if res.Err != nil {
		line.Error = oneLine(termtext.Strip(trimClass(res.Err.Error())))
		if line.Evidence == "" {
			line.Evidence = line.Error
		}
	}
	if res.AlreadyDecided {
		line.Evidence = "decided elsewhere meanwhile (" + string(line.State) + "); " + line.Evidence
	}
	return line
}
