package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/termtext"
)

func (c *cli) statsCommand() *cobra.Command {
	var check bool
	cmd := c.leaf(&cobra.Command{
		Use:     "stats [--check]",
		Short:   "calls by tool and state, unknowns, retries, dedupe hits",
		Example: "  mcp-confirm stats\n  mcp-confirm stats --check   # exit 5 if the journal file is damaged",
	}, "read", journalJSON, func(pos []string) int { return runStats(c.ctx, c.env, &c.g, check, pos) })
	cmd.Flags().BoolVar(&check, "check", false, "check the journal file for damage (SQLite quick_check): exit 0 if sound, 5 if damaged")
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	return cmd
}

func runStats(ctx context.Context, e *env, g *globalOpts, check bool, pos []string) int {
	if len(pos) > 0 {
		fmt.Fprintf(e.stderr, "mcp-confirm stats: unexpected argument %q\nRun 'mcp-confirm stats' or 'mcp-confirm stats --json'.\n", pos[0])
		return exitBadInput
	}
	j, code := openJournalReadOnly(ctx, e, g)
	if j == nil {
		return code
	}
	defer j.Close()
	if check {
		return checkJournal(ctx, e, j, g.json)
	}
	st, err := j.Stats(ctx)
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm stats: %v\n", err)
		return exitUnavailable
	}
	if g.json {
		return writeJSON(e, st)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "TOOL\t")
	for _, s := range pending.States {
		fmt.Fprintf(tw, "%s\t", s)
	}
	fmt.Fprintln(tw, "")
	tools := make([]string, 0, len(st.ByTool))
	for t := range st.ByTool {
		tools = append(tools, t)
	}
	sort.Strings(tools)
	for _, t := range tools {
		fmt.Fprintf(tw, "%s\t", termtext.Name(t))
		for _, s := range pending.States {
			fmt.Fprintf(tw, "%d\t", st.ByTool[t][s])
		}
		fmt.Fprintln(tw, "")
	}
	fmt.Fprint(tw, "all\t")
	for _, s := range pending.States {
		fmt.Fprintf(tw, "%d\t", st.ByState[s])
	}
	fmt.Fprintln(tw, "")
	if err := tw.Flush(); err != nil {
		return exitUnavailable
	}
	fmt.Fprintf(e.stdout, "\ncalls %d, attempts %d, timeouts %d, unknown outcomes %d, retries %d\n",
		st.Calls, st.Attempts, st.Timeouts, st.Unknowns, st.Retries)
	fmt.Fprintf(e.stdout, "dedupe hits %d, sessions started %d, recovered after crash %d, late results %d, answers to our cancels %d, conflicts %d\n",
		st.DedupeHits, st.SessionsStarted, st.Recoveries, st.LateResults, st.CancelAnswers, st.Conflicts)
	if r := st.TimeToResolve; r.Count > 0 {
		fmt.Fprintf(e.stdout, "time to resolve an unknown: median %.0fs, p90 %.0fs, max %.0fs (%d calls)\n", r.Median, r.P90, r.Max, r.Count)
	}
	return exitOK
}

// checkJournal is 'stats --check': SQLite's quick_check over the journal.
func checkJournal(ctx context.Context, e *env, j *pending.Journal, asJSON bool) int {
	problems, err := j.QuickCheck(ctx)
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm stats: check the journal: %v\n", err)
		return exitUnavailable
	}
	if asJSON {
		if code := writeJSON(e, struct {
			OK       bool     `json:"ok"`
			Problems []string `json:"problems"`
		}{len(problems) == 0, append([]string{}, problems...)}); code != exitOK {
			return code
		}
	} else if len(problems) == 0 {
		fmt.Fprintln(e.stdout, "journal ok")
	} else {
		fmt.Fprintf(e.stdout, "journal damaged: %s\n", j.Path())
		for _, p := range problems {
			for _, line := range strings.Split(p, "\n") {
				fmt.Fprintf(e.stdout, "  %s\n", termtext.Line(line))
			}
		}
		fmt.Fprintln(e.stdout, "Stop every mcp-confirm using it and restore it from a backup.")
	}
	if len(problems) > 0 {
		return exitUnavailable
	}
	return exitOK
}
