package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/notify"
	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/termtext"
	"github.com/mcp-confirm/mcp-confirm/tui"
)

// serverSessions is one engine per distinct server on one journal and one
// policy, each made on first use, its server started on the engine's own
// first use after that: reconcile's queries and the console over several
// servers (issue 21). The journal is its owner's to close; close closes
// the sessions only.
type serverSessions struct {
	e        *env // for the stored OAuth logins of remote servers (withLogins); nil: none
	j        *pending.Journal
	policy   *guard.Policy
	timeout  time.Duration           // --timeout for every engine's writes; 0: the policy's clocks
	observe  func(guard.Observation) // told of every engine's calls (--metrics); nil: no one
	notifier *notify.Notifier        // the policy's [notify], one for all engines; nil: no policy
	mu       sync.Mutex              // guards byKey
	byKey    map[string]*serverSession
	// given are the servers named on the command line, by key: a call
	// made on one of them goes there, not to what its identity can
	// rebuild (nothing, for a URL whose key was masked).
	given map[string]serverChoice
}

// serverSession is one server's engine, or why it has none.
type serverSession struct {
	en  *engine
	err error // why there is no engine: the server cannot be reached
	// ready and readyErr are reconcile's one tools/list before its
	// queries fan out (reconciler.sessionFor).
	ready    sync.Once
	readyErr error
}

func newServerSessions(e *env, j *pending.Journal, policy *guard.Policy, timeout time.Duration, observe func(guard.Observation)) *serverSessions {
	s := &serverSessions{e: e, j: j, policy: policy, timeout: timeout, observe: observe,
		notifier: policyNotifier(policy), byKey: map[string]*serverSession{}}
	tellRecovered(s.notifier, j)
	return s
}

// serverKey is which server an identity names. Its folder is where to
// start it, not which server it is (ServerIdentity.Same): calls made on
// one command from two folders share a session.
func serverKey(id guard.ServerIdentity) string {
	id.Dir = ""
	return string(id.JSON())
}

// session is the session of the server key names, made from choose the
// first time it is asked for; nothing is started.
func (s *serverSessions) session(key string, choose func() (serverChoice, error)) *serverSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.byKey[key]
	if ss == nil {
		ss = &serverSession{}
		choice, err := choose()
		if err == nil {
			if s.e != nil {
				withLogins(s.e, &choice)
			}
			choice.observe = s.observe
			ss.en, err = engineWith(s.j, s.policy, choice, s.timeout, s.notifier)
		}
		ss.err = err
		s.byKey[key] = ss
	}
	return ss
}

// forCall is the session of the server c was made on, or why there is
// none (c was recorded without its server's identity, or that server can
// no longer be reached). Never another server's.
func (s *serverSessions) forCall(c pending.Call) (*serverSession, error) {
	id, ok := guard.ParseServerIdentity(c.ServerIdentity)
	if !ok {
		_, err := callServer(c) // says why, and what to do
		return nil, err
	}
	key := serverKey(id)
	ss := s.session(key, func() (serverChoice, error) {
		if choice, ok := s.given[key]; ok {
			return choice, nil
		}
		return callServer(c)
	})
	if ss.en == nil {
		return nil, ss.err
	}
	return ss, nil
}

// started is the engine of the server key names if one was made; it
// makes none.
func (s *serverSessions) started(key string) *engine {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.byKey[key]; ss != nil {
		return ss.en
	}
	return nil
}

// count is how many servers were asked for, reachable or not.
func (s *serverSessions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byKey)
}

// sessionsStarted is the sessions started so far with all the servers
// (--metrics' mcp_confirm_sessions_started_total).
func (s *serverSessions) sessionsStarted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, ss := range s.byKey {
		if ss.en != nil {
			n += ss.en.client.Session()
		}
	}
	return n
}

// close closes every session and waits, bounded, for the notifications
// under way; the journal stays open.
func (s *serverSessions) close() {
	s.mu.Lock()
	for _, ss := range s.byKey {
		if ss.en != nil {
			ss.en.client.Close()
		}
	}
	s.mu.Unlock()
	waitNotified(s.notifier)
}

// fleet is the console over several servers (issue 21, "One console, all
// servers"): every server of a host config, or every server a journal's
// calls were made on. As tui.Engine it routes each decision about a call
// to the server that call was made on, never another; a new call is made
// on a named server (tui.Servers.Engine), whose session starts then.
type fleet struct {
	journal  *pending.Journal
	policy   *guard.Policy
	sessions *serverSessions
	names    []string
	servers  map[string]fleetServer // by name
	// bare runs what needs no server: the journal-only decisions (as
	// 'mcp-confirm abandon' runs them, with no server named) and what the
	// policy alone answers. It has no server to send anything to.
	bare *guard.Guard
}

