package mcpclient_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// answers records what OnAnswer was given.
type answers struct {
	mu   sync.Mutex
	got  []json.RawMessage
	errs []*mcpclient.RPCError
}

func (a *answers) on(result json.RawMessage, rpcErr *mcpclient.RPCError) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, bytes.Clone(result))
	a.errs = append(a.errs, rpcErr)
}

func (a *answers) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.got)
}

// OnAnswer gets what Call reports, once, before Call returns: a result or
// the server's JSON-RPC error; never an answer that comes after the call
// gave up on it.
func TestOnAnswer(t *testing.T) {
	noLeak(t)
	c, late := startedWithLate(t, fixture())

	var a answers
	out := call(t, c, "echo", map[string]any{"text": "hi"}, mcpclient.CallOptions{OnAnswer: a.on})
	if out.Kind != mcpclient.DeliveryResult || a.count() != 1 {
		t.Fatalf("echo: outcome %+v, %d answers passed before Call returned", out, a.count())
	}
	if !bytes.Equal(a.got[0], out.ResultJSON) || a.errs[0] != nil {
		t.Errorf("echo: passed %s %v, Call reported %s", a.got[0], a.errs[0], out.ResultJSON)
	}

	var f answers
	out = call(t, c, "fail", nil, mcpclient.CallOptions{Key: "k-fail-0000000002", OnAnswer: f.on})
	if out.Kind != mcpclient.DeliveryRPCError || f.count() != 1 {
		t.Fatalf("fail: outcome %+v, %d answers passed", out, f.count())
	}
	if f.got[0] != nil || f.errs[0] == nil || !reflect.DeepEqual(f.errs[0], out.RPCError) {
		t.Errorf("fail: passed %s %+v, Call reported %+v", f.got[0], f.errs[0], out.RPCError)
	}

	var l answers
	out = call(t, c, "late", map[string]any{"delay_ms": 600}, mcpclient.CallOptions{Key: "k-late-0000000002", IdleTimeout: 150 * time.Millisecond, OnAnswer: l.on})
	if out.Kind != mcpclient.DeliveryUnknown {
		t.Fatalf("late: outcome %+v", out)
	}
	late.wait(t, "k-late-0000000002") // the answer has come, as late evidence
	if l.count() != 0 {
		t.Errorf("late: an answer after the call ended was passed: %s", l.got[0])
	}
}
