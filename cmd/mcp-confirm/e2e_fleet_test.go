package main

// The console over several servers (issue 21, "One console, all servers"),
// the wiring under the screen: the fleet that cmd builds for
// 'mcp-confirm --config FILE' (no --server) and for 'mcp-confirm --db J'
// (the journal's own servers). Unknown calls are made by the built binary
// on two demo servers, each over its own orders file; the fleet is then
// built in this process, as runConsole builds it, and driven as the
// console drives it. Its servers are real demo-server processes.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/demo"
	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// fleetWorld is two demo servers, orders-a and orders-b of one host
// config, each keeping its orders in its own file, and one journal.
type fleetWorld struct {
	*world
	config string
	policy string
	db     map[string]string // server name → its orders file
}

func newFleetWorld(t *testing.T) *fleetWorld {
	dir := t.TempDir()
	fw := &fleetWorld{world: newWorld(t, dir), config: filepath.Join(dir, "servers.json"),
		policy: filepath.Join(dir, "policy.toml"),
		db:     map[string]string{"orders-a": filepath.Join(dir, "a.db"), "orders-b": filepath.Join(dir, "b.db")}}
	servers := map[string]any{}
	for name, db := range fw.db {
		// Each one's first fresh create_order commits and never answers.
		servers[name] = map[string]any{"command": fw.bin, "args": []string{"demo-server", "--db", db, "--hang-after-commit", "1"}}
	}
	b, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fw.config, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fw.policy, []byte(reconcilePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	return fw
}

// unknownCall makes, with the built binary, a create_order on server name
// that ends unknown: its order is committed there, its answer never came.
// Its quantity is quantity: both servers declare the demo's name, and the
// resend hold, which goes by declared name, would hold identical calls.
func (fw *fleetWorld) unknownCall(name string, quantity int) callOut {
	fw.t.Helper()
	r := fw.run("call", "create_order", "--config", fw.config, "--server", name, "--timeout", "1s",
		"--args", fmt.Sprintf(`{"item":"widget","quantity":%d,"buyer":"alice"}`, quantity))
	wantExit(fw.t, r, exitUnknown, "create_order on "+name)
	out := parseCallOut(fw.t, r)
	if n := fw.orders(name, out.Key); n != 1 {
		fw.t.Fatalf("the lost call on %s committed %d orders, want 1", name, n)
	}
	return out
}

// orders counts server name's orders made under key.
func (fw *fleetWorld) orders(name, key string) int {
	fw.t.Helper()
	n, err := demo.CountOrders(context.Background(), fw.db[name], key)
	if err != nil {
		fw.t.Fatal(err)
	}
	return n
}

// running is how many demo-server processes server name has.
func (fw *fleetWorld) running(name string) int { return len(demoPIDs(fw.t, fw.db[name])) }

// open builds the fleet for g as the console does; stderr gets its lines.
func (fw *fleetWorld) open(g *globalOpts, stderr *bytes.Buffer) (*fleet, *engine, int) {
	getenv := func(k string) string {
		switch k {
		case "HOME":
			return fw.dir
		case "XDG_STATE_HOME":
			return filepath.Join(fw.dir, "state")
		}
		return ""
	}
	e := &env{stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: stderr, getenv: getenv}
	return openFleet(context.Background(), e, g)
}

// lastQuery is the evidence of call id's latest query decision.
func lastQuery(t *testing.T, j *pending.Journal, id int64) string {
	t.Helper()
	c, err := j.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(c.Decisions) - 1; i >= 0; i-- {
		if c.Decisions[i].Action == pending.ActionQuery {
			return string(c.Decisions[i].Evidence)
		}
	}
	t.Fatalf("call %d has no query decision: %+v", id, c.Decisions)
	return ""
}

func TestFleetOverAConfig(t *testing.T) {
	fw := newFleetWorld(t)
	ctx := context.Background()
	made := map[string]callOut{}
	for i, name := range []string{"orders-a", "orders-b"} {
		made[name] = fw.unknownCall(name, i+1)
	}
	// A call of an older mcp-confirm: no identity, only a declared name.
	old := []seededCall{{key: "older-call-0001", tool: "create_order"}}
	recordUnknown(t, fw.journal, demo.Name, nil, old)

	var stderr bytes.Buffer
	fl, en, code := fw.open(&globalOpts{db: fw.journal, config: fw.config, policy: fw.policy, timeout: 2 * time.Second}, &stderr)
	if code != exitOK || fl == nil || en != nil {
		t.Fatalf("openFleet: code %d, fleet %v, engine %v\n%s", code, fl != nil, en != nil, stderr.String())
	}
	defer fl.close()

	if got := fl.Names(); !slices.Equal(got, []string{"orders-a", "orders-b"}) {
		t.Errorf("Names %q, want both servers of the config", got)
	}
	// Nothing is started before first use, and asking for a status or an
	// engine starts nothing either.
	for _, name := range fl.Names() {
		st := fl.Status(name)
		if st == nil || st.State() != mcpclient.StateNew || st.ServerInfo().Name != name || st.Session() != 0 {
			t.Fatalf("Status(%s) before first use: %+v", name, st)
		}
		if fl.Engine(name) == nil {
			t.Fatalf("Engine(%s) is nil", name)
		}
	}
	if fl.Status("orders-c") != nil || fl.Engine("orders-c") != nil {
		t.Error("a name not in the config should have no status and no engine")
	}
	// The router makes no new call: the console picks the server first.
	_, err := fl.Call(ctx, guard.Request{Tool: "create_order", Args: map[string]any{"item": "widget", "quantity": 1, "buyer": "alice"}})
	if !errors.Is(err, guard.ErrBadInput) || !strings.Contains(err.Error(), "pick the server first") {
		t.Errorf("Call on the router: %v, want bad input saying to pick the server first", err)
	}
	if _, err := fl.ListTools(ctx); !strings.Contains(fmt.Sprint(err), "pick the server first") {
		t.Errorf("ListTools on the router: %v, want pick the server first", err)
	}
	if n := fw.running("orders-a") + fw.running("orders-b"); n != 0 || fl.sessions.count() != 0 {
		t.Fatalf("%d server processes and %d sessions before any call of the console's; want none", n, fl.sessions.count())
	}

	// A query goes to the call's own server, and starts that one only.
	a, b := made["orders-a"], made["orders-b"]
	res, err := fl.Query(ctx, a.ID, guard.QueryOptions{})
	if err != nil {
		t.Fatalf("query of call %d: %v", a.ID, err)
	}
	if ev := lastQuery(t, fl.journal, a.ID); !strings.Contains(ev, a.Key) || !strings.Contains(string(res.Result), a.Key) {
		t.Errorf("the query of call %d should find its order %s on orders-a:\nresult %s\nevidence %s", a.ID, a.Key, res.Result, ev)
	}
	if fw.running("orders-a") != 1 || fw.running("orders-b") != 0 {
		t.Errorf("after a query on orders-a: %d orders-a and %d orders-b processes, want 1 and 0", fw.running("orders-a"), fw.running("orders-b"))
	}
	if st := fl.Status("orders-a"); st.State() != mcpclient.StateRunning || st.ServerInfo().Name != demo.Name {
		t.Errorf("orders-a after its query: %s, %q; want running, %q", st.State(), st.ServerInfo().Name, demo.Name)
	}
	if st := fl.Status("orders-b"); st.State() != mcpclient.StateNew {
		t.Errorf("orders-b is %s after a query on orders-a; want new (not started)", st.State())
	}
	if _, err := fl.Query(ctx, b.ID, guard.QueryOptions{}); err != nil {
		t.Fatalf("query of call %d: %v", b.ID, err)
	}
	if ev := lastQuery(t, fl.journal, b.ID); !strings.Contains(ev, b.Key) || strings.Contains(ev, a.Key) {
		t.Errorf("the query of call %d should find its own order %s on orders-b: %s", b.ID, b.Key, ev)
	}
	if fw.orders("orders-b", a.Key) != 0 || fw.orders("orders-a", b.Key) != 0 {
		t.Fatal("an order under the other server's key: a call went to the wrong server")
	}

	// A retry goes to its own server too: the order there answers it
	// (replayed under its key); the other server gets nothing.
	res, err = fl.Retry(ctx, a.ID, guard.RetryOptions{Note: "the fleet's retry"})
	if err != nil || res.State != pending.StateSucceeded || !res.Replayed {
		t.Errorf("retry of call %d: %v, %s, replayed %v; want succeeded, replayed by orders-a", a.ID, err, res.State, res.Replayed)
	}
	if fw.orders("orders-a", a.Key) != 1 || fw.orders("orders-b", a.Key) != 0 {
		t.Errorf("after the retry: %d orders of %s on orders-a, %d on orders-b; want 1 and 0", fw.orders("orders-a", a.Key), a.Key, fw.orders("orders-b", a.Key))
	}

	// A named server's engine shares its session with the calls made on it.
	tools, err := fl.Engine("orders-a").ListTools(ctx)
	if err != nil || !slices.ContainsFunc(tools, func(t mcp.Tool) bool { return t.Name == "create_order" }) {
		t.Errorf("orders-a's tools: %v, %v", len(tools), err)
	}
	if n, s := fl.sessions.count(), fl.Status("orders-a").Session(); n != 2 || s != 1 || fw.running("orders-a") != 1 {
		t.Errorf("%d sessions, orders-a on session %d with %d processes; want 2 sessions, one each", n, s, fw.running("orders-a"))
	}
	if n := fl.sessionsStarted(); n != 2 {
		t.Errorf("sessions started over the fleet: %d, want 2", n)
	}

	// A new call made on a named server records the identity the CLI's
	// 'call --config F --server N' records.
	res, _ = fl.Engine("orders-b").Call(ctx, guard.Request{Tool: "create_order", Args: map[string]any{"item": "widget", "quantity": 3, "buyer": "alice"}})
	if res.Call.ID == 0 {
		t.Fatalf("the new call on orders-b was not journaled: %+v", res)
	}
	mine, err := fl.journal.Get(ctx, res.Call.ID)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := fl.journal.Get(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mine.ServerIdentity, cli.ServerIdentity) || mine.ServerAlias != "orders-b" {
		t.Errorf("a call made on orders-b here records %s (alias %q); the CLI recorded %s", mine.ServerIdentity, mine.ServerAlias, cli.ServerIdentity)
	}

	// A call recorded without its server's identity is not sent anywhere,
	// and the reason says so; journal-only decisions still work on it.
	if _, err := fl.Query(ctx, old[0].id, guard.QueryOptions{}); err == nil || !strings.Contains(err.Error(), "recorded without the way its server was reached") {
		t.Errorf("query of a call without an identity: %v, want the reason", err)
	}
	if _, err := fl.Retry(ctx, old[0].id, guard.RetryOptions{}); err == nil || !errors.Is(err, guard.ErrUnavailable) {
		t.Errorf("retry of a call without an identity: %v, want unavailable", err)
	}
	c, _ := fl.journal.Get(ctx, old[0].id)
	if rec := fl.Reconcile(ctx, c, guard.ReconcileOptions{}); rec.Finding != guard.FindingQueryFailed || !strings.Contains(rec.Evidence, "recorded without") {
		t.Errorf("reconcile of a call without an identity: %s, %q", rec.Finding, rec.Evidence)
	}
	if err := fl.Abandon(ctx, old[0].id, "no server to ask"); err != nil {
		t.Errorf("abandon of a call without an identity: %v", err)
	}
	if _, err := fl.Query(ctx, 999, guard.QueryOptions{}); !errors.Is(err, guard.ErrBadInput) {
		t.Errorf("query of no such call: %v, want bad input", err)
	}
	if n := fl.sessions.count(); n != 2 {
		t.Errorf("%d sessions after the decisions; want still 2", n)
	}
}

func TestFleetOverAJournal(t *testing.T) {
	fw := newFleetWorld(t)
	ctx := context.Background()
	a := fw.unknownCall("orders-a", 1)
	fw.unknownCall("orders-b", 2)
	// Two servers that both declare the demo's name, reached by command
	// (from two folders for one of them: one server), and one whose
	// config is gone: it cannot be reached again.
	dbC, dbD := filepath.Join(fw.dir, "c.db"), filepath.Join(fw.dir, "d.db")
	for i, id := range []guard.ServerIdentity{
		{Command: fw.bin, Args: []string{"demo-server", "--db", dbC}, Dir: fw.dir},
		{Command: fw.bin, Args: []string{"demo-server", "--db", dbC}, Dir: "/"},
		{Command: fw.bin, Args: []string{"demo-server", "--db", dbD}, Dir: fw.dir},
		{Config: filepath.Join(fw.dir, "gone.json"), Server: "orders-z"},
	} {
		recordUnknown(t, fw.journal, demo.Name, id.JSON(), []seededCall{{key: fmt.Sprintf("seeded-%04d", i), tool: "create_order"}})
	}
	recordUnknown(t, fw.journal, "orders", nil, []seededCall{{key: "older-call-0001", tool: "create_order"}})

	var stderr bytes.Buffer
	fl, en, code := fw.open(&globalOpts{db: fw.journal, policy: fw.policy}, &stderr)
	if code != exitOK || fl == nil || en != nil {
		t.Fatalf("openFleet: code %d, fleet %v, engine %v\n%s", code, fl != nil, en != nil, stderr.String())
	}
	defer fl.close()
	want := []string{demo.Name, demo.Name + " (2)", "orders-a", "orders-b"}
	if got := fl.Names(); !slices.Equal(got, want) {
		t.Errorf("Names %q, want %q", got, want)
	}
	if n := fw.running("orders-a") + fw.running("orders-b") + len(demoPIDs(t, dbC)) + len(demoPIDs(t, dbD)); n != 0 {
		t.Errorf("%d server processes at start; want none", n)
	}
	// The journal's name for a config's server is its config name; its
	// session is the one its calls are queried on.
	if _, err := fl.Engine("orders-a").ListTools(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := fl.Query(ctx, a.ID, guard.QueryOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := lastQuery(t, fl.journal, a.ID); !strings.Contains(ev, a.Key) {
		t.Errorf("query of call %d on orders-a: %s", a.ID, ev)
	}
	if n := fl.sessions.count(); n != 1 || fw.running("orders-a") != 1 || fw.running("orders-b") != 0 {
		t.Errorf("%d sessions, %d orders-a and %d orders-b processes; want one session on orders-a", n, fw.running("orders-a"), fw.running("orders-b"))
	}
	for _, name := range []string{demo.Name, demo.Name + " (2)", "orders-b"} {
		if st := fl.Status(name); st.State() != mcpclient.StateNew {
			t.Errorf("%s is %s; want new", name, st.State())
		}
	}

	// A journal with no server in it is today's console: the built-in demo
	// server beside it, one engine.
	fl2, en, code := fw.open(&globalOpts{db: filepath.Join(fw.dir, "empty.db")}, &stderr)
	if code != exitOK || fl2 != nil || en == nil {
		t.Fatalf("an empty journal: code %d, fleet %v, engine %v\n%s", code, fl2 != nil, en != nil, stderr.String())
	}
	en.close()
}

func TestFleetBadInput(t *testing.T) {
	fw := newFleetWorld(t)
	for _, tc := range []struct {
		name string
		g    globalOpts
		code int
		say  string
	}{
		{"headers over several servers", globalOpts{config: fw.config, headers: []string{"Authorization: Bearer x"}}, exitBadInput, "--header is for one remote server"},
		{"no such config", globalOpts{config: filepath.Join(fw.dir, "missing.json")}, exitBadInput, "missing.json"},
		{"a bad policy", globalOpts{config: fw.config, policy: fw.config}, exitBadInput, "policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			g := tc.g
			g.db = fw.journal
			fl, en, code := fw.open(&g, &stderr)
			if fl != nil || en != nil || code != tc.code || !strings.Contains(stderr.String(), tc.say) {
				t.Errorf("code %d (want %d), fleet %v, engine %v; stderr should say %q:\n%s", code, tc.code, fl != nil, en != nil, tc.say, stderr.String())
			}
		})
	}
	// The built binary: the console still needs a terminal before anything
	// else, and only the console takes all servers of a config.
	for _, tc := range []struct {
		args []string
		say  string
	}{
		{[]string{"--config", filepath.Join(fw.dir, "missing.json")}, "the console needs a terminal"},
		{[]string{"--config", fw.config}, "the console needs a terminal"},
		{[]string{"call", "create_order", "--config", fw.config, "--args", "{}"}, "--config needs --server NAME"},
		{[]string{"query", "1", "--config", fw.config}, "--config needs --server NAME"},
	} {
		r := fw.run(tc.args...)
		wantExit(t, r, exitBadInput, strings.Join(tc.args, " "))
		if !strings.Contains(r.stderr, tc.say) {
			t.Errorf("%v: stderr should say %q:\n%s", tc.args, tc.say, r.stderr)
		}
	}
}
