package mcpclient

import (
	"errors"
	"testing"
)

func TestDecideHTTP(t *testing.T) {
	dialErr := errors.New("dial tcp: connection refused")
	result := []byte(`{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`)
	rpcErr := []byte(`{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"boom"}}`)
	cases := []struct {
		name   string
		x      exchange
		reason UnknownReason
		kind   DeliveryKind
		want   UnknownReason
	}{
		{"no connection", exchange{err: dialErr}, ReasonConnectionLost, DeliveryNotSent, ""},
		{"answer", exchange{connected: true, status: 200, answer: result}, "", DeliveryResult, ""},
		{"rpc error on a 500", exchange{connected: true, status: 500, answer: rpcErr}, "", DeliveryRPCError, ""},
		// A status by which the server says it did not run it: its word,
		// not proof (it may have run it all the same): unknown, saying so.
		{"401", exchange{connected: true, status: 401}, "", DeliveryUnknown, "the server answered 401: it says it did not run this"},
		{"404 with a session", exchange{connected: true, status: 404, sessionSent: true}, "", DeliveryUnknown,
			"the server answered 404 for the session: it says it did not run this"},
		{"404 without a session", exchange{connected: true, status: 404}, "", DeliveryUnknown, "the server answered 404: it says it did not run this"},
		{"415", exchange{connected: true, status: 415}, "", DeliveryUnknown, "the server answered 415: it says it did not run this"},
		{"502", exchange{connected: true, status: 502}, ReasonProtocolError, DeliveryUnknown, ReasonHTTPStatus},
		{"500 without answer", exchange{connected: true, status: 500}, ReasonProtocolError, DeliveryUnknown, ReasonHTTPStatus},
		{"429", exchange{connected: true, status: 429}, ReasonProtocolError, DeliveryUnknown, ReasonHTTPStatus},
		{"307 not followed", exchange{connected: true, status: 307}, ReasonProtocolError, DeliveryUnknown, ReasonHTTPStatus},
		{"cut before headers", exchange{connected: true, err: errors.New("EOF")}, ReasonConnectionLost, DeliveryUnknown, ReasonConnectionLost},
		{"stream ended", exchange{connected: true, status: 200}, ReasonProtocolError, DeliveryUnknown, ReasonConnectionLost},
		{"idle clock on a 200 stream", exchange{connected: true, status: 200}, ReasonIdleTimeout, DeliveryUnknown, ReasonIdleTimeout},
		{"idle clock beats a 502", exchange{connected: true, status: 502}, ReasonIdleTimeout, DeliveryUnknown, ReasonIdleTimeout},
		{"unusable answer", exchange{connected: true, status: 200, answer: []byte(`{"jsonrpc":"2.0","id":3,"result":7}`)}, "", DeliveryUnknown, ReasonProtocolError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := decideHTTP(tc.x, nil, tc.reason, errors.New(string(tc.reason)))
			if out.Kind != tc.kind || out.Reason != tc.want {
				t.Errorf("decideHTTP = %s (%q), %v; want %s (%q)", out.Kind, out.Reason, out.Err, tc.kind, tc.want)
			}
		})
	}
	var refused *RefusedError
	out := decideHTTP(exchange{connected: true, status: 404, sessionSent: true}, nil, "", nil)
	if !errors.As(out.Err, &refused) || !refused.SessionExpired || !out.SessionExpired() || !out.Reason.Refused() {
		t.Errorf("404 with a session: err = %v, want a RefusedError with SessionExpired", out.Err)
	}
	if out := decideHTTP(exchange{connected: true, status: 401}, nil, "", nil); !errors.Is(out.Err, ErrAuthorization) || out.Refusal() == nil {
		t.Errorf("401: err = %v, want ErrAuthorization and a refusal", out.Err)
	}
}
