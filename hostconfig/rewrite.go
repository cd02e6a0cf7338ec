package hostconfig

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tailscale/hujson"
)

// Wrap is what a wrapped entry runs: Self proxy --db Journal [--policy
// Policy] -- the entry's own command and args.
type Wrap struct {
	Self    string   // absolute path of the mcp-confirm binary
	Journal string   // absolute path of the journal
	Policy  string   // absolute path of the policy file; "" for none
	Exclude []string // server names to leave alone
}

// proxyArgs are the words put before the entry's own command.
func (w Wrap) proxyArgs() []string {
	return append(w.proxyFlags(), "--")
}

// proxyFlags are the proxy's words common to stdio and remote entries.
func (w Wrap) proxyFlags() []string {
	args := []string{"proxy", "--db", w.Journal}
	if w.Policy != "" {
		args = append(args, "--policy", w.Policy)
	}
	return args
}

// Action is what init does, or did, with one server entry.
type Action int

const (
	Wrapped        Action = iota // rewritten to start through the proxy
	AlreadyWrapped               // its command is already mcp-confirm proxy
	Remote                       // a url entry proxy --url cannot reach (SSE, WebSocket, OAuth)
	Disabled                     // the host does not start it
	Excluded                     // named in --exclude
	Invalid                      // not a stdio entry init can read
)

// Reasons, as shown after "skipped: ".
const (
	ReasonSSE      = "remote entry over SSE or WebSocket; proxy --url speaks Streamable HTTP only"
	ReasonOAuth    = "remote entry with auth settings init cannot read; wrap it by hand (proxy --url, after mcp-confirm login --url)"
	ReasonWrapped  = "already goes through mcp-confirm proxy"
	ReasonDisabled = "disabled in the host's config"
	ReasonExcluded = "excluded (--exclude)"
)

// Entry is one server entry of a file and what init does with it.
type Entry struct {
	Name   string
	At     string // where its map is, e.g. "mcpServers", "projects./src/app.mcpServers"
	Action Action
	Reason string // why it is left alone ("" when Wrapped)
	// What the wrapped entry uses (Wrapped, AlreadyWrapped); Policy is ""
	// when it names none.
	Journal, Policy string
	// URL is the remote server a wrapped url entry now reaches through
	// proxy --url, as written in the file ("" for a stdio entry).
	URL string
	// LoginArgs, for a wrapped entry whose host did the OAuth login itself,
	// are mcp-confirm's arguments for that login, to run once before the
	// host starts the entry ("login", "--url", URL, and the entry's client
	// id and callback port); the proxy cannot open a browser for its host.
	LoginArgs []string

	authKeys []string // the members of the host's own OAuth settings, dropped when wrapped
}

// Rewrite returns src with every stdio server entry of loc wrapped by w,
// and what was done with each entry. Only the command and args values of
// wrapped entries change (args is added after command when missing); every
// other byte, comments and formatting included, is kept. out equals src
// when there is nothing to wrap. A file that cannot be read as JSON with
// comments, or whose servers are not an object, is a *ParseError.
func Rewrite(src []byte, loc Location, w Wrap) (out []byte, entries []Entry, err error) {
	root, err := parse(loc.Path, src)
	if err != nil {
		return nil, nil, err
	}
	if root.Value == nil {
		return src, nil, nil
	}
	top := jsonObject{root.Value.(*hujson.Object)}
	changed := false
	for _, where := range loc.Servers {
		maps, err := resolve(loc.Path, src, top, where)
		if err != nil {
			return nil, nil, err
		}
		for _, m := range maps {
			var disabled []string
			if loc.disabled != nil {
				disabled = loc.disabled(top, m.at)
			}
			for i := range m.obj.o.Members {
				mem := &m.obj.o.Members[i]
				e, urlKey := classify(mem, loc.Host, w, disabled)
				e.At = strings.Join(m.at, ".")
				if e.Action == Wrapped {
					if urlKey != "" {
						o := mem.Value.Value.(*hujson.Object)
						wrapRemote(o, w, urlKey)
						for _, k := range e.authKeys {
							// The host would try its own login on what is now a
							// stdio entry; mcp-confirm login does it instead.
							removeMember(o, jsonObject{o}.member(k))
						}
					} else {
						wrapEntry(mem.Value.Value.(*hujson.Object), w)
					}
					e.Journal, e.Policy = w.Journal, w.Policy
					changed = true
				}
				entries = append(entries, e)
			}
		}
	}
	if !changed {
		return src, entries, nil
	}
	return root.Pack(), entries, nil
}

