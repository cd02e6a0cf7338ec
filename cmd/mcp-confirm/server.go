package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/notify"
	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/termtext"
)

// serverChoice is the server a command talks to, and how it was reached
// (stored with every call it makes, SPEC §9).
type serverChoice struct {
	spec     mcpclient.ServerSpec
	identity guard.ServerIdentity
	builtin  bool              // the built-in demo server
	given    bool              // named on this command line (-- CMD, or --config/--server)
	logins   *mcpclient.Logins // stored OAuth logins, for a remote server (withLogins)
	// observe, when set, is told of every call the engine's guard runs
	// (the console's --metrics: metrics.Metrics.ObserveCall).
	observe func(guard.Observation)
}

// serverSpec picks the server: -- CMD ARGS, or --config F --server N, or
// the built-in demo server (this binary's demo-server command, keeping its
// orders in demoDB so successive commands see the same orders).
func serverSpec(e *env, g *globalOpts, demoDB string) (serverChoice, error) {
	ways := 0
	for _, given := range []bool{len(e.serverCmd) > 0, g.config != "" || g.server != "", g.url != ""} {
		if given {
			ways++
		}
	}
	switch {
	case ways > 1:
		return serverChoice{}, errors.New("the server is given more than one way; give one, not both: after --, with --config and --server, or with --url")
	case g.url != "":
		if err := checkURL(g.url); err != nil {
			return serverChoice{}, err
		}
		return serverChoice{spec: mcpclient.ServerSpec{URL: g.url}, identity: guard.RemoteIdentity(g.url), given: true}, nil
	case len(e.serverCmd) > 0:
		dir, _ := os.Getwd()
		spec := mcpclient.ServerSpec{Command: e.serverCmd[0], Args: e.serverCmd[1:]}
		id := guard.ServerIdentity{Command: spec.Command, Args: spec.Args, Dir: dir}
		return serverChoice{spec: spec, identity: id, given: true}, nil
	case g.config != "" && g.server == "":
		return serverChoice{}, errors.New("--config needs --server NAME to say which server in it")
	case g.server != "" && g.config == "":
		return serverChoice{}, errors.New("--server needs --config FILE")
	case g.config != "":
		return configChoice(g.config, g.server)
	}
	return builtinDemo(demoDB)
}

// configChoice is server name of the host config file path, as a call
// made on it records it: the console over all of a file's servers makes
// each one's calls as 'call --config F --server N' would.
func configChoice(path, name string) (serverChoice, error) {
	spec, err := mcpclient.LoadConfig(path, name)
	if err != nil {
		return serverChoice{}, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return serverChoice{}, err
	}
	return serverChoice{spec: spec, identity: guard.ServerIdentity{Config: abs, Server: name}, given: true}, nil
}

func builtinDemo(demoDB string) (serverChoice, error) {
	self, err := os.Executable()
	if err != nil {
		return serverChoice{}, fmt.Errorf("find this program to run the demo server: %w", err)
	}
	if abs, err := filepath.Abs(demoDB); err == nil {
		demoDB = abs
	}
	return serverChoice{
		spec:     mcpclient.ServerSpec{Command: self, Args: []string{"demo-server", "--db", demoDB}},
		identity: guard.ServerIdentity{Builtin: guard.BuiltinDemo, DemoDB: demoDB},
		builtin:  true,
	}, nil
}

