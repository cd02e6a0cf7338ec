package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/termtext"
)

func (c *cli) reportCommand() *cobra.Command {
	var format, since string
	cmd := c.leaf(&cobra.Command{
		Use:   "report [--since 24h] [--format md|csv|json]",
		Short: "per server and tool: calls, outcomes, unknowns and how they were resolved, executed",
		Long: `The reconciliation a finance or ops team asks for, over the calls created in
a period: per server and tool, the calls and their outcomes, the calls that
were unknown and how each was resolved (marked applied, abandoned, retried,
a late answer, or not yet), retries, replays (stored results a server
replayed instead of executing again), the time from unknown to the
operator's decision (median, p90), and "executed": the calls the journal says
took effect (succeeded or marked applied), to hold against the business
system's own count.`,
		Example: `  mcp-confirm report
  mcp-confirm report --since 2026-12-01 --format csv > december.csv
  mcp-confirm report --since 7d --format json | jq '.total.executed'`,
	}, "read", journalOnly, func(pos []string) int { return runReport(c.ctx, c.env, &c.g, format, since, pos) })
	fl := cmd.Flags()
	fl.StringVar(&format, "format", "md", "md (a Markdown table), csv, or json")
	fl.StringVar(&since, "since", "24h", "calls created at or after this time (RFC 3339, a date 2006-01-02, a duration ago like 24h, or 7d)")
	cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"md", "csv", "json"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	return cmd
}

func runReport(ctx context.Context, e *env, g *globalOpts, format, sinceArg string, pos []string) int {
	if len(pos) > 0 {
		fmt.Fprintf(e.stderr, "mcp-confirm report: unexpected argument %q\nUse --since and --format.\n", pos[0])
		return exitBadInput
	}
	if format != "md" && format != "csv" && format != "json" {
		fmt.Fprintf(e.stderr, "mcp-confirm report: no format %q\nUse --format md, csv or json.\n", format)
		return exitBadInput
	}
	now := time.Now()
	since, err := parseSince(days(sinceArg), now)
	if err != nil || sinceArg == "" {
		fmt.Fprintf(e.stderr, "mcp-confirm report: --since %q is not a time\nGive an RFC 3339 time (2026-12-01T09:00:00Z), a date (2026-12-01) or a duration ago (24h, 7d).\n", sinceArg)
		return exitBadInput
	}
	j, code := openJournalReadOnly(ctx, e, g)
	if j == nil {
		return code
	}
	defer j.Close()
	rep, err := j.Report(ctx, since)
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm report: %v\nCheck the journal file (--db).\n", err)
		return exitUnavailable
	}
	if rep.Rows == nil {
		rep.Rows = []pending.ReportRow{}
	}
	for i := range rep.Rows {
		rep.Rows[i].ServerIdentity = guard.MaskedIdentityJSON(rep.Rows[i].ServerIdentity)
	}
	switch format {
	case "json":
		return writeJSON(e, rep)
	case "csv":
		err = reportCSV(e.stdout, rep)
	default:
		err = reportMarkdown(e.stdout, rep)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm report: write output: %v\n", err)
		return exitUnavailable
	}
	return exitOK
}

// days turns "7d" into "168h": reports are asked for by the day.
func days(s string) string {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if d, err := strconv.Atoi(n); err == nil && d > 0 {
			return strconv.Itoa(d*24) + "h"
		}
	}
	return s
}

// reachedBy is how a row's server was reached, as show prints it.
func reachedBy(r pending.ReportRow) string {
	if id, ok := guard.ParseServerIdentity(r.ServerIdentity); ok {
		return id.String()
	}
	return ""
}

func serverLabel(r pending.ReportRow) string {
	s := termtext.Name(r.Server)
	if r.ServerAlias != "" && r.ServerAlias != r.Server {
		s += " (" + termtext.Name(r.ServerAlias) + ")"
	}
	return s
}

