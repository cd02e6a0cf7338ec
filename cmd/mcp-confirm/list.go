package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/termtext"
	"github.com/mcp-confirm/mcp-confirm/timetext"
)

type listFlags struct {
	state, tool string
	limit       int
	limitGiven  bool
}

func (c *cli) listCommand() *cobra.Command {
	var f listFlags
	cmd := c.leaf(&cobra.Command{
		Use:     "list [--state STATE] [--tool TOOL] [--limit N]",
		Short:   "list calls, newest first",
		Example: "  mcp-confirm list --state unknown\n  mcp-confirm list --tool create_order --limit 20 --json",
	}, "read", journalJSON, func(pos []string) int { return runList(c.ctx, c.env, &c.g, f, pos) })
	fl := cmd.Flags()
	fl.StringVar(&f.state, "state", "", "only calls in this state ("+stateNames()+")")
	fl.StringVar(&f.tool, "tool", "", "only calls of this tool")
	fl.IntVar(&f.limit, "limit", 0, "at most this many calls (leave it out for all)")
	cmd.PreRun = func(cmd *cobra.Command, _ []string) { f.limitGiven = cmd.Flags().Changed("limit") }
	cmd.RegisterFlagCompletionFunc("state", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return strings.Split(stateNames(), ", "), cobra.ShellCompDirectiveNoFileComp
	})
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	return cmd
}

func runList(ctx context.Context, e *env, g *globalOpts, fl listFlags, pos []string) int {
	if len(pos) > 0 {
		fmt.Fprintf(e.stderr, "mcp-confirm list: unexpected argument %q\nUse --state and --tool to filter.\n", pos[0])
		return exitBadInput
	}
	if fl.limitGiven && fl.limit < 1 {
		fmt.Fprintf(e.stderr, "mcp-confirm list: --limit must be at least 1 (got %d)\nLeave --limit out to list every call.\n", fl.limit)
		return exitBadInput
	}
	f := pending.Filter{Tool: fl.tool, Limit: fl.limit}
	if fl.state != "" {
		s := pending.State(fl.state)
		if !s.Valid() {
			fmt.Fprintf(e.stderr, "mcp-confirm list: no state %q\nUse one of: %s.\n", fl.state, stateNames())
			return exitBadInput
		}
		f.States = []pending.State{s}
	}
	j, code := openJournalReadOnly(ctx, e, g)
	if j == nil {
		return code
	}
	defer j.Close()
	calls, err := j.List(ctx, f)
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm list: %v\n", err)
		return exitUnavailable
	}
	if g.json {
		if calls == nil {
			calls = []pending.Call{}
		}
		for i := range calls {
			calls[i] = shownCall(calls[i])
		}
		return writeJSON(e, calls)
	}
	if len(calls) == 0 {
		fmt.Fprintln(e.stdout, "No calls.")
		return exitOK
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tAGE\tTOOL\tKEY\tATTEMPTS\tREASON")
	now := time.Now()
	for _, c := range calls {
		reason := c.Reason
		if c.Conflict {
			reason = "CONFLICT: " + c.ConflictNote
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t…%s\t%d\t%s\n", c.ID, c.State, timetext.Age(now.Sub(c.CreatedAt)),
			termtext.Name(c.Tool), keyTail(c.Key), c.AttemptCount, termtext.Line(reason))
	}
	return flushOK(tw)
}

func stateNames() string {
	names := make([]string, len(pending.States))
	for i, s := range pending.States {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// shownCall is c as it may be printed: a server URL an older mcp-confirm
// journaled with its key in it is masked (guard.MaskedIdentityJSON).
func shownCall(c pending.Call) pending.Call {
	c.ServerIdentity = guard.MaskedIdentityJSON(c.ServerIdentity)
	return c
}

// keyTail is the end of a key: what an operator reads aloud ("…7Q2M").
func keyTail(k string) string {
	if len(k) > 6 {
		return k[len(k)-6:]
	}
	return k
}

func writeJSON(e *env, v any) int {
	enc := json.NewEncoder(inertJSON{e.stdout})
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm: write output: %v\n", err)
		return exitUnavailable
	}
	return exitOK
}

func flushOK(tw *tabwriter.Writer) int {
	if err := tw.Flush(); err != nil {
		return exitUnavailable
	}
	return exitOK
}
