package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/termtext"
)

// statsCheck is what 'stats --check' checks beyond the file itself.
type statsCheck struct {
	on        bool
	maxUnk    int           // -1: not checked
	maxAge    time.Duration // 0: not checked
	maxUnkSet bool
	maxAgeSet bool
}

func (c *cli) statsCommand() *cobra.Command {
	var chk statsCheck
	cmd := c.leaf(&cobra.Command{
		Use:   "stats [--check [--max-unknown N] [--max-unknown-age DUR]]",
		Short: "calls by tool and state, unknowns, retries, dedupe hits",
		Long: `Calls by tool and state, timeouts, unknowns, retries, dedupe hits and the time
unknown calls took to resolve.

--check is for cron, CI and monitoring: it checks the journal file for damage
(exit 5 if damaged) and, with --max-unknown or --max-unknown-age, how many calls
are unknown and for how long: one line per breach, and exit 1.`,
		Example: `  mcp-confirm stats
  mcp-confirm stats --check   # exit 5 if the journal file is damaged
  mcp-confirm stats --check --max-unknown 0 --max-unknown-age 15m   # exit 1 on any unknown, or one older than 15m`,
	}, "read", journalJSON, func(pos []string) int { return runStats(c.ctx, c.env, &c.g, chk, pos) })
	fl := cmd.Flags()
	fl.BoolVar(&chk.on, "check", false, "check the journal: exit 0 if sound and within the limits, 1 on a breach, 5 if damaged")
	fl.IntVar(&chk.maxUnk, "max-unknown", 0, "with --check: a breach when more calls than this are unknown")
	fl.DurationVar(&chk.maxAge, "max-unknown-age", 0, "with --check: a breach when a call has been unknown longer than this (e.g. 1h)")
	cmd.PreRun = func(cmd *cobra.Command, _ []string) {
		chk.maxUnkSet, chk.maxAgeSet = cmd.Flags().Changed("max-unknown"), cmd.Flags().Changed("max-unknown-age")
	}
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	return cmd
}

func runStats(ctx context.Context, e *env, g *globalOpts, chk statsCheck, pos []string) int {
	if len(pos) > 0 {
		fmt.Fprintf(e.stderr, "mcp-confirm stats: unexpected argument %q\nRun 'mcp-confirm stats' or 'mcp-confirm stats --json'.\n", pos[0])
		return exitBadInput
	}
	switch {
	case (chk.maxUnkSet || chk.maxAgeSet) && !chk.on:
		fmt.Fprintln(e.stderr, "mcp-confirm stats: --max-unknown and --max-unknown-age are limits of --check\nAdd --check, e.g. mcp-confirm stats --check --max-unknown 0.")
		return exitBadInput
	case chk.maxUnkSet && chk.maxUnk < 0:
		fmt.Fprintf(e.stderr, "mcp-confirm stats: --max-unknown must be 0 or more (got %d)\nGive how many unknown calls are still fine, e.g. --max-unknown 0.\n", chk.maxUnk)
		return exitBadInput
	case chk.maxAgeSet && chk.maxAge <= 0:
		fmt.Fprintf(e.stderr, "mcp-confirm stats: --max-unknown-age must be more than 0 (got %s)\nGive a duration like 15m or 24h.\n", chk.maxAge)
		return exitBadInput
	}
	if !chk.maxUnkSet {
		chk.maxUnk = -1
	}
	j, code := openJournalReadOnly(ctx, e, g)
	if j == nil {
		return code
	}
	defer j.Close()
	if chk.on {
		return checkJournal(ctx, e, j, g.json, chk)
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
	if st.Resumed > 0 {
		fmt.Fprintf(e.stdout, "answers recovered by resuming a broken stream (not resent) %d\n", st.Resumed)
	}
	if r := st.TimeToResolve; r.Count > 0 {
		fmt.Fprintf(e.stdout, "time to resolve an unknown: median %.0fs, p90 %.0fs, max %.0fs (%d calls)\n", r.Median, r.P90, r.Max, r.Count)
	}
	return exitOK
}

// checkJournal is 'stats --check': SQLite's quick_check over the journal,
// then the limits on unknown calls.
func checkJournal(ctx context.Context, e *env, j *pending.Journal, asJSON bool, chk statsCheck) int {
	problems, err := j.QuickCheck(ctx)
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm stats: check the journal: %v\n", err)
		return exitUnavailable
	}
	var breaches []string
	if len(problems) == 0 {
		if breaches, err = unknownBreaches(ctx, j, chk, time.Now()); err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm stats: check the unknown calls: %v\n", err)
			return exitUnavailable
		}
	}
	if asJSON {
		if code := writeJSON(e, struct {
			OK       bool     `json:"ok"`
			Problems []string `json:"problems"`
			Breaches []string `json:"breaches"`
		}{len(problems) == 0 && len(breaches) == 0, append([]string{}, problems...), append([]string{}, breaches...)}); code != exitOK {
			return code
		}
	} else if len(problems) == 0 {
		for _, b := range breaches {
			fmt.Fprintf(e.stdout, "breach: %s\n", b)
		}
		if len(breaches) == 0 {
			fmt.Fprintln(e.stdout, "journal ok")
		}
	} else {
		fmt.Fprintf(e.stdout, "journal damaged: %s\n", j.Path())
		for _, p := range problems {
			for _, line := range strings.Split(p, "\n") {
				fmt.Fprintf(e.stdout, "  %s\n", termtext.Line(line))
			}
		}
		fmt.Fprintln(e.stdout, "Stop every mcp-confirm using it and restore it from a backup.")
	}
	switch {
	case len(problems) > 0:
		return exitUnavailable
	case len(breaches) > 0:
		return exitFailed
	}
	return exitOK
}

// unknownBreaches are the limits of chk that the journal's unknown calls
// break, one line each.
func unknownBreaches(ctx context.Context, j *pending.Journal, chk statsCheck, now time.Time) ([]string, error) {
	var out []string
	if chk.maxUnk >= 0 {
		counts, err := j.Counts(ctx)
		if err != nil {
			return nil, err
		}
		if n := counts[pending.StateUnknown]; n > chk.maxUnk {
			out = append(out, fmt.Sprintf("%d unknown call(s), more than --max-unknown %d", n, chk.maxUnk))
		}
	}
	if chk.maxAge > 0 {
		id, since, ok, err := j.OldestUnknown(ctx)
		if err != nil {
			return nil, err
		}
		if age := now.Sub(since); ok && age > chk.maxAge {
			out = append(out, fmt.Sprintf("call %d has been unknown for %s (since %s), longer than --max-unknown-age %s",
				id, age.Round(time.Second), since.UTC().Format(time.RFC3339), chk.maxAge))
		}
	}
	return out, nil
}
