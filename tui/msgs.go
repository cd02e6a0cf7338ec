package tui

import (
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// Messages are named for what happened and carry the call ID they concern;
// handlers find rows by ID, never by cursor position.

// tickMsg is the clock: ages and the in-flight timer come from it, and it
// carries a snapshot of the server's state for the status bar.
type tickMsg struct {
	// OutOfTurn: a snapshot taken between ticks (nowCmd); the clock's own
	// tick schedules the next one, this does not.
	OutOfTurn bool
	Now       time.Time
	Server    serverSnap
	Servers   []serverSnap // a console over several servers (Options.Servers)
}

// serverSnap is what the status bar shows of the server.
type serverSnap struct {
	Name    string
	State   mcpclient.SessionState
	Session int
}

// windowLoadedMsg is one keyset page of the calls list around an anchor,
// with the per-state counts read in the same command.
type windowLoadedMsg struct {
	Gen      int // the list's generation when the load was asked for; stale loads are dropped
	Calls    []pending.Call
	Anchor   int // index in Calls of the anchor row (the row to keep at the top)
	AtStart  bool
	AtEnd    bool
	End      bool // loaded from the end (G): select the last row
	Counts   map[pending.State]int
	SelectID int64 // keep the cursor on this call if it is in the window
	Err      error
}

// lateLoadedMsg is every call that settled late after its caller was told
// it was unknown and that no operator has acknowledged yet
// (pending.Call.HoldsLate), oldest late settle first, and how long reading
// them took (which paces the next read).
type lateLoadedMsg struct {
	Calls []pending.Call
	Took  time.Duration
	Err   error
}

// callLoadedMsg is one call with its attempts and decisions (detail).
type callLoadedMsg struct {
	ID   int64
	Call pending.Call
	Err  error
}

// toolsLoadedMsg is the server's tools, classified by the guard, and what
// in the policy will not apply to them (guard.Policy.Check, one sanitised
// line each).
type toolsLoadedMsg struct {
	Server string // the server picked (Options.Servers); "" for the one server
	// Identity, when set, says these are the tools of the server calls
	// with that recorded identity were made on (CallTools), not the
	// picked server's.
	Identity       string
	Tools          []toolInfo
	PolicyProblems []string
	Err            error
}

// toolInfo is a tool as the console shows it.
type toolInfo struct {
	Tool       mcp.Tool
	Name       string // sanitised
	Desc       string // sanitised, one line
	Kind       pending.Kind
	KindSource pending.KindSource
	// KeyArg is the argument the key goes in (Engine.KeyArg), as the
	// server spells it: compare it with schema names as it is, clean it
	// to print it.
	KeyArg string
}

// journalChangedMsg: the journal changed (this or another process).
type journalChangedMsg struct{}

// Decision results.
type (
	queriedMsg struct {
		ID     int64
		Tool   string
		Key    string
		Result guard.Result
		Err    error
	}
	retriedMsg struct {
		ID     int64
		Tool   string
		Key    string
		Result guard.Result
		Err    error
	}
	// compensateCheckedMsg: call ID, as just read, and the cancels made of
	// it so far (Call.CompensatedBy), for its compensate dialog.
	compensateCheckedMsg struct {
		ID      int64
		Call    pending.Call
		Cancels []pending.Call
		Err     error
	}
	// compensatedMsg: the cancel of call ID (the policy's cancel_tool,
	// CancelTool) has an outcome, in Result (Result.Call is the cancel),
	// or was not made (Err).
	compensatedMsg struct {
		ID         int64
		Tool       string
		Key        string
		CancelTool string
		Result     guard.Result
		Err        error
	}
	decidedMsg struct { // abandon, mark, note, ack
		ID     int64
		Tool   string
		Key    string
		Action pending.Action
		Err    error
	}
)

// New calls.
type (
	// callDoneMsg: a call started from the console has an outcome.
	callDoneMsg struct {
		Run    int // which run of the form
		Tool   string
		Result guard.Result
		Err    error
	}
	// progressMsg: the server reported progress on an in-flight call.
	progressMsg struct {
		Run      int
		Progress mcpclient.Progress
		ch       <-chan progressMsg // where the next one will come from
	}
	// progressClosedMsg: no more progress will come for that run.
	progressClosedMsg struct{ Run int }
)

// dialogArmedMsg: a dialog opened by an event now takes keys.
type dialogArmedMsg struct{ Dialog int }

// errMsg is an error not tied to a call.
type errMsg struct{ Err error }

// Bulk reconciliation (issue 21).
type (
	// pickedAllMsg is every call of the list as filtered (the tab's state
	// and the tool), read for the select-all key; Capped when there were
	// more than maxPickAll.
	pickedAllMsg struct {
		Calls  []pending.Call
		Capped bool
		Err    error
	}
	// reconciledMsg: one call of a bulk run was queried (guard.Reconcile).
	reconciledMsg struct {
		Run int
		ID  int64
		Res guard.Reconciled
	}
	// acceptConfirmedMsg: the operator confirmed the accept dialog for
	// these calls of a run.
	acceptConfirmedMsg struct {
		Run int
		IDs []int64
	}
	// bulkRetryConfirmedMsg: the operator typed the count in the bulk
	// retry dialog for these calls of a run.
	bulkRetryConfirmedMsg struct {
		Run int
		IDs []int64
	}
	// bulkRetriedMsg: one call of a bulk retry has an outcome (guard.Retry).
	bulkRetriedMsg struct {
		Run    int
		ID     int64
		Result guard.Result
		Err    error
	}
	// acceptedMsg: one call of an accept was marked applied with its
	// query's evidence (guard.AcceptFound), or refused.
	acceptedMsg struct {
		Run      int
		ID       int64
		Call     pending.Call
		Evidence string
		Err      error
	}
)

// The console's own OAuth login (O, login.go).
type (
	// loginURLMsg: login Seq listens on its loopback redirect, and URL is
	// the authorization URL for the browser, there since At; next brings
	// the login's end.
	loginURLMsg struct {
		Seq  int
		URL  string
		At   time.Time
		next <-chan tea.Msg
	}
	// loginDoneMsg: login Seq ended, kept (Said says where) or not (Err).
	loginDoneMsg struct {
		Seq  int
		Said string
		Err  error
	}
)
