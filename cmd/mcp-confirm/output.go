package main

import (
	"io"

	"github.com/mcp-confirm/mcp-confirm/termtext"
)

// inertJSON is where every JSON output goes: a server's result, error or
// evidence is kept in the journal as the bytes it sent (json.RawMessage),
// which encoding/json passes through unchanged, invalid UTF-8 and raw
// C1 or bidi controls included, and it writes such controls raw in the
// strings it encodes (tool and server names, reasons). termtext.JSON
// spells them as \uNNNN and each invalid byte as U+FFFD: the JSON stays
// valid, decodes to the same values, and is inert on a terminal. One
// Encode is one Write, so no sequence is split across two.
type inertJSON struct{ w io.Writer }

func (v inertJSON) Write(p []byte) (int, error) {
	if _, err := v.w.Write(termtext.JSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
