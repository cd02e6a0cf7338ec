package mcpclient

import "testing"

// The reasons' text is stored in journals and shown to people: it is
// pinned here, with the clock each names.
func TestUnknownReason(t *testing.T) {
	for _, c := range []struct {
		r           UnknownReason
		text, clock string
	}{
		{ReasonIdleTimeout, "idle timeout", "idle"},
		{ReasonAbsoluteTimeout, "absolute timeout", "absolute"},
		{ReasonConnectionLost, "connection lost", ""},
		{ReasonCancelled, "cancelled", ""},
		{ReasonProtocolError, "unreadable answer", ""},
		{"", "", ""},
		{"gremlins", "gremlins", ""}, // a reason this build does not know
	} {
		if string(c.r) != c.text || c.r.Clock() != c.clock {
			t.Errorf("%q: text %q clock %q, want %q, %q", c.r, string(c.r), c.r.Clock(), c.text, c.clock)
		}
	}
}