// callServer is the server a call was made on, from its stored identity:
// query and retry go there when no server is named (SPEC §9). A call whose
// identity was never recorded has no server to fall back to: the built-in
// demo would be another server with other orders.
func callServer(c pending.Call) (serverChoice, error) {
	id, ok := guard.ParseServerIdentity(c.ServerIdentity)
	if !ok {
		return serverChoice{}, fmt.Errorf("call %d was recorded without the way its server was reached (by an older mcp-confirm); "+
			"name its server (%q) with -- COMMAND or --config FILE --server NAME", c.ID, c.Server)
	}
	switch {
	case id.Builtin != "":
		return builtinDemo(id.DemoDB)
	case id.Config != "":
		spec, err := mcpclient.LoadConfig(id.Config, id.Server)
		if err != nil {
			return serverChoice{}, fmt.Errorf("call %d was made on %s, which cannot be read now: %w", c.ID, id, err)
		}
		return serverChoice{spec: spec, identity: id}, nil
	}
	if id.HidesURL() {
		// Its key was masked when it was journaled: the URL can no longer
		// be connected to, and must be given again (it is checked against
		// the recorded fingerprint before anything is sent).
		return serverChoice{}, fmt.Errorf("call %d was made on %s, whose key the journal does not keep; "+
			"give its URL again with --url (or --url-env NAME)", c.ID, id)
	}
	if id.URL != "" {
		return serverChoice{spec: mcpclient.ServerSpec{URL: id.URL}, identity: id}, nil
	}
	spec := mcpclient.ServerSpec{Command: id.Command, Args: id.Args, Dir: id.Dir}
	return serverChoice{spec: spec, identity: id}, nil
}

// checkURL refuses what cannot be a Streamable HTTP endpoint.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--url %q is not an http:// or https:// URL with a host", raw)
	}
	return nil
}

// addHeaders adds --header 'Name: value' flags, ${VAR} read from the
// environment, to a remote server's spec, over the config's own headers.
// It runs once the server is resolved, so 'retry ID --header ...' reaches
// the call's recorded URL with a fresh token.
func addHeaders(spec *mcpclient.ServerSpec, flags, envNames []string) error {
	if len(flags) == 0 && len(envNames) == 0 {
		return nil
	}
	if spec.URL == "" {
		return errors.New("--header is for a remote server (--url, or a url entry in --config); this server runs over stdio")
	}
	if spec.Headers == nil {
		spec.Headers = map[string]string{}
	}
	for _, f := range flags {
		if err := addHeader(spec, f); err != nil {
			return fmt.Errorf("--header %w", err)
		}
	}
	for _, n := range envNames {
		line, ok := os.LookupEnv(n)
		if !ok {
			return fmt.Errorf("--header-env %s: %s is not set in the environment", n, n)
		}
		// The line may hold a token: errors name the variable, not it.
		if err := addHeader(spec, line); err != nil {
			return fmt.Errorf("--header-env %s: its value is not 'Name: value'", n)
		}
	}
	return nil
}

// addHeader adds one 'Name: value' line, ${VAR} expanded.
func addHeader(spec *mcpclient.ServerSpec, f string) error {
	name, value, ok := strings.Cut(f, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t") {
		return fmt.Errorf("%q is not 'Name: value'", f)
	}
	v, err := mcpclient.ExpandHeader(strings.TrimSpace(value))
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	spec.Headers[name] = v
	return nil
}

// serverConn is what commands use of a server session: a stdio
// mcpclient.Client or a remote mcpclient.Remote.
type serverConn interface {
	guard.Server
	State() mcpclient.SessionState
	Close() error
}

