package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/termtext"
)

// watchInterval is how often watch looks at PRAGMA data_version: one
// PRAGMA, no table read, unless something was committed.
const watchInterval = 100 * time.Millisecond

func (c *cli) watchCommand() *cobra.Command {
	cmd := c.leaf(&cobra.Command{
		Use:   "watch [--json]",
		Short: "print every state change and decision as it happens, from any process on the journal",
		Long: `Print a line for every call that appears or changes state, and for every
decision, as the journal records them, whichever process made them (a CLI
call, a proxy, a console). With --json, one JSON object per line, for
alerting pipelines and jq. A call that changes twice within 0.1s is printed
once, from the state seen before to the state now. Ends on ctrl-C (exit 0).`,
		Example: `  mcp-confirm watch
  mcp-confirm watch --json | jq -c 'select(.state == "unknown")'`,
	}, "read", journalJSON, func(pos []string) int { return runWatch(c.ctx, c.env, &c.g, pos) })
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	return cmd
}

func runWatch(ctx context.Context, e *env, g *globalOpts, pos []string) int {
	if len(pos) > 0 {
		fmt.Fprintf(e.stderr, "mcp-confirm watch: unexpected argument %q\nRun 'mcp-confirm watch' or 'mcp-confirm watch --json'.\n", pos[0])
		return exitBadInput
	}
	j, code := openJournalReadOnly(ctx, e, g)
	if j == nil {
		return code
	}
	defer j.Close()
	// The signal first, then the feed's starting point: a commit between
	// the two is either in the start or signalled.
	changed := guard.Watch(ctx, j, watchInterval, 0, nil)
	feed, err := j.Changes(ctx)
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm watch: read the journal: %v\nCheck the journal file (--db).\n", err)
		return exitUnavailable
	}
	fmt.Fprintf(e.stderr, "mcp-confirm watch: watching %s; ctrl-C ends\n", j.Path())
	enc := json.NewEncoder(inertJSON{e.stdout})
	for range changed {
		changes, err := feed.Next(ctx)
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm watch: read the journal: %v\nCheck the journal file (--db); run watch again.\n", err)
			return exitUnavailable
		}
		for _, c := range changes {
			if g.json {
				err = enc.Encode(c)
			} else {
				_, err = fmt.Fprintln(e.stdout, changeLine(c))
			}
			if err != nil {
				return exitOK // the reader went away (| head)
			}
		}
	}
	return exitOK
}

// changeLine is one change as watch prints it without --json.
func changeLine(c pending.Change) string {
	at := c.At.UTC().Format(time.RFC3339)
	head := fmt.Sprintf("%s  call %d %s", at, c.CallID, termtext.Name(c.Tool))
	if c.Type == pending.ChangeDecision {
		s := fmt.Sprintf("%s  %s by %s%s", head, c.Action, termtext.Name(c.Operator), onHost(c.Host))
		if c.Attempt > 0 {
			s += fmt.Sprintf(" (attempt %d)", c.Attempt)
		}
		if c.Note != "" {
			s += ": " + strconv.Quote(termtext.Line(c.Note))
		}
		return s
	}
	from := string(c.From)
	if from == "" {
		from = "new"
	}
	s := fmt.Sprintf("%s  %s -> %s", head, from, c.State)
	if c.Reason != "" {
		s += " (" + termtext.Line(c.Reason) + ")"
	}
	return s
}