// serverMap is one object of server entries and its path in the file.
type serverMap struct {
	at  []string
	obj jsonObject
}

// resolve finds the server maps at path (with "*" for every member). An
// absent step means no servers there; a step that is not an object is an
// error, since the host would not read it either.
func resolve(file string, src []byte, top jsonObject, path []string) ([]serverMap, error) {
	cur := []serverMap{{obj: top}}
	for _, step := range path {
		var next []serverMap
		for _, c := range cur {
			var members []*hujson.ObjectMember
			if step == "*" {
				for i := range c.obj.o.Members {
					members = append(members, &c.obj.o.Members[i])
				}
			} else if m := c.obj.member(step); m != nil {
				members = append(members, m)
			}
			for _, m := range members {
				at := append(slices.Clone(c.at), memberName(*m))
				o, ok := m.Value.Value.(*hujson.Object)
				if !ok {
					if step == "*" {
						continue // a project entry of another shape: not ours to judge
					}
					return nil, shapeError(file, src, m.Value, strings.Join(at, ".")+" is "+kindName(m.Value.Value)+", not an object of servers")
				}
				next = append(next, serverMap{at: at, obj: jsonObject{o}})
			}
		}
		cur = next
	}
	return cur, nil
}

// classify decides what to do with one entry of host's file; urlKey is
// the member naming the server's URL when it is a remote entry to wrap.
func classify(mem *hujson.ObjectMember, host string, w Wrap, disabled []string) (e Entry, urlKey string) {
	e = Entry{Name: memberName(*mem)}
	o, ok := mem.Value.Value.(*hujson.Object)
	if !ok {
		e.Action, e.Reason = Invalid, "the entry is "+kindName(mem.Value.Value)+", not an object"
		return e, ""
	}
	entry := jsonObject{o}
	command, hasCommand := entry.str("command")
	args, argsOK := []string(nil), true
	if m := entry.member("args"); m != nil {
		args, argsOK = stringArray(m.Value.Value)
	}
	switch {
	case hasCommand && argsOK && isProxy(command, args, w.Self):
		e.Action, e.Reason = AlreadyWrapped, ReasonWrapped
		e.Journal, e.Policy = flagValue(args, "--db"), flagValue(args, "--policy")
		e.URL = flagValue(args, "--url")
		if n := flagValue(args, "--url-env"); e.URL == "" && n != "" {
			env, _ := entry.object("env")
			e.URL, _ = env.str(n)
		}
	case entry.isTrue("disabled") || slices.Contains(disabled, e.Name):
		e.Action, e.Reason = Disabled, ReasonDisabled
	case slices.Contains(w.Exclude, e.Name):
		e.Action, e.Reason = Excluded, ReasonExcluded
	case isRemote(entry):
		return classifyRemote(e, entry, host)
	case entry.member("command") == nil:
		e.Action, e.Reason = Invalid, "no command"
	case !hasCommand:
		e.Action, e.Reason = Invalid, "command is not a string"
	case !argsOK:
		e.Action, e.Reason = Invalid, "args is not a list of strings"
	default:
		e.Action = Wrapped
	}
	return e, ""
}