// fleetServer is one named server: the session it shares with the calls
// made on it, and how to reach it the first time.
type fleetServer struct {
	key    string
	choice serverChoice
}

// namedChoice is a server as the console lists it.
type namedChoice struct {
	name   string
	choice serverChoice
}

func newFleet(e *env, j *pending.Journal, policy *guard.Policy, timeout time.Duration, observe func(guard.Observation), named []namedChoice) *fleet {
	f := &fleet{journal: j, policy: policy, sessions: newServerSessions(e, j, policy, timeout, observe),
		servers: map[string]fleetServer{}, bare: guard.New(j, nil, guard.Options{Policy: policy})}
	for _, n := range named {
		f.names = append(f.names, n.name)
		f.servers[n.name] = fleetServer{key: serverKey(n.choice.identity), choice: n.choice}
		if f.sessions.given == nil {
			f.sessions.given = map[string]serverChoice{}
		}
		f.sessions.given[serverKey(n.choice.identity)] = n.choice
	}
	return f
}

// close closes the servers' sessions, then the journal.
func (f *fleet) close() {
	f.sessions.close()
	f.journal.Close()
}

// errPickServer: a new call over several servers goes to the server
// picked for it (tui.Servers.Engine), never to the router.
var errPickServer = fmt.Errorf("%w: pick the server first: this console is over several servers, and a new call or the tools list is for one of them", guard.ErrBadInput)

// guardFor is the guard of the server c was made on.
func (f *fleet) guardFor(c pending.Call) (*guard.Guard, error) {
	ss, err := f.sessions.forCall(c)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", guard.ErrUnavailable, err)
	}
	return ss.en.guard, nil
}

// guardOf is the guard of the server call id was made on, and the call.
func (f *fleet) guardOf(ctx context.Context, id int64) (*guard.Guard, pending.Call, error) {
	c, err := f.journal.Get(ctx, id)
	if err != nil {
		if errors.Is(err, pending.ErrNoSuchCall) {
			return nil, c, fmt.Errorf("%w: %w", guard.ErrBadInput, err)
		}
		return nil, c, fmt.Errorf("%w: journal: %w", guard.ErrUnavailable, err)
	}
	g, err := f.guardFor(c)
	return g, c, err
}

// The decisions that may send something go to the call's own server.

func (f *fleet) Retry(ctx context.Context, id int64, o guard.RetryOptions) (guard.Result, error) {
	g, c, err := f.guardOf(ctx, id)
	if err != nil {
		return guard.Result{Call: c, State: c.State, Key: c.Key}, err
	}
	return g.Retry(ctx, id, o)
}

func (f *fleet) Query(ctx context.Context, id int64, o guard.QueryOptions) (guard.Result, error) {
	g, c, err := f.guardOf(ctx, id)
	if err != nil {
		return guard.Result{Call: c, State: c.State, Key: c.Key}, err
	}
	return g.Query(ctx, id, o)
}

func (f *fleet) Compensate(ctx context.Context, id int64, o guard.CompensateOptions) (guard.Result, error) {
	g, c, err := f.guardOf(ctx, id)
	if err != nil {
		return guard.Result{Call: c, State: c.State, Key: c.Key}, err
	}
	return g.Compensate(ctx, id, o)
}

// Reconcile says "no query configured" without starting any server, as
// reconcile does, and a call whose server cannot be reached is a failed
// query with the reason.
func (f *fleet) Reconcile(ctx context.Context, c pending.Call, o guard.ReconcileOptions) guard.Reconciled {
	if !hasQuery(f.policy, c.Tool) {
		return noQuery(c)
	}
	g, err := f.guardFor(c)
	if err != nil {
		return guard.Reconciled{Call: c, Finding: guard.FindingQueryFailed, Err: err,
			Evidence: oneLine(termtext.Strip(trimClass(err.Error())))}
	}
	return g.Reconcile(ctx, c, o)
}

// The decisions that only write to the journal, and what the policy alone
// answers, need no server: none is started for them, and a call recorded
// without its server's identity can still be abandoned or marked.

func (f *fleet) Abandon(ctx context.Context, id int64, note string) error {
	return f.bare.Abandon(ctx, id, note)
}

func (f *fleet) MarkApplied(ctx context.Context, id int64, note string) error {
	return f.bare.MarkApplied(ctx, id, note)
}

