package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/termtext"
)

func (c *cli) exportCommand() *cobra.Command {
	var format, since string
	cmd := c.leaf(&cobra.Command{
		Use:     "export [--format jsonl|csv] [--since WHEN]",
		Short:   "every call, attempt and decision as jsonl or csv",
		Example: "  mcp-confirm export --since 24h > today.jsonl\n  mcp-confirm export --format csv --since 2026-12-01",
	}, "read", journalOnly, func(pos []string) int { return runExport(c.ctx, c.env, &c.g, format, since, pos) })
	fl := cmd.Flags()
	fl.StringVar(&format, "format", "jsonl", "jsonl (one call per line, with attempts and decisions) or csv (one row per call, attempt and decision)")
	fl.StringVar(&since, "since", "", "only calls created at or after this time (RFC 3339, a date 2006-01-02, or a duration ago like 24h)")
	cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"jsonl", "csv"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	return cmd
}

func runExport(ctx context.Context, e *env, g *globalOpts, format, sinceArg string, pos []string) int {
	if len(pos) > 0 {
		fmt.Fprintf(e.stderr, "mcp-confirm export: unexpected argument %q\nUse --format and --since.\n", pos[0])
		return exitBadInput
	}
	if format != "jsonl" && format != "csv" {
		fmt.Fprintf(e.stderr, "mcp-confirm export: no format %q\nUse --format jsonl or --format csv.\n", format)
		return exitBadInput
	}
	since, err := parseSince(sinceArg, time.Now())
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm export: --since %q: %v\nGive an RFC 3339 time (2026-12-01T09:00:00Z), a date (2026-12-01) or a duration ago (24h).\n", sinceArg, err)
		return exitBadInput
	}
	j, code := openJournalReadOnly(ctx, e, g)
	if j == nil {
		return code
	}
	defer j.Close()
	if format == "jsonl" {
		enc := json.NewEncoder(inertJSON{e.stdout})
		err = j.Export(ctx, since, func(c pending.Call) error { return enc.Encode(shownCall(c)) })
	} else {
		err = exportCSV(ctx, e, j, since)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm export: %v\n", err)
		return exitUnavailable
	}
	return exitOK
}

func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("not a time, date or duration")
}

// csvHeader: one row per call, per attempt and per decision, so a
// spreadsheet can filter by record type and join on call_id. Columns are
// only ever added at the end, so a sheet that reads them by position keeps
// working.
var csvHeader = []string{"record", "call_id", "server", "tool", "kind", "key", "state", "reason", "conflict",
	"created_at", "updated_at", "attempt", "session", "rpc_id", "sent_at", "ended_at", "outcome", "clock",
	"action", "operator", "at", "note", "json", "decision_id", "prev_hash", "hash", "host"}

func exportCSV(ctx context.Context, e *env, j *pending.Journal, since time.Time) error {
	w := csv.NewWriter(e.stdout)
	if err := w.Write(csvHeader); err != nil {
		return err
	}
	err := j.Export(ctx, since, func(c pending.Call) error {
		id := strconv.FormatInt(c.ID, 10)
		base := []string{id, c.Server, c.Tool, string(c.Kind), c.Key, string(c.State), c.Reason,
			strconv.FormatBool(c.Conflict), stamp(c.CreatedAt), stamp(c.UpdatedAt)}
		row := func(record string, tail ...string) error {
			r := append(append([]string{record}, base...), tail...)
			for i := range r {
				r[i] = termtext.Cell(r[i])
			}
			return w.Write(r)
		}
		if err := row("call", "", "", "", "", "", "", "", "", "", "", "", string(c.Args), "", "", "", ""); err != nil {
			return err
		}
		for _, a := range c.Attempts {
			ended := ""
			if a.EndedAt != nil {
				ended = stamp(*a.EndedAt)
			}
			body := a.Result
			if len(a.Error) > 0 {
				body = a.Error
			}
			if err := row("attempt", strconv.Itoa(a.N), strconv.Itoa(a.Session), a.RPCID, stamp(a.SentAt), ended,
				string(a.Outcome), a.Clock, "", "", "", a.Reason, string(body), "", "", "", ""); err != nil {
				return err
			}
		}
		for _, d := range c.Decisions {
			attempt := ""
			if d.Attempt != 0 {
				attempt = strconv.Itoa(d.Attempt)
			}
			if err := row("decision", attempt, "", "", "", "", "", "", string(d.Action), d.Operator, stamp(d.At),
				d.Note, string(d.Evidence), strconv.FormatInt(d.ID, 10), d.PrevHash, d.Hash, d.Host); err != nil {
				return err
			}
		}
		return nil
	})
	w.Flush()
	if err != nil {
		return err
	}
	return w.Error()
}
