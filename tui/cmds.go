package tui

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// Every tea.Cmd the console runs is built here. A constructor captures
// values (IDs, keys, handles) and returns a command that does the I/O and
// returns a message; no command touches the model.

// Bounds on I/O that could otherwise hang the console's goroutines.
const (
	readTimeout   = 10 * time.Second // journal reads
	decideTimeout = 30 * time.Second // abandon, mark, note: journal writes only
	queryTimeout  = 2 * time.Minute  // a read tool on the server (the guard retries it)
	toolsTimeout  = 45 * time.Second // starting the server and listing its tools
)

// tickCmd is the console's clock: one tick after every d, with the time
// from the injected clock and the server's state.
func tickCmd(d time.Duration, o Options) tea.Cmd {
	return tea.Tick(d, func(time.Time) tea.Msg { return snapTick(o) })
}

// nowCmd reads the clock and the server state at once (the first frame,
// and after a server's work ends), beside the ticks.
func nowCmd(o Options) tea.Cmd {
	return func() tea.Msg {
		t := snapTick(o)
		t.OutOfTurn = true
		return t
	}
}

// snapTick is the time and the state of the server, or of each server.
func snapTick(o Options) tickMsg {
	t := tickMsg{Now: o.Now(), Server: snapServer(o.Server)}
	if o.Servers != nil {
		for _, name := range o.Servers.Names() {
			s := snapServer(o.Servers.Status(name))
			s.Name = name // the config's name: the one the picker and / use
			t.Servers = append(t.Servers, s)
		}
	}
	return t
}

func snapServer(srv ServerStatus) serverSnap {
	if srv == nil {
		return serverSnap{}
	}
	return serverSnap{Name: srv.ServerInfo().Name, State: srv.State(), Session: srv.Session()}
}

// anchorKind says where a window load starts.
type anchorKind int

const (
	anchorStart anchorKind = iota // the first rows in list order
	anchorEnd                     // the last rows in list order
	anchorAt                      // around a given call (inclusive)
)

// listQuery is what the list shows: states, tool filter, order.
type listQuery struct {
	States      []pending.State
	Tool        string
	Server      string // pending.Filter.Server
	OldestFirst bool
}

// filter is q as the journal reads it.
func (q listQuery) filter() pending.Filter {
	return pending.Filter{States: q.States, Tool: q.Tool, Server: q.Server, OldestFirst: q.OldestFirst}
}

// loadWindowCmd reads one window of the list with keyset paging: up to
// `before` rows before the anchor and `after` rows from it, plus the
// counts. Its cost does not depend on the journal's size.
func loadWindowCmd(j Journal, gen int, q listQuery, kind anchorKind, anchor pending.Call, before, after int, selectID int64) tea.Cmd {
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		defer cancel()
		msg := windowLoadedMsg{Gen: gen, SelectID: selectID}
		fwd, back := q.filter(), q.filter()
		back.OldestFirst = !q.OldestFirst
		var err error
		switch kind {
		case anchorStart:
			fwd.Limit = after + 1
			msg.Calls, err = j.List(ctx, fwd)
			msg.AtStart = true
			msg.AtEnd = len(msg.Calls) <= after
			msg.Calls = msg.Calls[:min(len(msg.Calls), after)]
		case anchorEnd:
			back.Limit = before + 1
			msg.Calls, err = j.List(ctx, back)
			msg.AtEnd, msg.End = true, true
			msg.AtStart = len(msg.Calls) <= before
			msg.Calls = msg.Calls[:min(len(msg.Calls), before)]
			slices.Reverse(msg.Calls)
			msg.Anchor = max(0, len(msg.Calls)-1)
		default:
			a := anchor
			back.After, back.Limit = &a, before+1
			var prev []pending.Call
			if prev, err = j.List(ctx, back); err == nil {
				msg.AtStart = len(prev) <= before
				prev = prev[:min(len(prev), before)]
				slices.Reverse(prev)
				incl := anchor // keyset "after" is strict: step one id back to include the anchor
				if q.OldestFirst {
					incl.ID--
				} else {
					incl.ID++
				}
				fwd.After, fwd.Limit = &incl, after+1
				var next []pending.Call
				if next, err = j.List(ctx, fwd); err == nil {
					msg.AtEnd = len(next) <= after
					next = next[:min(len(next), after)]
					msg.Anchor = len(prev)
					msg.Calls = append(prev, next...)
				}
			}
		}
		if err == nil {
			msg.Counts, err = j.Counts(ctx)
		}
		msg.Err = err
		return msg
	}
}

