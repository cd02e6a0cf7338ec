package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/termtext"
)

func (c *cli) policyCommand() *cobra.Command {
	parent := &cobra.Command{
		Use:     "policy",
		Short:   "check a policy file against a server's tools",
		GroupID: "calls",
		Args:    unknownCommand,
		Run:     func(cmd *cobra.Command, _ []string) { cmd.Help() },
	}
	parent.AddCommand(c.leaf(&cobra.Command{
		Use:   "check --policy FILE [-- SERVER_COMMAND [ARGS...]]",
		Short: "list every part of a policy that will not apply to the server's tools",
		Long: `Read the policy and the server's tools, and list every problem: a section for a
tool the server does not list (its redact, kind and query would never apply), a
query_tool that is missing or is itself a write, a key_arg the tool does not
take. A policy that cannot be read at all (an unknown key, read_attempts = 0)
is reported as when any command reads it. Exit 0 when there is nothing to
fix, 2 otherwise.`,
		Example: `  mcp-confirm policy check --policy policy.toml -- node orders-server.js
  mcp-confirm policy check --policy policy.toml --config .mcp.json --server orders`,
	}, "", withServer, func(pos []string) int { return runPolicyCheck(c.ctx, c.env, &c.g, pos) }))
	return parent
}

// policyReport is policy check's --json output.
type policyReport struct {
	Policy   string                `json:"policy"`
	Problems []guard.PolicyProblem `json:"problems"`
}

func runPolicyCheck(ctx context.Context, e *env, g *globalOpts, pos []string) int {
	if len(pos) > 0 {
		fmt.Fprintf(e.stderr, "mcp-confirm policy check: unexpected argument %q\nGive the policy with --policy FILE and the server after --.\n", pos[0])
		return exitBadInput
	}
	if g.policy == "" {
		fmt.Fprintln(e.stderr, "mcp-confirm policy check: which policy? Give it with --policy FILE\nExample: mcp-confirm policy check --policy policy.toml -- node orders-server.js")
		return exitBadInput
	}
	en, code := openEngine(ctx, e, g, "policy check", 0)
	if en == nil {
		return code
	}
	defer en.close()
	tools, err := en.guard.ListTools(ctx)
	if err != nil {
		return exitFor(e, g, "policy check", guard.Result{}, err)
	}
	problems := en.policy.Check(tools)
	if g.json {
		if problems == nil {
			problems = []guard.PolicyProblem{}
		}
		if code := writeJSON(e, policyReport{Policy: g.policy, Problems: problems}); code != exitOK {
			return code
		}
	} else {
		for _, p := range problems {
			fmt.Fprintln(e.stdout, termtext.Line(p.String()))
		}
	}
	if len(problems) > 0 {
		fmt.Fprintf(e.stderr, "mcp-confirm policy check: %d problem(s) in %s\nFix the sections named above and run again.\n", len(problems), g.policy)
		return exitBadInput
	}
	if !g.json {
		fmt.Fprintf(e.stdout, "%s: %d tool section(s), all apply to the server's %d tools\n", termtext.Line(g.policy), len(en.policy.Tools), len(tools))
	}
	return exitOK
}
