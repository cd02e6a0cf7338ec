package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/termtext"
	"github.com/mcp-confirm/mcp-confirm/timetext"
)

// Shell completion (mcp-confirm completion bash|zsh|fish): call ids offer
// the calls a command can act on, with their tool and age; --server offers
// the servers in --config. Completion reads the journal read-only and never
// starts a server: pressing TAB must not have effects.

// callsFor chooses the calls a command's id completion offers.
type callsFor int

const (
	decidable   callsFor = iota // unknown or failed: what query, retry, abandon and mark act on
	anyCall                     // show and note: the most recent calls
	settledLate                 // ack: calls that settled late and hold identical ones
	compensable                 // compensate: writes that took effect or may have
)

const completionLimit = 50

func (c *cli) completeCalls(which callsFor) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		g := c.g
		quiet := &env{stdin: c.env.stdin, stdout: discard{}, stderr: discard{}, getenv: c.env.getenv}
		// No recovery: it is a brief writing open, and TAB must write nothing.
		j, _ := openJournalWith(c.ctx, quiet, &g, func(ctx context.Context, path string, o pending.Options) (*pending.Journal, error) {
			o.SkipRecovery = true
			return pending.OpenReadOnly(ctx, path, o)
		})
		if j == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer j.Close()
		f := pending.Filter{Limit: completionLimit}
		if which == decidable {
			f.States = []pending.State{pending.StateUnknown, pending.StateFailed}
		}
		if which == settledLate {
			f.Limit = 0
		}
		if which == compensable {
			f.States = []pending.State{pending.StateUnknown, pending.StateSucceeded, pending.StateApplied, pending.StateAbandoned}
		}
		calls, err := j.List(c.ctx, f)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		now := time.Now()
		var out []string
		for _, call := range calls {
			if which == settledLate && !call.HoldsLate() || which == compensable && call.Kind == pending.KindRead {
				continue
			}
			out = append(out, fmt.Sprintf("%d\t%s, %s, %s ago", call.ID, termtext.Name(call.Tool), call.State, timetext.Age(now.Sub(call.CreatedAt))))
			if len(out) == completionLimit {
				break
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
	}
}

// completeServers offers the servers named in --config.
func (c *cli) completeServers(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	if c.g.config == "" {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names, err := mcpclient.ConfigServers(c.g.config)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	for i, n := range names {
		names[i] = termtext.Name(n)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// fileCompletion offers files, those ending in ext first where the shell
// can filter.
func fileCompletion(ext string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{ext}, cobra.ShellCompDirectiveFilterFileExt
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