// lateScanPage is how many calls one read of the fallback late scan takes.
const lateScanPage = 1000

// maxLatePause bounds the pause before a fallback late scan.
const maxLatePause = time.Minute

// loadLateCmd reads the calls that hold late (settled late, not yet
// acknowledged). It waits pause first: the fallback read costs time in
// proportion to the journal, so the console spaces such reads out (see
// latePause).
func loadLateCmd(j Journal, pause time.Duration) tea.Cmd {
	return func() tea.Msg {
		if pause > 0 {
			time.Sleep(pause)
		}
		start := time.Now()
		calls, err := holdingLate(j)
		return lateLoadedMsg{Calls: calls, Took: time.Since(start), Err: err}
	}
}

// holdingLate lists the calls that hold late, oldest late settle first:
// from the journal's own list when it has one (LateLister), else by reading
// every call in keyset pages and keeping those that hold.
func holdingLate(j Journal) ([]pending.Call, error) {
	var out []pending.Call
	if ll, ok := j.(LateLister); ok {
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		defer cancel()
		calls, err := ll.HoldingLate(ctx)
		if err != nil {
			return nil, err
		}
		for _, c := range calls {
			if c.HoldsLate() {
				out = append(out, c)
			}
		}
	} else {
		f := pending.Filter{OldestFirst: true, Limit: lateScanPage}
		for {
			ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
			page, err := j.List(ctx, f)
			cancel()
			if err != nil {
				return nil, err
			}
			for _, c := range page {
				if c.HoldsLate() {
					out = append(out, c)
				}
			}
			if len(page) < f.Limit {
				break
			}
			last := page[len(page)-1]
			f.After = &last
		}
	}
	slices.SortFunc(out, func(a, b pending.Call) int {
		return cmp.Or(a.LateSettledAt.Compare(*b.LateSettledAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// latePause is the pause before the next late scan: nine times what the
// last one took, so that reading the whole journal takes at most a tenth
// of the console's time however often the journal changes (on a journal
// with its own list the scans take milliseconds, so the pause does too).
func latePause(took time.Duration) time.Duration {
	return min(9*took, maxLatePause)
}

// loadCallCmd reads one call with attempts and decisions.
func loadCallCmd(j Journal, id int64) tea.Cmd {
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		defer cancel()
		c, err := j.Get(ctx, id)
		return callLoadedMsg{ID: id, Call: c, Err: err}
	}
}

// listToolsCmd starts the server if needed and lists its tools, and checks
// the policy against them (guard.Policy.Check; p may be nil).
func listToolsCmd(server string, e Engine, p *guard.Policy) tea.Cmd {
	if e == nil {
		return nil
	}
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), toolsTimeout)
		defer cancel()
		tools, err := e.ListTools(ctx)
		if err != nil {
			return toolsLoadedMsg{Server: server, Err: err}
		}
		out := classifyTools(e, tools)
		all := p.Check(tools)
		// Over several servers (server named), one policy serves them all:
		// a section for a tool this one does not list, with no near name
		// to suggest a typo, is another server's, and so are its problems.
		others := map[string]bool{}
		for _, pp := range all {
			if server != "" && pp.Unlisted && pp.Nearest == "" {
				others[pp.Section] = true
			}
		}
		var problems []string
		for _, pp := range all {
			if !others[pp.Section] {
				problems = append(problems, clean(pp.String()))
			}
		}
		return toolsLoadedMsg{Server: server, Tools: out, PolicyProblems: problems}
	}
}

// classifyTools are a server's tools as the console shows them: each
// classified, and its key argument, by the guard's rules.
func classifyTools(e Engine, tools []mcp.Tool) []toolInfo {
	out := make([]toolInfo, 0, len(tools))
	for _, t := range tools {
		kind, src := e.Classify(t)
		out = append(out, toolInfo{Tool: t, Name: displayName(t.Name), Desc: clean(t.Description),
			Kind: kind, KindSource: src, KeyArg: e.KeyArg(t)})
	}
	return out
}

// watchCmd waits for the next journal change (guard.Watch's channel).
func watchCmd(ch <-chan struct{}) tea.Cmd {
	if ch == nil {
		return nil
	}
	return func() tea.Msg {
		if _, ok := <-ch; !ok {
			return nil
		}
		return journalChangedMsg{}
	}
}

// queryCmd runs a call's query (a read) and stores the evidence.
func queryCmd(ctx context.Context, e Engine, id int64, tool, key string, o guard.QueryOptions) tea.Cmd {
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, queryTimeout)
		defer cancel()
		res, err := e.Query(ctx, id, o)
		return queriedMsg{ID: id, Tool: tool, Key: key, Result: res, Err: err}
	}
}