// classifyRemote decides what to do with an entry the host reaches over
// the network: a Streamable HTTP server with at most plain headers is
// wrapped in proxy --url; SSE, WebSocket and OAuth entries are left alone,
// since the proxy could not reach them as the host does.
func classifyRemote(e Entry, entry jsonObject, host string) (Entry, string) {
	t, _ := entry.str("type")
	t = strings.ToLower(t)
	urlKey := ""
	for _, k := range []string{"httpUrl", "serverUrl", "url"} {
		if entry.member(k) != nil {
			urlKey = k
			break
		}
	}
	switch {
	case t == "sse" || t == "ws" || t == "websocket":
		e.Action, e.Reason = Remote, ReasonSSE
	case host == "gemini-cli" && urlKey == "url" && t != "http":
		// Gemini CLI reads url as an SSE endpoint; httpUrl is its
		// Streamable HTTP.
		e.Action, e.Reason = Remote, ReasonSSE
	case entry.member("auth") != nil:
		e.Action, e.Reason = Remote, ReasonOAuth
	case entry.member("authProviderType") != nil && !strings.EqualFold(must(entry.str("authProviderType")), "dynamic_discovery"):
		// Gemini CLI's Google credentials and service accounts: not an
		// MCP OAuth login mcp-confirm can do.
		e.Action, e.Reason = Remote, "remote entry with authProviderType "+must(entry.str("authProviderType"))+"; mcp-confirm logs in only by the MCP authorization spec (dynamic_discovery)"
	case urlKey == "":
		e.Action, e.Reason = Invalid, "type "+t+" without a url"
	default:
		u, ok := entry.str(urlKey)
		if !ok {
			e.Action, e.Reason = Invalid, urlKey+" is not a string"
			break
		}
		if m := entry.member("headers"); m != nil {
			if _, ok := stringObject(m.Value.Value); !ok {
				e.Action, e.Reason = Invalid, "headers is not an object of strings"
				break
			}
		}
		var settings jsonObject
		if m := entry.member("oauth"); m != nil {
			o, ok := m.Value.Value.(*hujson.Object)
			if !ok {
				e.Action, e.Reason = Invalid, "oauth is not an object"
				break
			}
			settings, e.authKeys = jsonObject{o}, append(e.authKeys, "oauth")
		}
		if entry.member("authProviderType") != nil {
			e.authKeys = append(e.authKeys, "authProviderType")
		}
		if len(e.authKeys) > 0 {
			e.LoginArgs = loginArgs(u, settings)
		}
		e.Action, e.URL = Wrapped, u
		return e, urlKey
	}
	return e, ""
}

// loginArgs are mcp-confirm login's arguments for a remote entry whose
// host logged in itself: Claude Code's oauth.clientId and
// oauth.callbackPort, for an authorization server without dynamic
// registration. A clientSecret (kept by the host, not in the file) is
// asked for as a variable.
func loginArgs(u string, oauth jsonObject) []string {
	args := []string{"login", "--url", u}
	if id, ok := oauth.str("clientId"); ok && id != "" {
		args = append(args, "--client-id", id)
		if oauth.member("clientSecret") != nil {
			args = append(args, "--client-secret", "${CLIENT_SECRET}")
		}
	}
	if m := oauth.member("callbackPort"); m != nil {
		if lit, ok := m.Value.Value.(hujson.Literal); ok && lit.Kind() == '0' {
			if n, err := strconv.Atoi(string(lit)); err == nil && n > 0 && n < 65536 {
				args = append(args, "--callback-port", strconv.Itoa(n))
			}
		}
	}
	return args
}

// must is a lookup's value, "" when it failed.
func must(s string, _ bool) string { return s }

// isRemote: an entry the host reaches over the network (url in Claude,
// Cursor, VS Code; httpUrl in Gemini CLI; serverUrl in Windsurf; or a type
// saying so).
func isRemote(entry jsonObject) bool {
	for _, k := range []string{"url", "httpUrl", "serverUrl"} {
		if entry.member(k) != nil {
			return true
		}
	}
	t, _ := entry.str("type")
	switch strings.ToLower(t) {
	case "http", "sse", "streamable-http", "streamablehttp", "ws", "websocket":
		return true
	}
	return false
}

// isProxy: the entry already starts mcp-confirm proxy (any mcp-confirm
// binary, with global flags before or after the word proxy).
func isProxy(command string, args []string, self string) bool {
	if command != self && filepath.Base(command) != "mcp-confirm" {
		return false
	}
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "proxy" {
			return true
		}
	}
	return false
}