func decideText(d pending.Durations, q float64) string {
	if d.Count == 0 {
		return "-"
	}
	d2 := time.Duration(q * float64(time.Second))
	if d2 < 10*time.Second {
		return d2.Round(100 * time.Millisecond).String()
	}
	return d2.Round(time.Second).String()
}

// resolvedText is how a row's unknown calls were resolved, the ways that
// happened only: "3: marked_applied 1, retried 1, unresolved 1".
func resolvedText(r pending.ReportRow) string {
	if r.Unknowns == 0 {
		return "0"
	}
	var parts []string
	for _, k := range pending.ResolvedKinds {
		if n := r.Resolved[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", strings.ReplaceAll(k, "_", " "), n))
		}
	}
	return fmt.Sprintf("%d: %s", r.Unknowns, strings.Join(parts, ", "))
}

func reportMarkdown(w io.Writer, rep pending.Report) error {
	cell := func(s string) string { return strings.ReplaceAll(termtext.Line(s), "|", `\|`) }
	var b strings.Builder
	fmt.Fprintf(&b, "# mcp-confirm report\n\nCalls created from %s to %s.\n\n",
		rep.Since.Format(time.RFC3339), rep.Until.Format(time.RFC3339))
	head := []string{"server", "reached by", "tool", "calls"}
	for _, s := range pending.States {
		head = append(head, string(s))
	}
	head = append(head, "were unknown (resolved)", "retries", "replays", "decide median", "decide p90", "executed")
	fmt.Fprintf(&b, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat(" --- |", len(head)))
	row := func(r pending.ReportRow, server, via, tool string) {
		cells := []string{server, via, tool, strconv.Itoa(r.Calls)}
		for _, s := range pending.States {
			cells = append(cells, strconv.Itoa(r.Outcomes[s]))
		}
		cells = append(cells, resolvedText(r), strconv.Itoa(r.Retries), strconv.Itoa(r.Replays),
			decideText(r.TimeToDecide, r.TimeToDecide.Median), decideText(r.TimeToDecide, r.TimeToDecide.P90), strconv.Itoa(r.Executed))
		fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
	}
	for _, r := range rep.Rows {
		row(r, cell(serverLabel(r)), cell(reachedBy(r)), cell(termtext.Name(r.Tool)))
	}
	row(rep.Total, "**all**", "", "")
	fmt.Fprintf(&b, "\n*executed*: succeeded or marked applied, %d in all: the count to hold against the business system's.\n", rep.Total.Executed)
	_, err := io.WriteString(w, b.String())
	return err
}

func reportCSV(w io.Writer, rep pending.Report) error {
	cw := csv.NewWriter(w)
	head := []string{"server", "server_alias", "reached_by", "tool", "calls"}
	for _, s := range pending.States {
		head = append(head, string(s))
	}
	head = append(head, "were_unknown")
	for _, k := range pending.ResolvedKinds {
		head = append(head, "resolved_"+k)
	}
	head = append(head, "retries", "replays", "decided", "decide_median_seconds", "decide_p90_seconds", "executed")
	cw.Write(head)
	row := func(r pending.ReportRow, server, alias, via, tool string) {
		rec := []string{server, alias, via, tool, strconv.Itoa(r.Calls)}
		for _, s := range pending.States {
			rec = append(rec, strconv.Itoa(r.Outcomes[s]))
		}
		rec = append(rec, strconv.Itoa(r.Unknowns))
		for _, k := range pending.ResolvedKinds {
			rec = append(rec, strconv.Itoa(r.Resolved[k]))
		}
		d := r.TimeToDecide
		rec = append(rec, strconv.Itoa(r.Retries), strconv.Itoa(r.Replays), strconv.Itoa(d.Count),
			strconv.FormatFloat(d.Median, 'f', 3, 64), strconv.FormatFloat(d.P90, 'f', 3, 64), strconv.Itoa(r.Executed))
		cw.Write(rec)
	}
	for _, r := range rep.Rows {
		row(r, r.Server, r.ServerAlias, reachedBy(r), r.Tool)
	}
	row(rep.Total, "all", "", "", "")
	cw.Flush()
	return cw.Error()
}