// retryCmd resends a call with its key. It is bounded by the guard's own
// clocks (idle and absolute), not by a deadline here: cutting it short
// would only turn a slow answer into another unknown.
func retryCmd(ctx context.Context, e Engine, id int64, tool, key, note string, pastRetention bool) tea.Cmd {
	return func() tea.Msg {
		res, err := e.Retry(ctx, id, guard.RetryOptions{Note: note, PastRetention: pastRetention})
		return retriedMsg{ID: id, Tool: tool, Key: key, Result: res, Err: err}
	}
}

// compensateCheckCmd reads a call and the cancels made of it so far, before
// its compensate dialog opens.
func compensateCheckCmd(j Journal, id int64) tea.Cmd {
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		defer cancel()
		c, err := j.Get(ctx, id)
		msg := compensateCheckedMsg{ID: id, Call: c, Err: err}
		for _, by := range c.CompensatedBy {
			if err != nil {
				break
			}
			var k pending.Call
			if k, err = j.Get(ctx, by); err == nil {
				msg.Cancels = append(msg.Cancels, k)
			}
		}
		msg.Err = err
		return msg
	}
}

// compensateCmd has a call undone by the policy's cancel_tool: the
// decision, then the cancel as a guarded write of its own. Like a retry it
// is bounded by the guard's own clocks, not by a deadline here.
func compensateCmd(ctx context.Context, e Engine, id int64, tool, key, cancelTool, note string) tea.Cmd {
	return func() tea.Msg {
		res, err := e.Compensate(ctx, id, guard.CompensateOptions{Note: note})
		return compensatedMsg{ID: id, Tool: tool, Key: key, CancelTool: cancelTool, Result: res, Err: err}
	}
}

// decideCmd records abandon, mark, note or ack.
func decideCmd(ctx context.Context, e Engine, action pending.Action, id int64, tool, key, note string) tea.Cmd {
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, decideTimeout)
		defer cancel()
		var err error
		switch action {
		case pending.ActionAbandon:
			err = e.Abandon(ctx, id, note)
		case pending.ActionMark:
			err = e.MarkApplied(ctx, id, note)
		case pending.ActionAck:
			err = e.Ack(ctx, id, note)
		default:
			err = e.Note(ctx, id, note)
		}
		return decidedMsg{ID: id, Tool: tool, Key: key, Action: action, Err: err}
	}
}

// callCmd runs a new guarded call. Progress goes to ch (latest wins when
// the console is slow) and ch is closed when the call is over.
func callCmd(ctx context.Context, e Engine, run int, req guard.Request, ch chan progressMsg) tea.Cmd {
	return func() tea.Msg {
		defer close(ch)
		req.OnProgress = func(p mcpclient.Progress) {
			select {
			case ch <- progressMsg{Run: run, Progress: p}:
			default: // a progress message is waiting already; this one is newer
				select {
				case <-ch:
				default:
				}
				select {
				case ch <- progressMsg{Run: run, Progress: p}:
				default:
				}
			}
		}
		res, err := e.Call(ctx, req)
		return callDoneMsg{Run: run, Tool: req.Tool, Result: res, Err: err}
	}
}

