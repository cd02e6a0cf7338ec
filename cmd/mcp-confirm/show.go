package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

func (c *cli) showCommand() *cobra.Command {
	cmd := c.leaf(&cobra.Command{
		Use:     "show ID",
		Short:   "one call with its attempts, decisions and evidence",
		Example: "  mcp-confirm show 17\n  mcp-confirm show 17 --json | jq .attempts\n  mcp-confirm show 17 --policy policy.toml   # with the time left of its key's key_retention",
	}, "read", []string{"db", "json", "policy"}, func(pos []string) int { return runShow(c.ctx, c.env, &c.g, pos) })
	cmd.ValidArgsFunction = c.completeCalls(anyCall)
	return cmd
}

func runShow(ctx context.Context, e *env, g *globalOpts, pos []string) int {
	id, ok := callIDArg("show", pos, e, 0)
	if !ok {
		return exitBadInput
	}
	var policy *guard.Policy
	if g.policy != "" {
		p, err := guard.LoadPolicy(g.policy)
		if err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm show: %v\nFix the policy file (see README, \"Policy\") and run again.\n", err)
			return exitBadInput
		}
		policy = p
	}
	j, code := openJournalReadOnly(ctx, e, g)
	if j == nil {
		return code
	}
	defer j.Close()
	c, err := j.Get(ctx, id)
	if errors.Is(err, pending.ErrNoSuchCall) {
		fmt.Fprintf(e.stderr, "mcp-confirm show: no call %d in %s\nRun 'mcp-confirm list' to see the calls.\n", id, j.Path())
		return exitBadInput
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm show: %v\n", err)
		return exitUnavailable
	}
	if g.json {
		return writeJSON(e, shownCall(c))
	}
	printCall(e.stdout, c, policy, time.Now())
	return exitOK
}

// callIDArg reads the call id that is the first positional argument of
// show/query/retry/...; extra is how many more words the command takes
// (-1: any number).
func callIDArg(cmd string, pos []string, e *env, extra int) (int64, bool) {
	if len(pos) == 0 {
		fmt.Fprintf(e.stderr, "mcp-confirm %s: which call? Give its id\nRun 'mcp-confirm list' to see the ids.\n", cmd)
		return 0, false
	}
	id, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil || id <= 0 {
		fmt.Fprintf(e.stderr, "mcp-confirm %s: %q is not a call id (a positive number)\nRun 'mcp-confirm list' to see the ids.\n", cmd, pos[0])
		return 0, false
	}
	if extra >= 0 && len(pos) > 1+extra {
		hint := "One call at a time; put a note in --note \"...\"."
		if cmd == "show" {
			hint = "One call at a time; 'mcp-confirm list' shows many."
		}
		fmt.Fprintf(e.stderr, "mcp-confirm %s: unexpected argument %q\n%s\n", cmd, pos[1+extra], hint)
		return 0, false
	}
	return id, true
}