// flagValue is the value of --name in args before "--" ("--name V" or
// "--name=V").
func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == "--" {
			break
		}
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// wrapEntry makes o start through the proxy: command becomes w.Self and
// args gains, at its front, the proxy's words and the old command. The old
// command's literal is moved as written (escapes and all), and the existing
// args elements keep their comments and layout.
func wrapEntry(o *hujson.Object, w Wrap) {
	entry := jsonObject{o}
	cmdMember := entry.member("command")
	oldCommand := cmdMember.Value.Value
	cmdMember.Value.Value = hujson.String(w.Self)

	front := make([]hujson.Value, 0, 8)
	for _, a := range w.proxyArgs() {
		front = append(front, hujson.Value{Value: hujson.String(a)})
	}
	front = append(front, hujson.Value{Value: oldCommand})

	if m := entry.member("args"); m != nil {
		prependElements(m.Value.Value.(*hujson.Array), front)
		return
	}
	insertArgs(o, cmdMember, front)
}

// insertArgs adds "args": [front...] right after the command member, laid
// out like it.
func insertArgs(o *hujson.Object, cmdMember *hujson.ObjectMember, front []hujson.Value) {
	for i := range front {
		if i > 0 {
			front[i].BeforeExtra = hujson.Extra(" ")
		}
	}
	i := memberIndex(o, cmdMember)
	args := hujson.ObjectMember{
		Name:  hujson.Value{BeforeExtra: layoutOf(cmdMember.Name.BeforeExtra, " "), Value: hujson.String("args")},
		Value: hujson.Value{BeforeExtra: layoutOf(cmdMember.Value.BeforeExtra, " "), Value: &hujson.Array{Elements: front}},
	}
	if i == len(o.Members)-1 {
		// command was last: args is last now, with command's trailing
		// comma if it had one.
		if cmdMember.Value.AfterExtra != nil {
			args.Value.AfterExtra = hujson.Extra{}
		}
		cmdMember.Value.AfterExtra = append(hujson.Extra{}, cmdMember.Value.AfterExtra...)
	}
	o.Members = slices.Insert(o.Members, i+1, args)
}

// HeaderEnvPrefix starts the names of the env variables a wrapped url
// entry's headers move to; the proxy reads each with --header-env.
const HeaderEnvPrefix = "MCP_CONFIRM_HEADER_"

// URLEnvName is the env variable a wrapped url entry's URL moves to when
// it may hold a key; the proxy reads it with --url-env.
const URLEnvName = "MCP_CONFIRM_URL"

// wrapRemote makes a url entry start proxy --url: the member at urlKey
// becomes "command" (the mcp-confirm binary) followed by args (the proxy's
// flags, --url with the URL's literal as written, and a --header-env for
// each header); each header moves into env as NAME = "Header: value", so
// a token stays out of the command line; a type member becomes "stdio".
// A URL that may hold a key (a query, a user name or password, a
// fragment: ?api_key=..., as several hosted servers take theirs) moves
// into env too, read with --url-env: the command line of a process is
// readable by every local user (ps), its environment is not.
// The host expands its own variables (${VAR}, ${env:VAR}, ${input:id}) in
// args and env as it did in url and headers.
func wrapRemote(o *hujson.Object, w Wrap, urlKey string) {
	entry := jsonObject{o}
	var envNames []string
	if hm := entry.member("headers"); hm != nil {
		envNames = headersToEnv(o, hm)
	}
	oldURL := entry.member(urlKey).Value.Value
	urlEnv := ""
	if lit, ok := literalString(oldURL); ok && urlMayHoldKey(lit) {
		urlEnv = addEnv(o, URLEnvName, oldURL) // before urlMember: it may move o.Members
	}
	urlMember := entry.member(urlKey)
	urlMember.Name.Value = hujson.String("command")
	urlMember.Value.Value = hujson.String(w.Self)

	var front []hujson.Value
	for _, a := range w.proxyFlags() {
		front = append(front, hujson.Value{Value: hujson.String(a)})
	}
	if urlEnv != "" {
		front = append(front, hujson.Value{Value: hujson.String("--url-env")}, hujson.Value{Value: hujson.String(urlEnv)})
	} else {
		front = append(front, hujson.Value{Value: hujson.String("--url")}, hujson.Value{Value: oldURL})
	}
	for _, n := range envNames {
		front = append(front, hujson.Value{Value: hujson.String("--header-env")}, hujson.Value{Value: hujson.String(n)})
	}
	insertArgs(o, urlMember, front)
	if t := entry.member("type"); t != nil {
		t.Value.Value = hujson.String("stdio")
	}
}

