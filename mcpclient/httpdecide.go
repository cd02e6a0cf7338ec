package mcpclient

import (
	"errors"
	"fmt"
	"net/http"
)

// ReasonHTTPStatus: the request left and an HTTP error status came back
// without a JSON-RPC answer (a gateway's 502, a 500, a 503...): the server
// may have run it.
const ReasonHTTPStatus UnknownReason = "http error status"

// ErrAuthorization: the server answered 401; nothing was run.
var ErrAuthorization = errors.New("authorization needed")

// RefusedError: the server refused the request before running it (SPEC §9,
// over HTTP): 404 for the session, or 400/401/403/405/406/415 without a
// JSON-RPC answer. Nothing was executed.
type RefusedError struct {
	Status         int
	SessionExpired bool // 404 to a request that carried a session id
}

func (e *RefusedError) Error() string {
	what := fmt.Sprintf("HTTP %d %s", e.Status, http.StatusText(e.Status))
	if e.SessionExpired {
		what += ": the server no longer knows the session"
	}
	return "the server refused the request before running it (" + what + ")"
}

// SessionExpired reports whether the server refused the request unexecuted
// because it no longer knew the session (HTTP 404 to a request that carried
// a session id): the request was not run, and the next call goes out on a
// new session.
func (d Delivery) SessionExpired() bool {
	var refused *RefusedError
	return d.Kind == DeliveryNotSent && errors.As(d.Err, &refused) && refused.SessionExpired
}

// Is makes a 401 errors.Is(err, ErrAuthorization).
func (e *RefusedError) Is(target error) bool {
	return target == ErrAuthorization && e.Status == http.StatusUnauthorized
}

// refusedUnexecuted reports whether status, with no JSON-RPC answer, means
// the server refused the request before running it.
func refusedUnexecuted(status int) bool {
	switch status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusMethodNotAllowed, http.StatusNotAcceptable, http.StatusUnsupportedMediaType:
		return true
	}
	return false
}

// decideHTTP is the sent / not executed / unknown truth table of SPEC §9
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
		out.Kind = DeliveryNotSent
		out.Err = &RefusedError{Status: x.status, SessionExpired: x.status == http.StatusNotFound && x.sessionSent}
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