// dial makes the session for spec: over HTTP when it has a URL.
func dial(spec mcpclient.ServerSpec, opts mcpclient.Options) (serverConn, error) {
	if spec.URL != "" {
		r, err := mcpclient.NewRemote(spec, opts)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	return mcpclient.New(spec, opts), nil
}

// engine is everything a command that talks to a server needs.
type engine struct {
	journal  *pending.Journal
	client   serverConn
	guard    *guard.Guard
	policy   *guard.Policy    // nil: none given
	notifier *notify.Notifier // the policy's [notify]; nil: none
}

// notifyWait bounds how long a command waits, at its end, for its
// notifications to be delivered (a command's 10 s, or a webhook's retries).
const notifyWait = 15 * time.Second

func (en *engine) close() {
	en.client.Close()
	en.waitNotified()
	en.journal.Close()
}

// waitNotified waits, bounded, for the notifications of this command.
func (en *engine) waitNotified() { waitNotified(en.notifier) }

// waitNotified waits, bounded, for n's deliveries under way; nil: none.
func waitNotified(n *notify.Notifier) {
	if n != nil {
		ctx, cancel := context.WithTimeout(context.Background(), notifyWait)
		n.Wait(ctx)
		cancel()
	}
}

// openEngine opens the journal, reads the policy and prepares the server
// session (started lazily by the first call). forCall, when not 0, is the
// call a query or retry is about: with no server named, its own server is
// used. Errors are printed; the returned code is the exit code when en is
// nil.
func openEngine(ctx context.Context, e *env, g *globalOpts, cmd string, forCall int64) (*engine, int) {
	policy, code := readPolicy(e, g, cmd)
	if code != exitOK {
		return nil, code
	}
	j, code := openJournal(ctx, e, g)
	if j == nil {
		return nil, code
	}
	return engineOn(ctx, e, g, j, policy, cmd, forCall)
}

// readPolicy reads --policy (nil: none given) and checks --timeout, the
// engine's flags that need no journal. Errors are printed; the code is the
// exit code then.
func readPolicy(e *env, g *globalOpts, cmd string) (*guard.Policy, int) {
	var policy *guard.Policy
	if g.policy != "" {
		p, err := guard.LoadPolicy(g.policy)
		if err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm %s: %v\nFix the policy file (see README, \"Policy\") and run again; nothing was sent.\n", cmd, err)
			return nil, exitBadInput
		}
		policy = p
	}
	if g.timeout < 0 {
		fmt.Fprintf(e.stderr, "mcp-confirm %s: --timeout must be positive\nGive a duration like 30s.\n", cmd)
		return nil, exitBadInput
	}
	return policy, exitOK
}

// engineOn is openEngine on a journal already open, which it closes when
// it fails.
func engineOn(ctx context.Context, e *env, g *globalOpts, j *pending.Journal, policy *guard.Policy, cmd string, forCall int64) (*engine, int) {
	demoDB := filepath.Join(journalDir(e, j), "demo-server.db")
	choice, err := serverSpec(e, g, demoDB)
	if err == nil && !choice.given && forCall != 0 {
		choice, err = ownServer(ctx, j, forCall)
	}
	if err == nil {
		err = addHeaders(&choice.spec, g.headers, g.headerEnv)
	}
	withLogins(e, &choice)
	if err != nil {
		j.Close()
		code := exitBadInput
		if errors.Is(err, pending.ErrNoSuchCall) {
			err = fmt.Errorf("no call %d in %s", forCall, j.Path())
		}
		fmt.Fprintf(e.stderr, "mcp-confirm %s: %v\nRun 'mcp-confirm --help' for server selection; nothing was sent.\n", cmd, err)
		return nil, code
	}
	choice.observe = g.observe
	en, err := serverEngine(j, policy, choice, g.timeout)
	if err != nil {
		j.Close()
		fmt.Fprintf(e.stderr, "mcp-confirm %s: %v\nNothing was sent.\n", cmd, err)
		return nil, exitBadInput
	}
	return en, exitOK
}

// serverEngine wires a session to one server, and a guard over it, on an
// open journal; the server starts on first use. Closing it closes j too.
// The error is a server that cannot be reached at all (a malformed URL);
// j is left open then.
func serverEngine(j *pending.Journal, policy *guard.Policy, choice serverChoice, timeout time.Duration) (*engine, error) {
	n := policyNotifier(policy)
	en, err := engineWith(j, policy, choice, timeout, n)
	if err == nil {
		tellRecovered(n, j)
	}
	return en, err
}

// engineWith is serverEngine telling n (nil: no one) of its calls: the
// engines of several servers on one journal share one notifier, so that
// the calls the journal's open recovered are told of once, not once a
// server. Its close is the caller's: closing its client, not j.
func engineWith(j *pending.Journal, policy *guard.Policy, choice serverChoice, timeout time.Duration, n *notify.Notifier) (*engine, error) {
	spec := choice.spec
	en := &engine{journal: j, policy: policy, notifier: n}
	var gd *guard.Guard
	var listTimeout time.Duration
	if policy != nil {
		listTimeout = policy.Defaults.ListTimeout.Duration
	}
	var err error
	en.client, err = dial(spec, mcpclient.Options{
		ClientVersion: version,
		ListTimeout:   listTimeout,
		OAuth:         choice.logins,
		OnLateResult:  func(lr mcpclient.LateResult) { gd.HandleLateResult(lr) },
		OnSession: func(n int) {
			_ = j.RecordEvent(context.Background(), pending.EventSessionStarted, 0, fmt.Sprintf("session %d", n))
		},
	})
	if err != nil {
		return nil, err
	}
	opts := guard.Options{Policy: policy, ServerAlias: spec.Name, Server: choice.identity, WriteTimeout: timeout, Observe: choice.observe}
	if n != nil {
		opts.Notify = n.Func(j.Path())
	}
	gd = guard.New(j, en.client, opts)
	en.guard = gd
	return en, nil
}