func (f *fleet) Note(ctx context.Context, id int64, note string) error {
	return f.bare.Note(ctx, id, note)
}

func (f *fleet) Ack(ctx context.Context, id int64, note string) error {
	return f.bare.Ack(ctx, id, note)
}

func (f *fleet) AcceptFound(ctx context.Context, id int64, note string) (pending.Call, string, error) {
	return f.bare.AcceptFound(ctx, id, note)
}

func (f *fleet) CompensationPreview(c pending.Call) (string, map[string]any, error) {
	return f.bare.CompensationPreview(c)
}

func (f *fleet) Classify(t mcp.Tool) (pending.Kind, pending.KindSource) { return f.bare.Classify(t) }

func (f *fleet) KeyArg(t mcp.Tool) string { return f.bare.KeyArg(t) }

func (f *fleet) Call(context.Context, guard.Request) (guard.Result, error) {
	return guard.Result{}, errPickServer
}

func (f *fleet) ListTools(context.Context) ([]mcp.Tool, error) { return nil, errPickServer }

// ToolsOfCall lists the tools of the server c was made on, reached by its
// recorded identity as its retry would be (tui.CallTools): what its
// dialogs judge a retry's safety by, never a same-named server's.
func (f *fleet) ToolsOfCall(ctx context.Context, c pending.Call) ([]mcp.Tool, error) {
	g, err := f.guardFor(c)
	if err != nil {
		return nil, err
	}
	return g.ListTools(ctx)
}

// Names are the servers a new call can be made on, in the order shown.
func (f *fleet) Names() []string { return slices.Clone(f.names) }

// Engine is the named server's: its tools and new calls go to it, its
// session made and started on that first use; decisions about existing
// calls still go each to its own server. nil for a name not listed.
func (f *fleet) Engine(name string) tui.Engine {
	if _, ok := f.servers[name]; !ok {
		return nil
	}
	return namedServer{fleet: f, name: name}
}

// Status is the named server's session, or, before its first use, one
// that says it is not started; asking starts nothing.
func (f *fleet) Status(name string) tui.ServerStatus {
	s, ok := f.servers[name]
	if !ok {
		return nil
	}
	if en := f.sessions.started(s.key); en != nil {
		return en.client
	}
	return notStarted(name)
}

// sessionsStarted is the sessions started with all servers (--metrics).
func (f *fleet) sessionsStarted() int { return f.sessions.sessionsStarted() }

// engineOf is the named server's engine, made on first use.
func (f *fleet) engineOf(name string) (*engine, error) {
	s := f.servers[name]
	ss := f.sessions.session(s.key, func() (serverChoice, error) { return s.choice, nil })
	if ss.en == nil {
		return nil, fmt.Errorf("%w: server %s: %w", guard.ErrUnavailable, name, ss.err)
	}
	return ss.en, nil
}

// namedServer is one server of a fleet, for its tools and new calls.
type namedServer struct {
	*fleet
	name string
}

func (s namedServer) ListTools(ctx context.Context) ([]mcp.Tool, error) {
	en, err := s.engineOf(s.name)
	if err != nil {
		return nil, err
	}
	return en.guard.ListTools(ctx)
}

func (s namedServer) Call(ctx context.Context, req guard.Request) (guard.Result, error) {
	en, err := s.engineOf(s.name)
	if err != nil {
		return guard.Result{}, err
	}
	return en.guard.Call(ctx, req)
}

// notStarted is the status of a server whose session was never made.
type notStarted string

func (n notStarted) ServerInfo() mcpclient.ServerInfo { return mcpclient.ServerInfo{Name: string(n)} }
func (notStarted) Session() int                       { return 0 }
func (notStarted) State() mcpclient.SessionState      { return mcpclient.StateNew }

// allServers: the console was given no one server (not after --, not
// with --server or --url), so it is over several: those of --config, or
// those the journal's calls were made on.
func allServers(e *env, g *globalOpts) bool {
	return len(e.serverCmd) == 0 && g.server == "" && g.url == ""
}

