package tui

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// newQueryDialog: run the read that says whether a call took effect. With
// a query configured in the policy it is a plain confirmation; without one
// the operator picks one of the server's read tools, with arguments filled
// from the call ({key} and {arg.NAME}, as the policy would).
func newQueryDialog(sh *shared, id int, c pending.Call, run func(o guard.QueryOptions) tea.Cmd) dialog {
	if tool, args := queryPlan(sh.opts.Policy, c); tool != "" {
		body := []string{
			sh.st.Dialog.Body.Render(fmt.Sprintf("Run %s %s and keep its answer as evidence on call %d.", displayName(tool), expandForDisplay(args, c), c.ID)),
			sh.st.Faint.Render("A query is a read: nothing is resent and the call stays " + stateWord(c.State) + " until you decide."),
		}
		return newConfirm(sh, id, fmt.Sprintf("Query %s key %s?", displayName(c.Tool), keyTail(c.Key)), body, "Yes, query",
			func(string) tea.Cmd { return run(guard.QueryOptions{}) }).forDecision(pending.ActionQuery, c)
	}
	var reads []toolInfo
	tools, _ := sh.toolsListOf(c) // the call's own server's
	for _, t := range tools {
		if t.Kind == pending.KindRead {
			reads = append(reads, t)
		}
	}
	d := &queryPickDialog{confirmDialog: newConfirm(sh, id, fmt.Sprintf("Query %s key %s with which read tool?", displayName(c.Tool), keyTail(c.Key)), nil, "Yes, query", nil).forDecision(pending.ActionQuery, c),
		reads: reads, run: run,
		up: key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "previous tool")), down: key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "next tool"))}
	d.sync()
	return d
}

// queryPickDialog is a confirmDialog with a choice of read tool.
type queryPickDialog struct {
	*confirmDialog
	reads    []toolInfo
	pick     int
	run      func(o guard.QueryOptions) tea.Cmd
	up, down key.Binding
}

func (d *queryPickDialog) Update(k tea.KeyMsg) (tea.Cmd, bool) {
	if d.armed && len(d.reads) > 0 {
		switch {
		case key.Matches(k, d.down):
			d.pick = (d.pick + 1) % len(d.reads)
			d.sync()
			return nil, false
		case key.Matches(k, d.up):
			d.pick = (d.pick + len(d.reads) - 1) % len(d.reads)
			d.sync()
			return nil, false
		}
	}
	if len(d.reads) == 0 && key.Matches(k, d.keys.Yes) {
		return nil, true
	}
	return d.confirmDialog.Update(k)
}

// sync sets the body and what Yes runs for the picked tool.
func (d *queryPickDialog) sync() {
	st := d.sh.st
	if len(d.reads) == 0 {
		d.body = []string{st.Dialog.Warning.Render("The server lists no read tools (and the policy names no query_tool for " + displayName(d.call.Tool) + "), so there is nothing safe to ask it. Check elsewhere, then m marks it applied or x abandons it.")}
		d.proceed = func(string) tea.Cmd { return nil }
		return
	}
	t := d.reads[d.pick]
	args := templateFor(t, d.call)
	run := d.run
	d.proceed = func(string) tea.Cmd { return run(guard.QueryOptions{Tool: t.Tool.Name, Args: args}) }
	var list strings.Builder
	for i, r := range d.reads {
		m := "  "
		if i == d.pick {
			m = GlyphSelected + " "
		}
		list.WriteString(m + r.Name + "  " + st.Faint.Render(trunc(r.Desc, 40)) + "\n")
	}
	d.body = []string{
		strings.TrimSuffix(list.String(), "\n"),
		st.Dialog.Body.Render(fmt.Sprintf("Run %s %s and keep its answer as evidence on call %d. A read: nothing is resent.", t.Name, expandForDisplay(args, d.call), d.call.ID)),
		st.Faint.Render("↑/↓ picks the tool. To make this the default, set query_tool for " + displayName(d.call.Tool) + " in the policy."),
	}
}

func (d *queryPickDialog) ShortHelp() []key.Binding {
	return append([]key.Binding{d.up, d.down}, d.confirmDialog.ShortHelp()...)
}

// templateFor fills a read tool's arguments from a call: its key argument
// (the policy's key_arg for it, else the schema's) gets {key}; arguments
// the call also has get {arg.NAME}.
func templateFor(t toolInfo, c pending.Call) map[string]any {
	out := map[string]any{}
	if ka := t.KeyArg; ka != "" {
		out[ka] = "{key}"
	}
	var callArgs map[string]any
	_ = json.Unmarshal(c.Args, &callArgs)
	for name := range schemaProps(t.Tool) {
		if _, ok := out[name]; ok {
			continue
		}
		if _, ok := callArgs[name]; ok {
			out[name] = "{arg." + name + "}"
		}
	}
	return out
}

// expandForDisplay shows query arguments with {key} and {arg.NAME} filled
// in, as the guard will send them.
func expandForDisplay(tmpl map[string]any, c pending.Call) string {
	var callArgs map[string]any
	_ = json.Unmarshal(c.Args, &callArgs)
	out := map[string]any{}
	keys := make([]string, 0, len(tmpl))
	for k := range tmpl {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := tmpl[k]
		if s, ok := v.(string); ok {
			switch {
			case s == "{key}":
				v = c.Key
			case strings.HasPrefix(s, "{arg.") && strings.HasSuffix(s, "}"):
				v = callArgs[strings.TrimSuffix(strings.TrimPrefix(s, "{arg."), "}")]
			default:
				v = strings.ReplaceAll(s, "{key}", c.Key)
			}
		}
		out[k] = v
	}
	b, _ := json.Marshal(out)
	return clean(string(b))
}