// policyNotifier is the policy's [notify]; nil without a policy.
func policyNotifier(policy *guard.Policy) *notify.Notifier {
	if policy == nil {
		return nil
	}
	return notify.New(policy.Notify, slog.New(slog.NewTextHandler(os.Stderr, nil)).With("from", "mcp-confirm notify"))
}

// tellRecovered tells n of the calls this open of j recovered (their
// process died sending them): they became unknown here, and are told of as
// any other. nil n: nothing.
func tellRecovered(n *notify.Notifier, j *pending.Journal) {
	n.Recovered(context.Background(), j, j.Recovered())
}

// ownServer is the server call id was made on.
func ownServer(ctx context.Context, j *pending.Journal, id int64) (serverChoice, error) {
	c, err := j.Get(ctx, id)
	if err != nil {
		return serverChoice{}, err
	}
	return callServer(c)
}

// exitFor maps a guard error (or a call's final state) to the exit code of
// SPEC §4, printing the message and what to do. Every command it suggests
// works when pasted as is: it names the journal and policy this one used.
func exitFor(e *env, g *globalOpts, cmd string, res guard.Result, err error) int {
	self := g.self()
	if err != nil {
		msg := termtext.Strip(mcpclient.MaskURLsIn(err.Error())) + cliHint(err) // it may quote the server's own error text
		var held *guard.HeldError
		var late *guard.LateSettledError
		var pendingKey *guard.KeyPendingError
		var notRecorded *guard.OutcomeNotRecordedError
		var retention *guard.KeyRetentionError
		switch {
		case errors.As(err, &notRecorded) && errors.Is(err, pending.ErrJournalReplaced):
			// The journal lost this process's rows and could not take them
			// back: the id may be another call's now; only the key is sure.
			fmt.Fprintf(e.stderr, "mcp-confirm %s: %s; treat it as unknown, it was NOT resent.\n"+
				"%sIts record may be missing from the journal: look for key %s in '%s list --json' (not for call %d, an id another call may have now); "+
				"stop every mcp-confirm process using the journal and check it ('%s verify').\n",
				cmd, oneLine(msg), serverSaid(notRecorded), notRecorded.Key, self, notRecorded.CallID, self)
			return exitUnknown
		case errors.As(err, &notRecorded):
			fmt.Fprintf(e.stderr, "mcp-confirm %s: %s; treat it as unknown, it was NOT resent.\n"+
				"%sFix the journal (disk space, permissions), then '%s list' shows it unknown; decide it with query, retry, mark or abandon.\n",
				cmd, oneLine(msg), serverSaid(notRecorded), self)
			return exitUnknown
		case errors.As(err, &late):
			fmt.Fprintf(e.stderr, "mcp-confirm %s: call %d with the same arguments settled late (%s); nothing was sent; --new makes another.\n"+
				"Its stored outcome is printed above; '%s ack %d' ends the hold once you have seen it.\n",
				cmd, late.CallID, late.State, self, late.CallID)
			if late.State == pending.StateFailed {
				return exitFailed
			}
			return exitOK
		case errors.As(err, &held):
			fmt.Fprintf(e.stderr, "mcp-confirm %s: held: call %d with the same tool and arguments is %s; nothing was sent.\n"+
				"Decide that call first ('%s show %d'), or pass --new if this is deliberately a second operation.\n",
				cmd, held.CallID, held.State, self, held.CallID)
			return exitHeld
		case errors.As(err, &pendingKey):
			fmt.Fprintf(e.stderr, "mcp-confirm %s: %s.\n%s\n", cmd, msg, decisionHint(self, pendingKey.CallID, pendingKey.State))
			return exitHeld
		case errors.Is(err, guard.ErrBadInput):
			fmt.Fprintf(e.stderr, "mcp-confirm %s: %s.\nNothing was sent.\n", cmd, trimClass(msg))
			return exitBadInput
		case errors.As(err, &retention):
			fmt.Fprintf(e.stderr, "mcp-confirm %s: %s; nothing was sent.\n"+
				"Check first with '%s query %d'; to resend it with the same key anyway, add --past-retention.\n",
				cmd, trimClass(msg), self, retention.CallID)
			return exitBadInput
		case errors.Is(err, guard.ErrNotAllowed):
			id := "ID"
			var decided *pending.DecidedError
			if errors.As(err, &decided) {
				id = strconv.FormatInt(decided.CallID, 10)
			} else if res.Call.ID != 0 {
				id = strconv.FormatInt(res.Call.ID, 10) // a hint the operator can run as printed
			}
			fmt.Fprintf(e.stderr, "mcp-confirm %s: %s.\nRun '%s show %s' to see the call's state and history.\n", cmd, trimClass(msg), self, id)
			return exitBadInput
		case errors.Is(err, guard.ErrHeld):
			fmt.Fprintf(e.stderr, "mcp-confirm %s: %s.\n", cmd, trimClass(msg))
			return exitHeld
		}
		hint := "Check that the server starts on its own (run its command by hand); nothing was sent."
		var refused *mcpclient.RefusedError
		var unreached *url.Error
		var start *mcpclient.StartError
		switch {
		case errors.Is(err, mcpclient.ErrAuthorization):
			// A refusal came to a request that was sent (a read): the
			// server's word, not a fact of ours.
			done := "nothing was sent"
			if errors.As(err, &refused) {
				done = "the server says it did not run it"
			}
			hint = fmt.Sprintf("The server wants authorization: run 'mcp-confirm login --url %s', or give --header 'Authorization: Bearer ${TOKEN}' (the token in $TOKEN); %s.",
				shellQuote(authURL(g, err)), done)
		case errors.Is(err, mcpclient.ErrLoginBusy):
			hint = "Another mcp-confirm process kept the login locked while refreshing its token: see what it is doing, or try again; nothing was sent."
		case errors.As(err, &refused):
			hint = "Check --url and --header; the server says it did not run it."
		case errors.Is(err, mcpclient.ErrListTimeout):
			// The message already says nothing was sent.
			hint = "If the server is only slow to list, raise list_timeout under [defaults] in the policy (--policy)."
		case errors.As(err, &unreached):
			// The URL of the error, not --url: 'retry ID' reaches the call's
			// recorded endpoint without one.
			hint = "Check that the server is up and reachable at " + mcpclient.MaskURL(unreached.URL) + "; nothing was sent."
		case strings.Contains(msg, "journal"):
			hint = "Check the journal file (disk space, permissions, --db); nothing was sent."
		case errors.As(err, &start) && (strings.HasPrefix(start.Server, "http://") || strings.HasPrefix(start.Server, "https://")):
			hint = "Check the server at " + mcpclient.MaskURL(start.Server) + " (its logs, --url, --header); nothing was sent."
		}
		fmt.Fprintf(e.stderr, "mcp-confirm %s: %s\n%s\n", cmd, oneLine(trimClass(msg)), hint)
		return exitUnavailable
	}
	if res.ReRecordedFrom != 0 {
		was := fmt.Sprintf("it was call %d, an id another call may have now", res.ReRecordedFrom)
		if res.ReRecordedFrom == res.Call.ID {
			was = "the id it had before"
		}
		fmt.Fprintf(e.stderr, "mcp-confirm %s: the journal's WAL file was removed or replaced while the call with key %s was out; "+
			"this process wrote its calls back (%s).\nThe call with key %s is call %d in the journal now (%s); "+
			"the journal says it is %s. Nothing was resent.\n",
			cmd, res.Key, pending.ReasonReRecorded, res.Key, res.Call.ID, was, res.State)
	}
	switch res.State {
	case pending.StateSucceeded, pending.StateApplied:
		return exitOK
	case pending.StateFailed:
		return exitFailed
	case pending.StateInFlight:
		// This process's attempt has ended, yet the journal has the call in
		// flight: another process took that attempt for lost and sent the
		// call again. Saying "unknown, NOT resent" here would be false.
		id, again := res.Call.ID, 0
		for _, a := range res.Call.Attempts {
			if a.EndedAt == nil {
				again = a.N
			}
		}
		if again > 0 {
			fmt.Fprintf(e.stderr, "mcp-confirm %s: call %d is in flight again: attempt %d was sent by another process after this one's attempt was taken for lost; "+
				"what this process got is kept on its own attempt.\nWait for attempt %d to end, then see the call with '%s show %d'.\n",
				cmd, id, again, again, self, id)
		} else {
			fmt.Fprintf(e.stderr, "mcp-confirm %s: the journal still has call %d in flight; see it with '%s show %d'.\n", cmd, id, self, id)
		}
		return exitUnknown
	case pending.StateUnknown:
		id := res.Call.ID
		if res.Refusal != nil && errors.Is(res.Refusal, mcpclient.ErrAuthorization) {
			// The server answered 401 to a call that was sent: unknown all
			// the same (it may have run it), but what to do first is to log
			// in. The exit code is unknown's: the journal holds a call to
			// settle, as after any other unknown outcome.
			fmt.Fprintf(e.stderr, "mcp-confirm %s: authorization needed: the outcome of call %d is unknown (%s); it was NOT resent.\n"+
				"Run 'mcp-confirm login --url %s' (or give --header 'Authorization: Bearer ${TOKEN}'); then: %s\n",
				cmd, id, termtext.Line(res.Call.Reason), shellQuote(authURL(g, res.Refusal)), decisionHint(self, id, res.State))
			return exitUnknown
		}
		fmt.Fprintf(e.stderr, "mcp-confirm %s: the outcome of call %d is unknown (%s); it was NOT resent.\n%s\n",
			cmd, id, termtext.Line(res.Call.Reason), decisionHint(self, id, res.State))
		return exitUnknown
	}
	return exitOK
}

