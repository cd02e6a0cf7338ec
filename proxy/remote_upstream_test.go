package proxy_test

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/internal/npmfixture"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// Issue 19: in front of a remote server (proxy --url), as over stdio
// (TestTSHostServerRequestsPassThrough), a capable host sees what it sees
// when it talks to the server itself. server-everything over Streamable
// HTTP lists its sampling, elicitation and roots tools only to a client
// that declared them; it asks for roots on its own once initialized (on
// the GET stream), for sampling and elicitation inside the tool calls (on
// their SSE streams), and for roots again when the host says they changed.
// The answers the host gives come back in the tool results.
func TestTSHostServerRequestsThroughProxyToRemoteServer(t *testing.T) {
	url := npmfixture.EverythingHTTP(t)
	journal := filepath.Join(t.TempDir(), "journal.db")
	const moved = "file:///ts-host/moved"
	steps := []step{
		{"op": "listTools"},
		{"op": "call", "name": "trigger-sampling-request", "arguments": map[string]any{"prompt": "a haiku about journals", "maxTokens": 20}},
		{"op": "call", "name": "trigger-elicitation-request", "arguments": map[string]any{}},
		{"op": "call", "name": "get-roots-list", "arguments": map[string]any{}},
		{"op": "setRoots", "roots": []map[string]any{{"uri": moved, "name": "moved"}}},
		{"op": "callUntil", "name": "get-roots-list", "arguments": map[string]any{}, "contains": moved},
		{"op": "serverRequests"},
	}
	direct := map[string]any{"url": url}
	for k, v := range capableHost {
		direct[k] = v
	}
	d := tsHostWith(t, direct, "", nil, steps...)
	p := tsHostWith(t, capableHost, bin, proxyArgs(journal, "--url", url), steps...)

	if n := strings.Count(p.stderr, "mcp session started"); n != 1 {
		t.Errorf("the proxy started %d sessions, want one: the host's initialize was its first line", n)
	}
	dTools := toolsByName(t, d, 0)
	for _, name := range []string{"trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"} {
		if dTools[name] == nil {
			t.Fatalf("server-everything does not list %s even directly: the fixture has changed", name)
		}
	}
	sameTools(t, dTools, toolsByName(t, p, 0))

	wants := map[int]string{
		1: "ts host sampled: Resource trigger-sampling-request context: a haiku about journals",
		2: "- Name: Ada Lovelace",
		3: "file:///ts-host/workspace",
		5: moved,
	}
	for i, want := range wants {
		var dr, pr toolResult
		d.ok(t, i, &dr)
		p.ok(t, i, &pr)
		if !strings.Contains(dr.text(), want) {
			t.Fatalf("step %d directly: %q lacks %q: the fixture has changed", i, dr.text(), want)
		}
		if pr.IsError || !strings.Contains(pr.text(), want) || !reflect.DeepEqual(dr, pr) {
			t.Errorf("step %d (%s): the server did not get the host's answer through the proxy\n direct: %+v\n  proxy: %+v",
				i, steps[i]["name"], dr, pr)
		}
	}

	type asked struct {
		ServerRequests []struct {
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
		} `json:"serverRequests"`
	}
	var dAsked, pAsked asked
	d.ok(t, 6, &dAsked)
	p.ok(t, 6, &pAsked)
	count := func(a asked) map[string]int {
		m := map[string]int{}
		for _, r := range a.ServerRequests {
			m[r.Method]++
		}
		return m
	}
	dn, pn := count(dAsked), count(pAsked)
	for _, method := range []string{"sampling/createMessage", "elicitation/create"} {
		if pn[method] != 1 {
			t.Errorf("the host was asked %s %d times through the proxy, want once; it was asked %v", method, pn[method], pn)
		}
	}
	// Once initialized, and again after roots/list_changed (a retry of the
	// first, if the tool asked before it was answered, may add one).
	if pn["roots/list"] < 2 || dn["roots/list"] < 2 {
		t.Errorf("roots/list asked %d times through the proxy, %d directly; want at least 2 (once connected, once changed)", pn["roots/list"], dn["roots/list"])
	}
	params := func(a asked, method string) map[string]any {
		for _, r := range a.ServerRequests {
			if r.Method == method {
				delete(r.Params, "_meta") // the server's progress token, per connection
				return r.Params
			}
		}
		return nil
	}
	for _, method := range []string{"sampling/createMessage", "elicitation/create"} {
		if dp, pp := params(dAsked, method), params(pAsked, method); !reflect.DeepEqual(dp, pp) {
			t.Errorf("%s params differ\n direct: %v\n  proxy: %v", method, dp, pp)
		}
	}

	j := openJournal(t, journal)
	got := map[string]pending.State{}
	for _, c := range calls(t, j) {
		got[c.Tool] = c.State
	}
	want := map[string]pending.State{"trigger-sampling-request": pending.StateSucceeded, "trigger-elicitation-request": pending.StateSucceeded}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("journal: %v, want %v (the read get-roots-list is not journaled)", got, want)
	}
}
