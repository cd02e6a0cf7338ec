package tui

import (
	"encoding/json"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// keyArgPolicy names key arguments no schema convention would find: the
// write place_bet takes its key in ticket, the read find_bets looks bets
// up by ref.
const keyArgPolicy = `
[tools.place_bet]
key_arg = "ticket"

[tools.find_bets]
kind = "read"
key_arg = "ref"
`

// keyArgEnv is env on a server that also has place_bet and find_bets, under
// keyArgPolicy. sent(tool) is the arguments each call of tool was sent.
func keyArgEnv(t *testing.T) (e *env, sent func(tool string) []map[string]any) {
	t.Helper()
	e = newEnv(t)
	place := mcp.NewTool("place_bet", mcp.WithDescription("Place a bet."),
		mcp.WithString("horse", mcp.Required()), mcp.WithString("ticket"), mcp.WithReadOnlyHintAnnotation(false))
	find := mcp.NewTool("find_bets", mcp.WithDescription("Find bets by reference."),
		mcp.WithString("ref"), mcp.WithString("horse"))
	e.srv.tools = append([]mcp.Tool{place, find}, e.srv.tools...)
	var mu sync.Mutex
	got := map[string][]map[string]any{}
	e.srv.answer = func(tool string, args map[string]any, o mcpclient.CallOptions, n int) mcpclient.Delivery {
		sent := map[string]any{}
		for k, v := range args {
			sent[k] = v
		}
		if o.KeyArg != "" { // as mcpclient puts the key in the arguments
			sent[o.KeyArg] = o.Key
		}
		mu.Lock()
		got[tool] = append(got[tool], sent)
		mu.Unlock()
		switch tool {
		case "place_bet":
			return mcpclient.Delivery{Kind: mcpclient.DeliveryUnknown, Reason: mcpclient.ReasonIdleTimeout, Session: 1, Err: mcpclient.ErrIdleTimeout}
		case "find_bets":
			return mcpclient.Delivery{Kind: mcpclient.DeliveryResult, Session: 1,
				ResultJSON: json.RawMessage(`{"content":[{"type":"text","text":"no bets"}],"structuredContent":{"bets":[]}}`)}
		}
		return ordersAnswer(tool, args, o, n)
	}
	pol, err := guard.ParsePolicy(keyArgPolicy, "key_arg policy")
	if err != nil {
		t.Fatal(err)
	}
	var seed [32]byte
	e.policy = pol
	e.g = guard.New(e.j, e.srv, guard.Options{Policy: pol, Operator: "ops", Keys: guard.SeededKeys(mrand.NewChaCha8(seed)), Server: testIdentity})
	return e, func(tool string) []map[string]any { mu.Lock(); defer mu.Unlock(); return got[tool] }
}

// The console's key argument is the guard's (Guard.KeyArg): the policy's
// key_arg where it sets one, not only the schema's conventional names. The
// tools screen names it, the editor leaves it out, the retry dialog counts
// on it, and a query by a read tool with its own key_arg puts the call's
// key there.
func TestConsoleKeyArgIsThePolicysKeyArg(t *testing.T) {
	e, sent := keyArgEnv(t)
	c := e.call(time.Minute, "place_bet", map[string]any{"horse": "Seabiscuit"})
	if got := sent("place_bet"); len(got) != 1 || got[0]["ticket"] != c.Key {
		t.Fatalf("the guard sent place_bet %v; want one call with its key %q in ticket", got, c.Key)
	}

	m := e.model(100, 30)
	if ti, ok := m.sh.tool("place_bet"); !ok || ti.KeyArg != "ticket" {
		t.Fatalf("place_bet's key argument in the console: %q (listed %v), want ticket", ti.KeyArg, ok)
	}
	tm := press(t, m, m.list.keys.Tools)
	if v := tm.View(); !strings.Contains(v, "key arg ticket") {
		t.Errorf("the tools screen does not name place_bet's key argument ticket:\n%s", v)
	}
	fm := press(t, tm, tm.tools.keys.Select) // place_bet is the first tool
	if got := fm.form.ta.Value(); strings.Contains(got, "ticket") || !strings.Contains(got, "horse") {
		t.Errorf("the editor's text %q: want horse, and not ticket (mcp-confirm fills the key)", got)
	}

	rm := press(t, m, m.list.keys.Retry)
	if v := flat(rm.View()); !strings.Contains(v, "The server declares ticket, so a completed first attempt will be replayed") {
		t.Errorf("the retry dialog does not count on ticket:\n%s", rm.View())
	}

	qm := press(t, m, m.list.keys.Query) // no query_tool: pick a read; find_bets is first
	if v := flat(qm.View()); !strings.Contains(v, `"ref":"`+c.Key+`"`) {
		t.Errorf("the query dialog does not put the key in find_bets's ref:\n%s", qm.View())
	}
	press(t, qm, defaultDialogKeys().Yes)
	if got := sent("find_bets"); len(got) != 1 || got[0]["ref"] != c.Key {
		t.Fatalf("find_bets was sent %v; want one query with ref = the call's key %q", got, c.Key)
	}
}
