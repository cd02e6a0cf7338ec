package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// serverSpec picks the server: -- CMD ARGS, or --config F --server N, or
// the built-in demo server (this binary's demo-server command, keeping its
// orders in demoDB so successive commands see the same orders).
func serverSpec(e *env, g *globalOpts, demoDB string) (mcpclient.ServerSpec, bool, error) {
	switch {
	case len(e.serverCmd) > 0 && (g.config != "" || g.server != ""):
		return mcpclient.ServerSpec{}, false, errors.New("give the server either after -- or with --config and --server, not both")
	case len(e.serverCmd) > 0:
		return mcpclient.ServerSpec{Command: e.serverCmd[0], Args: e.serverCmd[1:]}, false, nil
	case g.config != "" && g.server == "":
		return mcpclient.ServerSpec{}, false, errors.New("--config needs --server NAME to say which server in it")
	case g.server != "" && g.config == "":
		return mcpclient.ServerSpec{}, false, errors.New("--server needs --config FILE")
	case g.config != "":
		spec, err := mcpclient.LoadConfig(g.config, g.server)
		return spec, false, err
	}
	self, err := os.Executable()
	if err != nil {
		return mcpclient.ServerSpec{}, false, fmt.Errorf("find this program to run the demo server: %w", err)
	}
	return mcpclient.ServerSpec{Command: self, Args: []string{"demo-server", "--db", demoDB}}, true, nil
}

// engine is everything a command that talks to a server needs.
type engine struct {
	journal *pending.Journal
	client  *mcpclient.Client
	guard   *guard.Guard
}

func (en *engine) close() {
	en.client.Close()
	en.journal.Close()
}

// openEngine opens the journal, reads the policy and prepares the server
// session (started lazily by the first call). Errors are printed; the
// returned code is the exit code when en is nil.
func openEngine(ctx context.Context, e *env, g *globalOpts, cmd string) (*engine, int) {
	var policy *guard.Policy
	if g.policy != "" {
		p, err := guard.LoadPolicy(g.policy)
		if err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm %s: %v\nFix the policy file (see README, \"Policy\") and run again; nothing was sent.\n", cmd, err)
			return nil, exitBadInput
		}
		policy = p
	}
	if g.timeout < 0 {
		fmt.Fprintf(e.stderr, "mcp-confirm %s: --timeout must be positive\nGive a duration like 30s.\n", cmd)
		return nil, exitBadInput
	}
	j, code := openJournal(ctx, e, g)
	if j == nil {
		return nil, code
	}
	demoDB := filepath.Join(filepath.Dir(j.Path()), "demo-server.db")
	spec, _, err := serverSpec(e, g, demoDB)
	if err != nil {
		j.Close()
		fmt.Fprintf(e.stderr, "mcp-confirm %s: %v\nRun 'mcp-confirm --help' for server selection.\n", cmd, err)
		return nil, exitBadInput
	}
	en := &engine{journal: j}
	var gd *guard.Guard
	en.client = mcpclient.New(spec, mcpclient.Options{
		ClientVersion: version,
		OnLateResult:  func(lr mcpclient.LateResult) { gd.HandleLateResult(lr) },
		OnSession: func(n int) {
			_ = j.RecordEvent(context.Background(), pending.EventSessionStarted, 0, fmt.Sprintf("session %d", n))
		},
	})
	gd = guard.New(j, en.client, guard.Options{Policy: policy, ServerAlias: spec.Name, WriteTimeout: g.timeout})
	en.guard = gd
	return en, exitOK
}

// exitFor maps a guard error (or a call's final state) to the exit code of
// SPEC §4, printing the message and what to do.
func exitFor(e *env, cmd string, res guard.Result, err error) int {
	if err != nil {
		msg := err.Error()
		var held *guard.HeldError
		var pendingKey *guard.KeyPendingError
		var notRecorded *guard.OutcomeNotRecordedError
		switch {
		case errors.As(err, &notRecorded):
			fmt.Fprintf(e.stderr, "mcp-confirm %s: %s; treat it as unknown, it was NOT resent.\n"+
				"Fix the journal (disk space, permissions), then 'mcp-confirm list' shows it unknown; decide it with query, retry, mark or abandon.\n",
				cmd, oneLine(msg))
			return exitUnknown
		case errors.As(err, &held):
			fmt.Fprintf(e.stderr, "mcp-confirm %s: held: call %d with the same tool and arguments is %s; nothing was sent.\n"+
				"Decide that call first ('mcp-confirm show %d'), or pass --new if this is deliberately a second operation.\n",
				cmd, held.CallID, held.State, held.CallID)
			return exitHeld
		case errors.As(err, &pendingKey):
			fmt.Fprintf(e.stderr, "mcp-confirm %s: %s.\nTo resend it with the same key, run 'mcp-confirm retry %d'.\n", cmd, msg, pendingKey.CallID)
			return exitHeld
		case errors.Is(err, guard.ErrBadInput):
			fmt.Fprintf(e.stderr, "mcp-confirm %s: %s.\nNothing was sent.\n", cmd, trimClass(msg))
			return exitBadInput
		case errors.Is(err, guard.ErrNotAllowed):
			fmt.Fprintf(e.stderr, "mcp-confirm %s: %s.\nRun 'mcp-confirm show ID' to see the call's state and history.\n", cmd, trimClass(msg))
			return exitBadInput
		case errors.Is(err, guard.ErrHeld):
			fmt.Fprintf(e.stderr, "mcp-confirm %s: %s.\n", cmd, trimClass(msg))
			return exitHeld
		}
		hint := "Check that the server starts on its own (run its command by hand); nothing was sent."
		if strings.Contains(msg, "journal") {
			hint = "Check the journal file (disk space, permissions, --db); nothing was sent."
		}
		fmt.Fprintf(e.stderr, "mcp-confirm %s: %s\n%s\n", cmd, oneLine(trimClass(msg)), hint)
		return exitUnavailable
	}
	switch res.State {
	case pending.StateSucceeded, pending.StateApplied:
		return exitOK
	case pending.StateFailed:
		return exitFailed
	case pending.StateUnknown, pending.StateInFlight:
		fmt.Fprintf(e.stderr, "mcp-confirm %s: the outcome of call %d is unknown (%s); it was NOT resent.\n"+
			"Check it with 'mcp-confirm query %d', then 'retry %d' (same key), 'mark %d applied' or 'abandon %d'.\n",
			cmd, res.Call.ID, res.Call.Reason, res.Call.ID, res.Call.ID, res.Call.ID, res.Call.ID)
		return exitUnknown
	}
	return exitOK
}

// oneLine puts a multi-line message on one line: a server that fails to
// start comes with its last stderr lines, one per line, and SPEC §4 wants
// every error in one or two lines.
func oneLine(msg string) string {
	var lines []string
	for _, l := range strings.Split(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) < 2 {
		return strings.Join(lines, "")
	}
	return lines[0] + " " + strings.Join(lines[1:], " | ")
}

// trimClass drops the leading "bad input: " style class from a message.
func trimClass(msg string) string {
	for _, p := range []string{"bad input: ", "not allowed: ", "unavailable: ", "held: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}
