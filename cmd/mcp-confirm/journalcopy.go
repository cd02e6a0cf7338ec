package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

func (c *cli) journalCommand() *cobra.Command {
	parent := &cobra.Command{
		Use:     "journal",
		Short:   "move a journal: copy its calls into another (a file into the team's PostgreSQL)",
		GroupID: "read",
		Args:    unknownCommand,
		Run:     func(cmd *cobra.Command, _ []string) { cmd.Help() },
	}
	var o journalCopyOpts
	cp := c.leaf(&cobra.Command{
		Use:   "copy --from JOURNAL --to JOURNAL",
		Short: "copy every call, with its attempts and decisions, into another journal, and check each copy",
		Long: `copy moves a single user's journal into another one, most often a SQLite file
into the team's journal on PostgreSQL. Every call is copied whole under a new
id; its decisions are appended to the target's decision log (operator, host,
time, note and evidence kept) in the order they were made; each copy is read
back and compared with its source by a checksum. Stop the processes using the
source first: a call still in flight there refuses the copy.

A fingerprint (which lets the target hold back an identical new call) is
sealed again for the target from the call's stored arguments. A call whose
arguments were redacted cannot be: if it is still open, the copy is refused
unless --unheld says to copy it without its hold. A target that already holds
a call with the same server, tool and key refuses the copy; --skip-existing
leaves such calls out when they are the same (a copy run again, or resumed
after an error), and still refuses when they differ.

Exit 0 copied and checked; 1 a copy does not match its source; 2 refused,
nothing copied; 5 a journal cannot be opened.`,
		Example: `  mcp-confirm journal copy --from ~/.local/state/mcp-confirm/journal.db --to 'host=/run/postgresql dbname=team'
  mcp-confirm journal copy --from journal.db --to postgres://ops@db.internal/team --skip-existing`,
	}, "", []string{"json"}, func(pos []string) int { return runJournalCopy(c.ctx, c.env, &c.g, o, pos) })
	cp.Flags().StringVar(&o.from, "from", "", "the journal to copy from: a SQLite file, or a PostgreSQL connection string")
	cp.Flags().StringVar(&o.to, "to", "", "the journal to copy into (made if it does not exist)")
	cp.Flags().BoolVar(&o.skipExisting, "skip-existing", false, "leave out calls the target already holds, the same")
	cp.Flags().BoolVar(&o.unheld, "unheld", false, "copy open calls whose fingerprint cannot be carried, without their hold")
	parent.AddCommand(cp)
	return parent
}

type journalCopyOpts struct {
	from, to             string
	skipExisting, unheld bool
}

func runJournalCopy(ctx context.Context, e *env, g *globalOpts, o journalCopyOpts, pos []string) int {
	const cmd = "mcp-confirm journal copy"
	switch {
	case len(pos) > 0:
		fmt.Fprintf(e.stderr, "%s: unexpected argument %q\nName the journals with --from and --to.\n", cmd, pos[0])
		return exitBadInput
	case o.from == "" || o.to == "":
		fmt.Fprintf(e.stderr, "%s: both --from and --to are needed\nExample: %s --from journal.db --to 'host=/run/postgresql dbname=team'\n", cmd, cmd)
		return exitBadInput
	case o.from == o.to:
		fmt.Fprintf(e.stderr, "%s: --from and --to name the same journal\nGive the journal to copy into as --to.\n", cmd)
		return exitBadInput
	}
	if !pending.IsPostgres(o.from) {
		// Open would make an empty journal where there is none.
		if _, err := os.Stat(o.from); err != nil {
			fmt.Fprintf(e.stderr, "%s: no journal at %s (%v)\nGive the path of an existing journal file as --from.\n", cmd, o.from, errors.Unwrap(err))
			return exitUnavailable
		}
	}
	open := func(which, path string) (*pending.Journal, bool) {
		j, err := pending.Open(ctx, path, pending.Options{OnTighten: func(t pending.Tightening) { fmt.Fprintf(e.stderr, "mcp-confirm: %s\n", t) }})
		if err != nil {
			fmt.Fprintf(e.stderr, "%s: cannot open the %s journal: %v%s\n%s.\n", cmd, which, err, cliHint(err), capitalize(openHint(err, path)))
			return nil, false
		}
		return j, true
	}
	src, ok := open("source", o.from)
	if !ok {
		return exitUnavailable
	}
	defer src.Close()
	dst, ok := open("target", o.to)
	if !ok {
		return exitUnavailable
	}
	defer dst.Close()

	from, to := pending.HidePassword(src.Path()), pending.HidePassword(dst.Path())
	rep, err := pending.Copy(ctx, src, dst, pending.CopyOptions{
		Fingerprints: guard.StoredFingerprints, SkipExisting: o.skipExisting, Unheld: o.unheld,
	})
	var refused *pending.CopyRefusedError
	switch {
	case errors.As(err, &refused):
		fmt.Fprintf(e.stderr, "%s: %s.\nNothing was copied%s.\n", cmd, refused.Reason, callList(refused.Calls))
		return exitBadInput
	case errors.Is(err, pending.ErrCopyMismatch):
		fmt.Fprintf(e.stderr, "%s: %v.\nThe target keeps what was copied; compare the two with 'mcp-confirm show ID --db JOURNAL' before going on.\n", cmd, err)
		return exitFailed
	case err != nil:
		fmt.Fprintf(e.stderr, "%s: %v\n", cmd, err)
		return exitUnavailable
	}
	if g.json {
		return writeJSON(e, struct {
			From string `json:"from"`
			To   string `json:"to"`
			pending.CopyReport
		}{from, to, rep})
	}
	fmt.Fprintf(e.stdout, "copied %d of %d calls (%d attempts, %d decisions) from %s to %s; each copy checked against its source\n",
		rep.Copied, rep.Calls, rep.Attempts, rep.Decisions, from, to)
	if rep.Skipped > 0 {
		fmt.Fprintf(e.stdout, "left out %d calls the target already held, the same\n", rep.Skipped)
	}
	if rep.Resealed > 0 {
		fmt.Fprintf(e.stdout, "sealed %d fingerprints again under the target's secret\n", rep.Resealed)
	}
	if len(rep.Unheld) > 0 {
		fmt.Fprintf(e.stdout, "copied without their hold (--unheld)%s\n", callList(rep.Unheld))
	}
	if !rep.Chain.Intact() {
		fmt.Fprintf(e.stderr, "%s: the target's decision log does not verify after the copy: %s\nRun 'mcp-confirm verify --db %s'.\n", cmd, rep.Chain.Broken.Reason, to)
		return exitFailed
	}
	fmt.Fprintf(e.stdout, "target's decision log intact: %d decisions, head decision %d sha256 %s\n", rep.Chain.Decisions, rep.Chain.HeadID, rep.Chain.Head)
	return exitOK
}

// callList is ": calls 1, 4, 9" (the first ten), or "" for none.
func callList(ids []int64) string {
	if len(ids) == 0 {
		return ""
	}
	var parts []string
	for i, id := range ids {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("and %d more", len(ids)-10))
			break
		}
		parts = append(parts, fmt.Sprint(id))
	}
	word := "calls"
	if len(ids) == 1 {
		word = "call"
	}
	return fmt.Sprintf(" (source %s %s)", word, strings.Join(parts, ", "))
}