// urlMayHoldKey: u has a part that may be a credential: a query, a
// userinfo or a fragment, whatever they hold (it may be a host variable,
// ${KEY}, expanded only when the host starts the proxy). It is read off
// the characters that start them, since a URL written with the host's
// variables (${BASE:-https://h}/mcp) need not parse as one.
func urlMayHoldKey(u string) bool { return strings.ContainsAny(u, "?#@") }

// addEnv adds name (made unique among env's members) = value to the
// entry's env object, made after its last member if it has none, and
// returns the name given.
func addEnv(o *hujson.Object, name string, value hujson.ValueTrimmed) string {
	env, ok := jsonObject{o}.object("env")
	if !ok {
		env = jsonObject{&hujson.Object{}}
		appendMember(o, hujson.ObjectMember{Name: hujson.Value{Value: hujson.String("env")}, Value: hujson.Value{Value: env.o}})
	}
	taken := map[string]bool{}
	for _, m := range env.o.Members {
		taken[memberName(m)] = true
	}
	n := name
	for k := 2; taken[n]; k++ {
		n = fmt.Sprintf("%s_%d", name, k)
	}
	appendMember(env.o, hujson.ObjectMember{Name: hujson.Value{Value: hujson.String(n)}, Value: hujson.Value{Value: value}})
	return n
}

// appendMember puts m last in o, laid out as o's last member was (its
// line and indent, and a trailing comma if it had one); in an empty
// object, on o's line.
func appendMember(o *hujson.Object, m hujson.ObjectMember) {
	if len(o.Members) == 0 {
		m.Value.BeforeExtra = hujson.Extra(" ")
		o.Members = append(o.Members, m)
		return
	}
	last := &o.Members[len(o.Members)-1]
	m.Name.BeforeExtra = layoutOf(last.Name.BeforeExtra, " ")
	m.Value.BeforeExtra = layoutOf(last.Value.BeforeExtra, " ")
	if last.Value.AfterExtra != nil {
		m.Value.AfterExtra = hujson.Extra{} // the trailing comma stays last
	}
	o.Members = append(o.Members, m)
}

// headersToEnv turns the headers member into env variables: renamed to
// "env" in place when the entry has no env (its layout and comments kept),
// else its members join env's. It returns the variables' names in order.
func headersToEnv(o *hujson.Object, hm *hujson.ObjectMember) []string {
	entry := jsonObject{o}
	headers := hm.Value.Value.(*hujson.Object)
	taken := map[string]bool{}
	env, hasEnv := entry.object("env")
	if hasEnv {
		for _, m := range env.o.Members {
			taken[memberName(m)] = true
		}
	}
	var names []string
	for i := range headers.Members {
		m := &headers.Members[i]
		header := memberName(*m)
		value, _ := literalString(m.Value.Value)
		n := headerEnvName(header, taken)
		names = append(names, n)
		m.Name.Value = hujson.String(n)
		m.Value.Value = hujson.String(header + ": " + value)
	}
	if !hasEnv {
		hm.Name.Value = hujson.String("env")
		return names
	}
	// Put the headers first in env (so env's own last member, and its
	// trailing comma, stay last), then drop the headers member.
	moved := headers.Members
	if len(env.o.Members) > 0 {
		first := &env.o.Members[0].Name
		for i := range moved {
			moved[i].Name.BeforeExtra = layoutOf(first.BeforeExtra, " ")
			if moved[i].Value.AfterExtra == nil {
				moved[i].Value.AfterExtra = hujson.Extra{}
			}
		}
		if len(moved) > 0 && len(first.BeforeExtra) == 0 {
			moved[0].Name.BeforeExtra, first.BeforeExtra = nil, hujson.Extra(" ")
		}
	} else if len(moved) > 0 {
		moved[len(moved)-1].Value.AfterExtra = nil
	}
	env.o.Members = append(slices.Clone(moved), env.o.Members...)
	removeMember(o, hm)
	return names
}

