package main

import (
	"errors"
	"fmt"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// cliHint continues the message of an error that the guard or the journal
// leaves to the front-end to word: what to do, in this CLI's commands and
// flags. It is "" when there is nothing to add.
func cliHint(err error) string {
	var unknownTool *guard.UnknownToolError
	var noQuery *guard.NoQueryError
	var settled *guard.SettledKeyError
	var owner *pending.OwnershipError
	switch {
	case errors.As(err, &unknownTool):
		return " (run 'mcp-confirm tools' to list them)"
	case errors.As(err, &noQuery):
		return "; give one with --tool T --args JSON, or set query_tool in the policy"
	case errors.As(err, &settled):
		if settled.State == pending.StateFailed {
			return fmt.Sprintf("; resend it with 'mcp-confirm retry %d', or use a new key", settled.CallID)
		}
	case errors.As(err, &owner):
		switch owner.Problem {
		case pending.NotAFile:
			return ", or use another --db"
		case pending.OtherUsersFile:
			return " or use another --db"
		case pending.OtherUsersFolder:
			return "; use a folder of your own with --db"
		case pending.FolderOpenToOthers:
			return ", or use another folder with --db"
		}
	case errors.Is(err, pending.ErrTruncated):
		return ", or run 'mcp-confirm stats --check'"
	}
	return ""
}

// noPathText words pending.DefaultPath's error.
func noPathText(err error) string {
	var np *pending.NoPathError
	if errors.As(err, &np) {
		return fmt.Sprintf("no journal path: set --db or $MCP_CONFIRM_DB (%v)", np.Err)
	}
	return err.Error()
}

// decisionHint is the line that tells the operator what may be done next
// with call id in state s, in commands self (mcp-confirm with its --db and
// --policy) runs as printed. It offers only what State.Allows: retry
// refuses a call in flight, so its hint is to wait for the outcome.
func decisionHint(self string, id int64, s pending.State) string {
	switch {
	case s.Allows(pending.EventRetry) && s.Allows(pending.EventMark):
		return fmt.Sprintf("Check it with '%s query %d', then '%s retry %d' (same key), '%s mark %d applied' or '%s abandon %d'.",
			self, id, self, id, self, id, self, id)
	case s.Allows(pending.EventRetry):
		return fmt.Sprintf("To resend it with the same key, run '%s retry %d'.", self, id)
	case s == pending.StateInFlight:
		return fmt.Sprintf("It is still in flight: its outcome is coming (retry, mark and abandon wait until it is known or unknown); "+
			"'%s show %d' shows where it stands.", self, id)
	}
	return fmt.Sprintf("'%s show %d' shows its state and history.", self, id)
}
