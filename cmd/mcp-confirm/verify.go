package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

func (c *cli) verifyCommand() *cobra.Command {
	var from string
	cmd := c.leaf(&cobra.Command{
		Use:   "verify [--db JOURNAL | --from EXPORT]",
		Short: "check the decision log's hash chain: exit 0 intact, 1 broken (names the first broken link)",
		Long: `verify checks that no decision was deleted, changed or reordered since it was
written: each decision carries the hash of the one before it. It reads the
journal (--db), or an export made with 'mcp-confirm export' (--from FILE, or
--from - for stdin) without the journal. The summary line names the head (the
last decision's hash): keep it somewhere else, and a rewrite of everything
before it shows as a different head.`,
		Example: "  mcp-confirm verify\n  mcp-confirm export > log.jsonl && mcp-confirm verify --from log.jsonl",
	}, "read", journalJSON, func(pos []string) int { return runVerify(c.ctx, c.env, &c.g, from, pos) })
	cmd.Flags().StringVar(&from, "from", "", "verify an export (JSONL, made by 'mcp-confirm export' without --since) instead of the journal; - for stdin")
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	return cmd
}

func runVerify(ctx context.Context, e *env, g *globalOpts, from string, pos []string) int {
	if len(pos) > 0 {
		fmt.Fprintf(e.stderr, "mcp-confirm verify: unexpected argument %q\nUse --db JOURNAL or --from EXPORT.\n", pos[0])
		return exitBadInput
	}
	if from != "" && g.db != "" {
		fmt.Fprintf(e.stderr, "mcp-confirm verify: --db and --from both given\nVerify either the journal (--db) or an export (--from), one at a time.\n")
		return exitBadInput
	}
	var rep pending.ChainReport
	what := "decision log"
	if from != "" {
		what = "exported decision log"
		var r io.Reader = e.stdin
		if from != "-" {
			f, err := os.Open(from)
			if err != nil {
				fmt.Fprintf(e.stderr, "mcp-confirm verify: %v\nGive the path of a file 'mcp-confirm export' wrote.\n", err)
				return exitBadInput
			}
			defer f.Close()
			r = f
		}
		var err error
		if rep, err = pending.VerifyExport(r); err != nil {
			var bad *pending.ExportError
			if errors.As(err, &bad) {
				fmt.Fprintf(e.stderr, "mcp-confirm verify: %s: %v\nGive a file 'mcp-confirm export' (jsonl) wrote, unchanged.\n", from, err)
				return exitBadInput
			}
			fmt.Fprintf(e.stderr, "mcp-confirm verify: read %s: %v\n", from, err)
			return exitUnavailable
		}
	} else {
		j, code := openJournalReadOnly(ctx, e, g)
		if j == nil {
			return code
		}
		defer j.Close()
		var err error
		if rep, err = j.VerifyChain(ctx); err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm verify: %v\n", err)
			return exitUnavailable
		}
	}
	code := exitOK
	if !rep.Intact() {
		code = exitFailed
	}
	if g.json {
		if out := writeJSON(e, struct {
			Intact bool `json:"intact"`
			pending.ChainReport
		}{rep.Intact(), rep}); out != exitOK {
			return out
		}
		return code
	}
	if rep.Intact() {
		if rep.Decisions == 0 {
			fmt.Fprintf(e.stdout, "%s intact: no decisions yet\n", what)
		} else {
			fmt.Fprintf(e.stdout, "%s intact: %d decisions, head decision %d sha256 %s\n", what, rep.Decisions, rep.HeadID, rep.Head)
		}
		return code
	}
	b := rep.Broken
	where := "the head record"
	if b.Decision != 0 {
		where = fmt.Sprintf("decision %d", b.Decision)
		if b.Call != 0 {
			where += fmt.Sprintf(" (call %d)", b.Call)
		}
	}
	fmt.Fprintf(e.stdout, "%s broken at %s: %s\n", what, where, b.Reason)
	fmt.Fprintf(e.stderr, "mcp-confirm verify: the log was changed outside mcp-confirm after decision %d, the last one that verifies; "+
		"verify changed nothing: compare with an earlier export or a head you kept.\n", rep.HeadID)
	return code
}
