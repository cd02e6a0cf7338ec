package mcpclient

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// ReasonHTTPStatus: the request left and an HTTP error status came back
// without a JSON-RPC answer (a gateway's 502, a 500, a 503...): the server
// may have run it.
const ReasonHTTPStatus UnknownReason = "http error status"

// ErrAuthorization: the server wants authorization (it answered 401, or
// the stored login could not be refreshed).
var ErrAuthorization = errors.New("authorization needed")

// RefusedError: after the request was sent, the server (or something in
// between) answered an HTTP status that, by its own word, means it did not
// run it (SPEC §9 over HTTP): 404 for the session, or 400/401/403/405/406/
// 415 without a JSON-RPC answer. Its word is all there is: a server or
// gateway may run the call and answer 404 all the same (issue 44), so a
// write so answered is unknown (Delivery.Reason says what the server said),
// never "not executed".
type RefusedError struct {
	Status         int
	SessionExpired bool // 404 to a request that carried a session id
}

func (e *RefusedError) Error() string {
	what := fmt.Sprintf("the server answered HTTP %d %s", e.Status, http.StatusText(e.Status))
	if e.SessionExpired {
		what += " to the session (it says it no longer knows it)"
	}
	return what
}

// Is makes a 401 errors.Is(err, ErrAuthorization).
func (e *RefusedError) Is(target error) bool {
	return target == ErrAuthorization && e.Status == http.StatusUnauthorized
}

// refusedSaid is what every refusal's UnknownReason ends with.
const refusedSaid = ": it says it did not run this"

// RefusedReason is the UnknownReason of a request the server answered with
// status, saying it did not run it: "the server answered 404: it says it
// did not run this". It states what is known (the server's word), not that
// nothing ran.
func RefusedReason(status int, sessionExpired bool) UnknownReason {
	what := strconv.Itoa(status)
	if sessionExpired {
		what += " for the session"
	}
	return UnknownReason("the server answered " + what + refusedSaid)
}

// Refused reports whether r is a RefusedReason (detail may follow it).
func (r UnknownReason) Refused() bool {
	return strings.HasPrefix(string(r), "the server answered ") && strings.Contains(string(r), refusedSaid)
}

// Refusal is the HTTP status by which the server said it did not run the
// request (the outcome is then unknown), or nil.
func (d Delivery) Refusal() *RefusedError {
	var refused *RefusedError
	if d.Kind == DeliveryUnknown && errors.As(d.Err, &refused) {
		return refused
	}
	return nil
}

// SessionExpired reports whether the server answered 404 to a request that
// carried a session id, saying it no longer knew the session: the outcome
// is unknown (the server says it did not run it), and the next call goes
// out on a new session.
func (d Delivery) SessionExpired() bool {
	r := d.Refusal()
	return r != nil && r.SessionExpired
}

// refusedUnexecuted reports whether status, with no JSON-RPC answer, is
// one by which a server says it did not run the request.
func refusedUnexecuted(status int) bool {
	switch status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusMethodNotAllowed, http.StatusNotAcceptable, http.StatusUnsupportedMediaType:
		return true
	}
	return false
}

// decideHTTP is the not sent / answered / unknown truth table of SPEC §9
// for one tools/call over HTTP, from what the tap saw (x) and why the call
// gave up (reason, reasonErr: unknownReason). A pure function; an answer
// with our id is judged by decide, exactly as on stdio.
func decideHTTP(x exchange, callErr error, reason UnknownReason, reasonErr error) Delivery {
	var out Delivery
	switch {
	case !x.connected:
		// No connection was ever made: not one byte of the request left.
		err := x.err
		if err == nil {
			err = callErr
		}
		out.Kind, out.Err = DeliveryNotSent, fmt.Errorf("could not connect: %w", err)
	case x.unsent && x.status == 0 && x.answer == nil:
		// Connected, but the HTTP client gave up before it read one byte
		// of the body (the tap's sentOnce says so, and let nothing be read
		// after): the server cannot have been given the call to run.
		err := x.err
		if err == nil {
			err = callErr
		}
		out.Kind, out.Err = DeliveryNotSent, fmt.Errorf("the connection failed before the request's body was sent: %w", err)
	case x.answer != nil:
		// The server's own answer, whatever the status it came with.
		return decide(ending{sent: true, resp: &wireResp{line: x.answer}, err: callErr, reason: reason, reasonErr: reasonErr})
	case refusedUnexecuted(x.status):
		// The request left; the server says it did not run it. Only its
		// word: the outcome is unknown, with the word as the reason.
		refused := &RefusedError{Status: x.status, SessionExpired: x.status == http.StatusNotFound && x.sessionSent}
		out.Kind, out.Reason, out.Err = DeliveryUnknown, RefusedReason(refused.Status, refused.SessionExpired), refused
	case reason == ReasonIdleTimeout || reason == ReasonAbsoluteTimeout || reason == ReasonCancelled:
		// A clock or the caller gave up first: that is the reason.
		out.Kind, out.Reason, out.Err = DeliveryUnknown, reason, reasonErr
	case x.status != 0 && (x.status < 200 || x.status > 299):
		out.Kind, out.Reason = DeliveryUnknown, ReasonHTTPStatus
		out.Err = fmt.Errorf("HTTP %d %s from the server or something in between; the request was sent and may have taken effect",
			x.status, http.StatusText(x.status))
	case errors.Is(x.err, errResendRefused):
		// An HTTP/2 GOAWAY or stream reset (or a closed connection) after
		// the request was written: net/http would have sent it again by
		// itself, below the journal, and was not let (sentOnce).
		out.Kind, out.Reason = DeliveryUnknown, ReasonConnectionLost
		out.Err = fmt.Errorf("%w: %w; the request was sent and may have taken effect", ErrConnectionLost, errResendRefused)
	default:
		// Cut, reset, or a stream that ended without the answer.
		out.Kind, out.Reason = DeliveryUnknown, ReasonConnectionLost
		out.Err = fmt.Errorf("%w: the response did not arrive; the request was sent and may have taken effect", ErrConnectionLost)
	}
	return out
}