// printCall is the human form of one call: everything the journal knows.
func printCall(w io.Writer, c pending.Call, policy *guard.Policy, now time.Time) {
	fmt.Fprintf(w, "Call %d  %s", c.ID, c.State)
	if c.Reason != "" {
		fmt.Fprintf(w, " (%s)", termtext.Line(c.Reason))
	}
	fmt.Fprintln(w)
	if c.Conflict {
		fmt.Fprintf(w, "  CONFLICT: %s\n", termtext.Line(c.ConflictNote))
	}
	if c.HoldsLate() {
		fmt.Fprintf(w, "  SETTLED LATE at %s, after its caller was told it was unknown; identical calls are held\n"+
			"           and answered with this outcome until 'mcp-confirm ack %d'\n", stamp(*c.LateSettledAt), c.ID)
	} else if c.LateSettledAt != nil && c.AckedAt != nil {
		fmt.Fprintf(w, "  settled late at %s, acknowledged at %s\n", stamp(*c.LateSettledAt), stamp(*c.AckedAt))
	}
	server := termtext.Name(c.Server)
	if c.ServerAlias != "" {
		server += " (config " + termtext.Name(c.ServerAlias) + ")"
	}
	if id, ok := guard.ParseServerIdentity(c.ServerIdentity); ok {
		server += ", reached as " + termtext.Line(id.String())
	}
	fmt.Fprintf(w, "  tool     %s (%s, from %s)\n  server   %s\n  key      %s\n", termtext.Name(c.Tool), c.Kind, c.KindSource, server, c.Key)
	if line := retentionLine(policy, c, now); line != "" {
		fmt.Fprintf(w, "  retention %s\n", line)
	}
	fmt.Fprintf(w, "  created  %s\n  updated  %s\n", stamp(c.CreatedAt), stamp(c.UpdatedAt))
	if c.Compensates != 0 {
		fmt.Fprintf(w, "  compensates call %d\n", c.Compensates)
	}
	if len(c.CompensatedBy) > 0 {
		fmt.Fprintf(w, "  compensated by call %s\n", joinIDs(c.CompensatedBy))
	}
	if c.Proposal != "" {
		fmt.Fprintf(w, "  proposal %s\n", termtext.Line(c.Proposal))
	}
	fmt.Fprintf(w, "  args     %s\n", indentJSON(c.Args, "           "))
	for _, a := range c.Attempts {
		fmt.Fprintf(w, "  attempt %d  session %d  rpc id %s  sent %s", a.N, a.Session, orDash(a.RPCID), stamp(a.SentAt))
		if a.EndedAt != nil {
			fmt.Fprintf(w, "  ended %s (%s)", stamp(*a.EndedAt), a.EndedAt.Sub(a.SentAt).Round(time.Millisecond))
		}
		fmt.Fprintf(w, "\n             %s", a.Outcome)
		if a.Late {
			fmt.Fprint(w, " (late answer)")
		}
		if a.Reason != "" {
			fmt.Fprintf(w, ": %s", termtext.Line(a.Reason))
		}
		if a.Clock != "" {
			fmt.Fprintf(w, " [%s clock]", a.Clock)
		}
		fmt.Fprintln(w)
		if len(a.Result) > 0 {
			fmt.Fprintf(w, "             result %s\n", indentJSON(a.Result, "                    "))
		}
		if len(a.Error) > 0 {
			fmt.Fprintf(w, "             error  %s\n", indentJSON(a.Error, "                    "))
		}
	}
	for _, d := range c.Decisions {
		fmt.Fprintf(w, "  decision %s by %s%s at %s", d.Action, termtext.Line(d.Operator), onHost(d.Host), stamp(d.At))
		if d.Attempt != 0 {
			fmt.Fprintf(w, " (attempt %d)", d.Attempt)
		}
		fmt.Fprintln(w)
		if d.Note != "" {
			fmt.Fprintf(w, "             note: %s\n", termtext.Line(d.Note))
		}
		if len(d.Evidence) > 0 {
			fmt.Fprintf(w, "             evidence %s\n", indentJSON(d.Evidence, "                      "))
		}
	}
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ", ")
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// indentJSON pretty-prints server-supplied JSON with its strings made
// terminal-safe.
func indentJSON(raw json.RawMessage, prefix string) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, prefix, "  "); err != nil {
		return termtext.Strip(string(raw))
	}
	return termtext.Strip(buf.String())
}

// retentionLine says, for a call that may still be retried, how long the
// server should keep recognising its key (the policy's key_retention), or
// that the time has passed; "" when the policy does not say.
func retentionLine(policy *guard.Policy, c pending.Call, now time.Time) string {
	if !c.State.Allows(pending.EventRetry) || c.Kind != pending.KindWrite {
		return ""
	}
	left, ok := policy.KeyRetentionLeft(c, now)
	if !ok {
		return ""
	}
	r := policy.KeyRetention(c.Tool)
	if left <= 0 {
		return fmt.Sprintf("PAST: the server keeps keys %s (policy key_retention) and this call was made %s ago; "+
			"it may no longer recognise the key, so a retry may do it twice (retry asks for --past-retention)",
			r, now.Sub(c.CreatedAt).Round(time.Second))
	}
	return fmt.Sprintf("%s left: the server keeps keys %s (policy key_retention), until %s; a retry after that may do it twice",
		left.Round(time.Second), r, stamp(c.CreatedAt.Add(r)))
}

// onHost is " on HOST" for a decision that recorded where it was made.
func onHost(host string) string {
	if host == "" {
		return ""
	}
	return " on " + termtext.Name(host)
}
