package mcpclient

import (
	"encoding/json"
	"errors"
	"testing"
)

// decide is the truth table of a call's end: each row is one way a call can
// end, and the outcome it must have.
func TestDecide(t *testing.T) {
	gaveUp := errors.New("toolsCall's error")
	whyErr := errors.New("why toolsCall gave up")
	rpcErr := &RPCError{Code: -32602, Message: "bad params"}
	result := json.RawMessage(`{"content":[]}`)
	answer := func(class AnswerClass, isError, afterCancel bool) *wireResp {
		r := &wireResp{line: []byte(`{"jsonrpc":"2.0","id":1,"junk":true}`), afterCancel: afterCancel,
			classified: true, class: class, isError: isError}
		switch class {
		case AnswerResult:
			r.result = result
		case AnswerRPCError:
			r.rpcErr = rpcErr
		case AnswerUnusable:
			r.why = "no result and no error"
		}
		return r
	}
	// What an unknown call says when it is unknown because toolsCall gave up.
	gaveUpUnknown := Delivery{Kind: DeliveryUnknown, Reason: ReasonIdleTimeout, Err: whyErr}

	tests := []struct {
		name string
		e    ending
		want Delivery
	}{
		{"not sent", ending{err: gaveUp},
			Delivery{Kind: DeliveryNotSent, Err: gaveUp}},
		{"sent, no answer", ending{sent: true, err: gaveUp},
			gaveUpUnknown},
		{"result", ending{sent: true, resp: answer(AnswerResult, false, false)},
			Delivery{Kind: DeliveryResult, ResultJSON: result}},
		{"result after our cancel", ending{sent: true, resp: answer(AnswerResult, false, true)},
			Delivery{Kind: DeliveryResult, ResultJSON: result}},
		{"tool error", ending{sent: true, resp: answer(AnswerResult, true, false)},
			Delivery{Kind: DeliveryResult, ResultJSON: result}},
		{"tool error after our cancel", ending{sent: true, resp: answer(AnswerResult, true, true)},
			gaveUpUnknown},
		{"rpc error", ending{sent: true, resp: answer(AnswerRPCError, false, false)},
			Delivery{Kind: DeliveryRPCError, RPCError: rpcErr, Err: rpcErr}},
		{"rpc error after our cancel", ending{sent: true, resp: answer(AnswerRPCError, false, true)},
			gaveUpUnknown},
		{"unusable answer", ending{sent: true, resp: answer(AnswerUnusable, false, false)},
			Delivery{Kind: DeliveryUnknown, Reason: ReasonProtocolError, Why: "no result and no error",
				Raw: json.RawMessage(`{"jsonrpc":"2.0","id":1,"junk":true}`)}},
		{"unusable answer after our cancel", ending{sent: true, resp: answer(AnswerUnusable, false, true)},
			gaveUpUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.e.reason, tt.e.reasonErr = ReasonIdleTimeout, whyErr
			got := decide(tt.e)
			if got.Kind != tt.want.Kind || got.Reason != tt.want.Reason || got.RPCError != tt.want.RPCError ||
				string(got.ResultJSON) != string(tt.want.ResultJSON) || string(got.Raw) != string(tt.want.Raw) ||
				got.RawTruncated != tt.want.RawTruncated || got.Why != tt.want.Why {
				t.Errorf("decide = %+v\nwant     %+v", got, tt.want)
			}
			switch {
			case tt.want.Reason == ReasonProtocolError:
				if !errors.Is(got.Err, ErrUnusableAnswer) {
					t.Errorf("err = %v, want ErrUnusableAnswer", got.Err)
				}
			case got.Err != tt.want.Err:
				t.Errorf("err = %v, want %v", got.Err, tt.want.Err)
			}
		})
	}
}
