package main

import (
	"bytes"
	"io"
)

// validUTF8 is where every JSON output goes: a server's result, error or
// evidence is kept in the journal as the bytes it sent (json.RawMessage), and
// encoding/json passes a raw message's invalid UTF-8 through unchanged.
// Invalid bytes can only stand inside a JSON string there (anywhere else the
// encoder refuses the message), so replacing each with U+FFFD keeps the JSON
// valid and its reader's decoder working. One Encode is one Write, so no
// sequence is split across two.
type validUTF8 struct{ w io.Writer }

func (v validUTF8) Write(p []byte) (int, error) {
	if _, err := v.w.Write(bytes.ToValidUTF8(p, []byte("\uFFFD"))); err != nil {
		return 0, err
	}
	return len(p), nil
}
