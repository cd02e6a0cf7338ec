package mcpclient

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// A call that ended with an answer the client library saw and mcp-confirm
// did not, with no cancel of any kind, is not "cancelled" (issue 44): only
// the caller's own cancel says so.
func TestUnknownReasonNeverCancelledUncancelled(t *testing.T) {
	callCtx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	if r, err := unknownReason(nil, context.Background(), callCtx, false); r == ReasonCancelled {
		t.Fatalf("reason %q (%v) for a call nobody cancelled", r, err)
	}
	parent, stop := context.WithCancel(context.Background())
	stop()
	if r, _ := unknownReason(nil, parent, callCtx, false); r != ReasonCancelled {
		t.Fatalf("reason %q for a call its caller cancelled, want %q", r, ReasonCancelled)
	}
}

// The tap reads a stream byte by byte as well as whole: mcp-go is given it
// up to the end of the answer's event and then its end; what follows is
// the tap's, and a further answer with the request's id is a second answer
// (held until release), unless it is the answer's own event again.
func TestSSETapHandsOverAfterTheAnswer(t *testing.T) {
	answer := `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`
	other := `{"jsonrpc":"2.0","id":7,"result":{"content":[],"isError":true}}`
	first := "id: e1\ndata: " + answer + "\n\n"
	for _, tc := range []struct {
		name, rest string
		seconds    int
	}{
		{"a second answer", "id: e2\ndata: " + other + "\n\n", 1},
		{"the same event again", first, 0},
		{"a notification", "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n", 0},
	} {
		for _, oneByte := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/one byte %v", tc.name, oneByte), func(t *testing.T) {
				tap := newHTTPTap(nil)
				var drained [][]byte
				tap.drained = func(d []byte) { drained = append(drained, bytes.Clone(d)) }
				var late []LateResult
				lateDone := make(chan struct{})
				go func() {
					defer close(lateDone)
					tap.late.run(func(lr LateResult) { late = append(late, lr) })
				}()
				x := &exchange{id: "7", call: &tapCall{key: "k", tool: "t", session: 1}}
				var r io.Reader = strings.NewReader(first + tc.rest)
				if oneByte {
					r = iotest.OneByteReader(r)
				}
				s := &sseTap{t: tap, x: x, body: io.NopCloser(r), hold: holdStream(context.Background())}
				got, err := io.ReadAll(s)
				if err != nil || string(got) != first {
					t.Fatalf("mcp-go read %q (%v), want the stream up to the answer's end: %q", got, err, first)
				}
				_ = s.Close()
				tap.release(x.call)
				tap.close()
				<-lateDone
				if string(x.answer) != answer {
					t.Errorf("answer %s", x.answer)
				}
				if len(late) != tc.seconds {
					t.Fatalf("%d second answers, want %d: %+v", len(late), tc.seconds, late)
				}
				if tc.seconds == 1 && (!late[0].Second || late[0].Key != "k" || late[0].RPCID != "7" || !strings.Contains(string(late[0].ResultJSON), `"isError":true`)) {
					t.Errorf("second answer %+v", late[0])
				}
				if strings.HasPrefix(tc.name, "a notification") && len(drained) != 1 {
					t.Errorf("the notification after the answer was not passed on: %q", drained)
				}
			})
		}
	}
}