// serverSaid tells what the server answered when the journal could not
// keep it (the answer itself is on stdout).
func serverSaid(e *guard.OutcomeNotRecordedError) string {
	switch e.Event {
	case pending.EventSucceeded:
		return "The server DID answer: it succeeded (the result is printed above), but the journal does not know it.\n"
	case pending.EventFailed:
		return "The server DID answer: it failed (printed above), but the journal does not know it.\n"
	}
	return ""
}

// oneLine puts a multi-line message on one line: a server that fails to
// start comes with its last stderr lines, one per line, and SPEC §4 wants
// every error in one or two lines.
func oneLine(msg string) string {
	var lines []string
	for _, l := range strings.Split(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) < 2 {
		return strings.Join(lines, "")
	}
	return lines[0] + " " + strings.Join(lines[1:], " | ")
}

// trimClass drops the leading "bad input: " style class from a message.
func trimClass(msg string) string {
	for _, p := range []string{"bad input: ", "not allowed: ", "unavailable: ", "held: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

// warnPolicy says on stderr which parts of the policy will not apply to
// this server's tools (guard.Policy.Check), so that a typo in a section
// name does not silently leave its redact, kind or query unused.
func warnPolicy(e *env, cmd string, policy *guard.Policy, tools []mcp.Tool) {
	for _, p := range policy.Check(tools) {
		fmt.Fprintf(e.stderr, "mcp-confirm %s: warning: policy %s\n", cmd, termtext.Line(p.String()))
	}
}

// authURL is the URL to log in to for an authorization error: the
// server's whose session did not start, else --url.
func authURL(g *globalOpts, err error) string {
	var start *mcpclient.StartError
	if errors.As(err, &start) && (strings.HasPrefix(start.Server, "http://") || strings.HasPrefix(start.Server, "https://")) {
		return start.Server
	}
	if g.url != "" {
		return mcpclient.MaskURL(g.url) // printed: its key stays out of logs
	}
	return "URL"
}