// openFleet opens the console over several servers: every server of
// --config, or every server the journal's calls were made on. A journal
// with none is today's console on the built-in demo server beside it: en
// then, not the fleet. Errors are printed; the code is the exit code when
// both are nil.
func openFleet(ctx context.Context, e *env, g *globalOpts) (*fleet, *engine, int) {
	const cmd = "console"
	if len(g.headers) > 0 || len(g.headerEnv) > 0 {
		fmt.Fprintf(e.stderr, "mcp-confirm %s: --header is for one remote server; a console over several takes each one's headers from its config entry.\n"+
			"Name one server with --url or --config FILE --server NAME to give it headers; nothing was sent.\n", cmd)
		return nil, nil, exitBadInput
	}
	policy, code := readPolicy(e, g, cmd)
	if code != exitOK {
		return nil, nil, code
	}
	var named []namedChoice
	if g.config != "" {
		var err error
		if named, err = configServers(e, g.config); err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm %s: %v\nFix the config file, or name one server in it with --server NAME; nothing was sent.\n", cmd, err)
			return nil, nil, exitBadInput
		}
	}
	j, code := openJournal(ctx, e, g)
	if j == nil {
		return nil, nil, code
	}
	if g.config == "" {
		var err error
		if named, err = journalServers(ctx, j); err != nil {
			j.Close()
			fmt.Fprintf(e.stderr, "mcp-confirm %s: cannot read the servers of the journal's calls: %v\nCheck the journal file (--db); nothing was sent.\n", cmd, err)
			return nil, nil, exitUnavailable
		}
		if len(named) == 0 {
			en, code := engineOn(ctx, e, g, j, policy, cmd, 0)
			return nil, en, code
		}
	}
	return newFleet(e, j, policy, g.timeout, g.observe, named), nil, exitOK
}

// configServers are the servers of a host config file, each as
// 'call --config F --server N' reaches it. One that cannot be used as
// written is left out, with a line on stderr saying why; none left is an
// error.
func configServers(e *env, path string) ([]namedChoice, error) {
	names, err := mcpclient.ConfigServers(path)
	if err != nil {
		return nil, err
	}
	var out []namedChoice
	for _, n := range names {
		choice, err := configChoice(path, n)
		if err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm console: server %s is left out: %s\n", termtext.Name(n), oneLine(termtext.Strip(err.Error())))
			continue
		}
		out = append(out, namedChoice{name: n, choice: choice})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s names no server the console can use", path)
	}
	return out, nil
}

// journalServers are the servers the journal's calls were made on, those
// that can be reached again from their recorded identity, each named by
// its name in the host config, else the name it declared, made unique
// (" (2)"). Calls recorded without an identity name no server.
func journalServers(ctx context.Context, j *pending.Journal) ([]namedChoice, error) {
	rows, err := j.Servers(ctx) // one grouped read, by identity
	if err != nil {
		return nil, err
	}
	type seen struct {
		call  pending.Call // enough of one for callServer
		alias string
	}
	// Identities that differ only in how they are written (serverKey)
	// are one server.
	var servers []*seen
	byKey := map[string]*seen{}
	for _, r := range rows {
		id, ok := guard.ParseServerIdentity(r.ServerIdentity)
		if !ok {
			continue
		}
		k := serverKey(id)
		s := byKey[k]
		if s == nil {
			s = &seen{call: pending.Call{Server: r.Server, ServerIdentity: r.ServerIdentity}}
			byKey[k] = s
			servers = append(servers, s)
		}
		if s.alias == "" {
			s.alias = r.ServerAlias
		}
		if s.call.Server == "" {
			s.call.Server = r.Server
		}
	}
	var out []namedChoice
	for _, s := range servers {
		choice, err := callServer(s.call)
		if err != nil {
			continue // its calls still show; a query of one says why
		}
		name := s.alias
		if name == "" {
			name = s.call.Server
		}
		if name == "" {
			name = choice.identity.String()
		}
		out = append(out, namedChoice{name: termtext.Name(name), choice: choice})
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].name < out[b].name })
	taken := map[string]bool{}
	for i := range out {
		base := out[i].name
		for n := 2; taken[out[i].name]; n++ {
			out[i].name = fmt.Sprintf("%s (%d)", base, n)
		}
		taken[out[i].name] = true
	}
	return out, nil
}

// hasQuery: the policy names a query_tool for tool.
func hasQuery(policy *guard.Policy, tool string) bool {
	return policy != nil && policy.Tools[tool].QueryTool != ""
}

// noQuery is the finding for a call whose tool has no query_tool, said
// without starting its server.
func noQuery(c pending.Call) guard.Reconciled {
	return guard.Reconciled{Call: c, Finding: guard.FindingNoQuery,
		Evidence: "no query_tool for " + termtext.Name(c.Tool) + " in the policy"}
}

var _ interface {
	tui.Engine
	tui.Servers
} = (*fleet)(nil)

var _ tui.Engine = namedServer{}
