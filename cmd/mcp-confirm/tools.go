package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/termtext"
)

// runTools lists the server's tools with the kind the guard gives each
// (read or write) and where that came from, so an operator can check the
// policy before the first call.
func (c *cli) toolsCommand() *cobra.Command {
	cmd := c.leaf(&cobra.Command{
		Use:   "tools [-- SERVER_COMMAND [ARGS...]]",
		Short: "the server's tools, each with its kind (read/write) and why",
		Example: `  mcp-confirm tools -- npx -y @modelcontextprotocol/server-filesystem /tmp
  mcp-confirm tools --config .mcp.json --server orders --policy policy.toml`,
	}, "calls", withServer, func(pos []string) int { return runTools(c.ctx, c.env, &c.g, pos) })
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	return cmd
}

func runTools(ctx context.Context, e *env, g *globalOpts, pos []string) int {
	if len(pos) > 0 {
		fmt.Fprintf(e.stderr, "mcp-confirm tools: unexpected argument %q\nRun 'mcp-confirm tools [-- SERVER_COMMAND]'.\n", pos[0])
		return exitBadInput
	}
	en, code := openEngine(ctx, e, g, "tools", 0)
	if en == nil {
		return code
	}
	defer en.close()
	tools, err := en.guard.ListTools(ctx)
	if err != nil {
		return exitFor(e, g, "tools", guard.Result{}, err)
	}
	warnPolicy(e, "tools", en.policy, tools)
	type row struct {
		Name        string `json:"name"`
		Kind        string `json:"kind"`
		KindSource  string `json:"kind_source"`
		KeyArg      string `json:"key_arg,omitempty"`
		Description string `json:"description"`
	}
	rows := make([]row, 0, len(tools))
	for _, t := range tools {
		kind, src := en.guard.Classify(t)
		// The JSON has the names as the server sent them (the encoder
		// escapes their controls); the table shows them escaped visibly.
		rows = append(rows, row{Name: t.Name, Kind: string(kind), KindSource: string(src),
			KeyArg: en.guard.KeyArg(t), Description: t.Description})
	}
	if g.json {
		return writeJSON(e, rows)
	}
	info := en.client.ServerInfo()
	fmt.Fprintf(e.stdout, "%s %s (protocol %s)\n\n", termtext.Name(info.Name), termtext.Line(info.Version), info.Protocol)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tKIND\tFROM\tKEY ARG\tDESCRIPTION")
	for _, r := range rows {
		desc := termtext.Line(r.Description)
		if rs := []rune(desc); len(rs) > 60 {
			desc = string(rs[:57]) + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", termtext.Name(r.Name), r.Kind, r.KindSource, orDash(termtext.Name(r.KeyArg)), desc)
	}
	return flushOK(tw)
}