// memberIndex is the index of m, which points into o.Members.
func memberIndex(o *hujson.Object, m *hujson.ObjectMember) int {
	for i := range o.Members {
		if &o.Members[i] == m {
			return i
		}
	}
	return -1
}

// removeMember drops m from o, keeping any comments before it and o's
// trailing comma as it was.
func removeMember(o *hujson.Object, m *hujson.ObjectMember) {
	i := memberIndex(o, m)
	// m points into o.Members, which Delete shifts: copy what is needed.
	before := append(hujson.Extra{}, m.Name.BeforeExtra...)
	hasComments := len(bytes.TrimSpace(before)) > 0
	last := i == len(o.Members)-1
	trailing := m.Value.AfterExtra != nil
	o.Members = slices.Delete(o.Members, i, i+1)
	switch {
	case !last && hasComments:
		next := &o.Members[i].Name
		next.BeforeExtra = append(before, bytes.TrimLeft(next.BeforeExtra, " \t\r\n")...)
	case last && len(o.Members) > 0:
		prev := &o.Members[len(o.Members)-1].Value
		if !trailing {
			prev.AfterExtra = nil
		}
		if hasComments {
			o.AfterExtra = append(before, o.AfterExtra...)
		}
	}
}

// headerEnvName is MCP_CONFIRM_HEADER_ and the header's name in upper case
// with every other byte an underscore, made unique among taken.
func headerEnvName(header string, taken map[string]bool) string {
	b := []byte(strings.ToUpper(header))
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	base := HeaderEnvPrefix + string(b)
	n := base
	for k := 2; taken[n]; k++ {
		n = fmt.Sprintf("%s_%d", base, k)
	}
	taken[n] = true
	return n
}

// prependElements puts front before arr's elements, on a line of their own
// when the array is laid out one element a line, else inline.
func prependElements(arr *hujson.Array, front []hujson.Value) {
	if len(arr.Elements) == 0 {
		for i := range front {
			if i > 0 {
				front[i].BeforeExtra = hujson.Extra(" ")
			}
		}
		arr.Elements = front
		return
	}
	first := arr.Elements[0].BeforeExtra
	if nl := bytes.LastIndexByte(first, '\n'); nl >= 0 && isBlank(first[nl+1:]) {
		front[0].BeforeExtra = append(hujson.Extra("\n"), first[nl+1:]...)
	} else {
		lead := len(first) - len(bytes.TrimLeft(first, " \t"))
		front[0].BeforeExtra = append(hujson.Extra{}, first[:lead]...)
		arr.Elements[0].BeforeExtra = append(hujson.Extra(" "), first[lead:]...)
	}
	for i := 1; i < len(front); i++ {
		front[i].BeforeExtra = hujson.Extra(" ")
	}
	arr.Elements = append(front, arr.Elements...)
}

// layoutOf is the whitespace that puts a new member where extra puts the one
// it belongs to: a newline and the same indent, or else def; comments in
// extra stay with their member.
func layoutOf(extra hujson.Extra, def string) hujson.Extra {
	if nl := bytes.LastIndexByte(extra, '\n'); nl >= 0 && isBlank(extra[nl+1:]) {
		return append(hujson.Extra("\n"), extra[nl+1:]...)
	}
	if isBlank(extra) && len(extra) > 0 {
		return append(hujson.Extra{}, extra...)
	}
	return hujson.Extra(def)
}

func isBlank(b []byte) bool { return len(bytes.Trim(b, " \t\r")) == 0 }