// listenProgressCmd waits for the next progress of a run.
func listenProgressCmd(run int, ch <-chan progressMsg) tea.Cmd {
	return func() tea.Msg {
		p, ok := <-ch
		if !ok {
			return progressClosedMsg{Run: run}
		}
		p.ch = ch
		return p
	}
}

// armCmd lets a dialog opened by an event take keys after the grace period.
func armCmd(id int, grace time.Duration) tea.Cmd {
	return tea.Tick(grace, func(time.Time) tea.Msg { return dialogArmedMsg{Dialog: id} })
}

// maxPickAll bounds the select-all read: a list longer than that is
// selected in part, and the operator is told so.
const maxPickAll = 10000

// pickAllCmd reads every call of the list as filtered, for select-all.
func pickAllCmd(j Journal, q listQuery) tea.Cmd {
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		defer cancel()
		f := q.filter()
		f.Limit = maxPickAll + 1
		calls, err := j.List(ctx, f)
		capped := len(calls) > maxPickAll
		if capped {
			calls = calls[:maxPickAll]
		}
		return pickedAllMsg{Calls: calls, Capped: capped, Err: err}
	}
}

// reconcileCmd queries one call of a bulk run and keeps the answer as its
// query decision (guard.Reconcile, the engine of 'mcp-confirm reconcile');
// it marks nothing: accepting is the operator's next step.
func reconcileCmd(ctx context.Context, e Engine, run int, c pending.Call) tea.Cmd {
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, queryTimeout)
		defer cancel()
		return reconciledMsg{Run: run, ID: c.ID, Res: e.Reconcile(ctx, c, guard.ReconcileOptions{})}
	}
}

// bulkRetryCmd resends one call of a bulk retry with its key (guard.Retry),
// bounded by the guard's own clocks, as retryCmd is.
func bulkRetryCmd(ctx context.Context, e Engine, run int, id int64) tea.Cmd {
	return func() tea.Msg {
		res, err := e.Retry(ctx, id, guard.RetryOptions{Note: "bulk retry from the console's reconcile screen"})
		return bulkRetriedMsg{Run: run, ID: id, Result: res, Err: err}
	}
}

// acceptCmd marks one found call applied with its query's evidence.
func acceptCmd(ctx context.Context, e Engine, run int, id int64) tea.Cmd {
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, decideTimeout)
		defer cancel()
		c, ev, err := e.AcceptFound(ctx, id, "")
		return acceptedMsg{Run: run, ID: id, Call: c, Evidence: ev, Err: err}
	}
}

// loginCmd runs the console's OAuth login of the server at serverURL
// (Options.Login) on a goroutine of its own, which ends with the login
// (ctx's end ends it early). Its messages come one at a time: loginURLMsg
// when the authorization URL is there (nextLoginCmd waits for the
// following one), then loginDoneMsg.
func loginCmd(ctx context.Context, login LoginFunc, seq int, serverURL string, wait time.Duration, now func() time.Time) tea.Cmd {
	return func() tea.Msg {
		ch := make(chan tea.Msg, 2) // the URL and the end: neither send waits
		go func() {
			var once sync.Once
			said, err := login(ctx, serverURL, wait, func(u string) {
				once.Do(func() { ch <- loginURLMsg{Seq: seq, URL: u, At: now(), next: ch} })
			})
			ch <- loginDoneMsg{Seq: seq, Said: said, Err: err}
		}()
		return <-ch
	}
}

// nextLoginCmd waits for a login's next message (loginCmd).
func nextLoginCmd(ch <-chan tea.Msg) tea.Cmd {
	return func() tea.Msg { return <-ch }
}
