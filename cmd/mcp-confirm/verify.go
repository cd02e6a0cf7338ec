package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/termtext"
)

func (c *cli) verifyCommand() *cobra.Command {
	var from string
	cmd := c.leaf(&cobra.Command{
		Use:   "verify [--db JOURNAL | --from EXPORT]",
		Short: "check the journal's hash chains: exit 0 intact, 1 broken (names each call and the first decision that do not verify)",
		Long: `verify checks that no decision was deleted, changed or reordered since it was
written (each decision carries the hash of the one before it), and that no
call was: each call has a chain of its own covering its intent (server, tool,
key, arguments, fingerprint), each attempt's outcome and each decision that
moved it, and verify replays them through the state machine to the state the
call is in. A call that does not agree is named by id and key. Calls recorded
before calls were chained (schema 8) are covered by the decision log only
until then; verify says which. It reads the journal (--db), or an export made
with 'mcp-confirm export' (--from FILE, or --from - for stdin) without the
journal: an export carries the decision log only. The last line names the
head (the last decision's hash): keep it somewhere else, and a rewrite of the
decisions before it shows as a different head.`,
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
	// The calls first, then the decision log: its head, the anchor to
	// keep, stays the last word of the output.
	callsOK := printCallLog(e, rep.Calls)
	if rep.Broken == nil {
		if rep.Decisions == 0 {
			fmt.Fprintf(e.stdout, "%s intact: no decisions yet\n", what)
		} else {
			fmt.Fprintf(e.stdout, "%s intact: %d decisions, head decision %d sha256 %s\n", what, rep.Decisions, rep.HeadID, rep.Head)
		}
		if !callsOK {
			fmt.Fprintf(e.stderr, "mcp-confirm verify: %d calls do not agree with their chains: they were changed outside mcp-confirm; "+
				"verify changed nothing: compare with an earlier export or a backup.\n", len(rep.Calls.Problems))
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
	fmt.Fprintf(e.stdout, "%s broken at %s: %s\n", what, where, termtext.Line(b.Reason))
	fmt.Fprintf(e.stderr, "mcp-confirm verify: the log was changed outside mcp-confirm after decision %d, the last one that verifies; "+
		"verify changed nothing: compare with an earlier export or a head you kept.\n", rep.HeadID)
	return code
}

// printCallLog prints what verify found of the calls' own chains (none
// for an export, which carries decisions only): one line when every call
// agrees, else one line per call that does not, named by id and key. It
// reports whether every call agreed.
func printCallLog(e *env, r *pending.CallLogReport) bool {
	if r == nil {
		return true
	}
	for _, p := range r.Problems {
		switch {
		case p.Call == 0:
			fmt.Fprintf(e.stdout, "calls broken: %s\n", termtext.Line(p.Reason))
		case p.Key == "":
			fmt.Fprintf(e.stdout, "call %d broken: %s\n", p.Call, termtext.Line(p.Reason))
		default:
			fmt.Fprintf(e.stdout, "call %d (key %s) broken: %s\n", p.Call, termtext.Line(p.Key), termtext.Line(p.Reason))
		}
	}
	if len(r.Problems) > 0 {
		return false
	}
	line := fmt.Sprintf("calls intact: %d calls, %d links", r.Calls, r.Links)
	if n := r.Legacy(); n > 0 {
		line += fmt.Sprintf("; calls 1 to %d were recorded before calls were chained (schema 8): "+
			"until then their history is covered by the decision log only", n)
	}
	fmt.Fprintln(e.stdout, line)
	return true
}
