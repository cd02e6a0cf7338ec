package hostconfig

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aymanbagabas/go-udiff"
	"github.com/tailscale/hujson"
)

var update = flag.Bool("update", false, "rewrite testdata/want from the fixtures")

// The fixtures in testdata/home and testdata/project are config files of
// every host, in the shapes the hosts' documentation gives (VS Code's and
// Gemini CLI's with comments and trailing commas, as those hosts accept);
// testdata/want holds what init makes of each, byte for byte.
var testWrap = Wrap{
	Self:    "/usr/local/bin/mcp-confirm",
	Journal: "/home/me/.local/state/mcp-confirm/journal.db",
	Policy:  "/home/me/.local/state/mcp-confirm/policy.toml",
	Exclude: []string{"python-tool"},
}

func fixtureEnv(root string) Env {
	return Env{GOOS: "linux", Home: filepath.Join(root, "home"), Dir: filepath.Join(root, "project")}
}

// fixtureFiles are every host's locations that exist under root, with
// their path relative to root.
func fixtureFiles(t *testing.T, root string) (locs []Location, rels []string) {
	t.Helper()
	for _, h := range Hosts() {
		for _, l := range h.Files(fixtureEnv(root)) {
			if _, err := os.Stat(l.Path); err != nil {
				continue
			}
			rel, err := filepath.Rel(root, l.Path)
			if err != nil {
				t.Fatal(err)
			}
			locs, rels = append(locs, l), append(rels, rel)
		}
	}
	if len(locs) != 11 {
		t.Fatalf("found %d fixture files, want 11: %v", len(locs), rels)
	}
	return locs, rels
}

// TestRewriteGolden: each fixture, rewritten, is its golden file byte for
// byte; every entry is wrapped or left alone as expected, with its reason.
func TestRewriteGolden(t *testing.T) {
	locs, rels := fixtureFiles(t, "testdata")
	var got []string
	for i, l := range locs {
		src, err := os.ReadFile(l.Path)
		if err != nil {
			t.Fatal(err)
		}
		out, entries, err := Rewrite(src, l, testWrap)
		if err != nil {
			t.Fatalf("%s: %v", rels[i], err)
		}
		want := filepath.Join("testdata", "want", rels[i])
		if *update {
			os.MkdirAll(filepath.Dir(want), 0o755)
			if err := os.WriteFile(want, out, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		golden, err := os.ReadFile(want)
		if err != nil {
			t.Fatalf("%v (run go test ./hostconfig -run Golden -update)", err)
		}
		if !bytes.Equal(out, golden) {
			t.Errorf("%s: rewritten differs from %s:\n%s", rels[i], want, udiff.Unified(want, "got", string(golden), string(out)))
		}
		for _, e := range entries {
			got = append(got, l.Host+" "+e.At+"."+e.Name+": "+actionWord(e))
		}
	}
	want := []string{
		"claude-desktop mcpServers.filesystem: wrap",
		"claude-desktop mcpServers.github: wrap",
		"claude-desktop mcpServers.orders: skip " + ReasonWrapped,
		"claude-code mcpServers.shared-server: wrap",
		"claude-code mcpServers.local-tool: wrap",
		"claude-code mcpServers.api-server: wrap ${API_BASE_URL:-https://api.example.com}/mcp",
		"claude-code mcpServers.airtable: wrap",
		"claude-code projects./home/me/src/shop.mcpServers.postgres: wrap",
		"claude-code projects./home/me/src/shop.mcpServers.sentry: wrap https://mcp.sentry.dev/mcp",
		"claude-code projects./home/me/src/shop.mcpServers.stripe: skip " + ReasonDisabled,
		"cursor mcpServers.server-name: wrap",
		"cursor mcpServers.python-tool: skip " + ReasonExcluded,
		"cursor mcpServers.remote-server: wrap http://localhost:3000/mcp",
		"cursor mcpServers.db-tools: wrap",
		"vscode servers.Perplexity: wrap",
		"vscode servers.fetch: wrap",
		"vscode servers.github: wrap https://api.githubcopilot.com/mcp/",
		"vscode servers.myserver: wrap",
		"vscode servers.playwright: wrap",
		"vscode mcp.servers.memory: wrap",
		"windsurf mcpServers.github: wrap",
		"windsurf mcpServers.git: skip " + ReasonDisabled,
		"windsurf mcpServers.figma: wrap https://mcp.figma.com/mcp",
		"gemini-cli mcpServers.pythonTools: wrap",
		"gemini-cli mcpServers.nodeServer: wrap",
		"gemini-cli mcpServers.httpServer: wrap http://localhost:3000/mcp",
		"gemini-cli mcpServers.experimental-server: skip " + ReasonDisabled,
		"gemini-cli mcpServers.dockerizedServer: wrap",
	}
	if !slices.Equal(got, want) {
		t.Errorf("entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func actionWord(e Entry) string {
	if e.Action == Wrapped {
		return strings.TrimSpace("wrap " + e.URL)
	}
	return "skip " + e.Reason
}

// TestRewriteKeepsEverythingElse: outside the command and args of wrapped
// entries nothing changes. Comments come through byte for byte and in
// order; every line that changed held a command or args (or, in a wrapped
// url entry, its url, type or headers); and read as data, the rewritten
// file is the original with exactly those values changed in each wrapped
// entry (env, cwd, type, envFile, timeout ... as they were). A wrapped url
// entry runs proxy --url with its URL, and each header is in env under a
// variable its args name with --header-env. A file of plain JSON stays
// plain JSON.
func TestRewriteKeepsEverythingElse(t *testing.T) {
	locs, rels := fixtureFiles(t, "testdata")
	remotes := 0
	for i, l := range locs {
		t.Run(rels[i], func(t *testing.T) {
			src, _ := os.ReadFile(l.Path)
			out, entries, err := Rewrite(src, l, testWrap)
			if err != nil {
				t.Fatal(err)
			}
			if c, want := comments(t, out), comments(t, src); !slices.Equal(c, want) {
				t.Errorf("comments:\n%q\nwant\n%q", c, want)
			}
			before, after := decode(t, src), decode(t, out)
			changing := []string{"command", "args"}
			for _, e := range entries {
				if e.Action != Wrapped {
					continue
				}
				entry := lookupEntry(t, before, e)
				if e.URL == "" {
					args := []any{}
					for _, a := range testWrap.proxyArgs() {
						args = append(args, a)
					}
					args = append(args, entry["command"])
					if old, ok := entry["args"].([]any); ok {
						args = append(args, old...)
					}
					entry["command"], entry["args"] = testWrap.Self, args
					continue
				}
				remotes++
				changing = append(changing, "url", "httpUrl", "serverUrl", "type", "headers")
				checkRemote(t, e, entry, lookupEntry(t, after, e))
				headers, _ := entry["headers"].(map[string]any)
				for h := range headers {
					changing = append(changing, h)
				}
				// What checkRemote checked, made the same in before.
				for k, v := range lookupEntry(t, after, e) {
					entry[k] = v
				}
				for _, k := range []string{"url", "httpUrl", "serverUrl", "headers"} {
					delete(entry, k)
				}
			}
			changedLine := regexp.MustCompile(`"(` + strings.Join(changing, "|") + `)"`)
			for _, ed := range udiff.Lines(string(src), string(out)) {
				old := string(src[ed.Start:ed.End])
				for _, line := range strings.SplitAfter(old, "\n") {
					if strings.TrimSpace(line) != "" && !changedLine.MatchString(line) {
						t.Errorf("line %q changed; only command and args may", line)
					}
				}
			}
			if json.Valid(src) && !json.Valid(out) {
				t.Errorf("plain JSON in, not plain JSON out:\n%s", out)
			}
			if !reflect.DeepEqual(before, after) {
				t.Errorf("read as data, the rewritten file is not the original with command and args changed:\n got %v\nwant %v", after, before)
			}
		})
	}
	if remotes != 6 {
		t.Errorf("%d url entries wrapped, want 6", remotes)
	}
}

// checkRemote: a wrapped url entry (was, now) runs the proxy with --url
// and its URL, has no url or headers left, is of type stdio if it had a
// type, and its env holds "Header: value" for exactly its headers, under
// the names its --header-env flags give.
func checkRemote(t *testing.T, e Entry, was, now map[string]any) {
	t.Helper()
	if now["command"] != testWrap.Self {
		t.Errorf("%s: command %v", e.Name, now["command"])
	}
	var args []string
	for _, a := range now["args"].([]any) {
		args = append(args, a.(string))
	}
	wantFront := append(testWrap.proxyFlags(), "--url", e.URL)
	if !slices.Equal(args[:len(wantFront)], wantFront) {
		t.Errorf("%s: args %q, want them to start %q", e.Name, args, wantFront)
	}
	for _, k := range []string{"url", "httpUrl", "serverUrl", "headers"} {
		if _, ok := now[k]; ok {
			t.Errorf("%s: %s is still there", e.Name, k)
		}
	}
	if _, ok := was["type"]; ok && now["type"] != "stdio" {
		t.Errorf("%s: type %v, want stdio", e.Name, now["type"])
	}
	env, _ := now["env"].(map[string]any)
	var got []string
	rest := args[len(wantFront):]
	for i := 0; i+1 < len(rest); i += 2 {
		if rest[i] != "--header-env" || !strings.HasPrefix(rest[i+1], HeaderEnvPrefix) {
			t.Errorf("%s: args after the url %q, want --header-env %sNAME pairs", e.Name, rest, HeaderEnvPrefix)
			break
		}
		line, _ := env[rest[i+1]].(string)
		got = append(got, line)
	}
	var want []string
	headers, _ := was["headers"].(map[string]any)
	for h, v := range headers {
		want = append(want, h+": "+v.(string))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || len(rest)%2 != 0 {
		t.Errorf("%s: header lines in env %q, want %q", e.Name, got, want)
	}
}

// TestRewriteAgainChangesNothing: init run on its own output changes no
// byte and finds every entry it wrapped already wrapped, naming the journal
// and policy it uses.
func TestRewriteAgainChangesNothing(t *testing.T) {
	locs, rels := fixtureFiles(t, "testdata")
	for i, l := range locs {
		src, _ := os.ReadFile(l.Path)
		once, first, _ := Rewrite(src, l, testWrap)
		twice, second, err := Rewrite(once, l, testWrap)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(once, twice) {
			t.Errorf("%s: a second init changed it:\n%s", rels[i], udiff.Unified("once", "twice", string(once), string(twice)))
		}
		for j, e := range second {
			if first[j].Action == Wrapped && (e.Action != AlreadyWrapped || e.Journal != testWrap.Journal || e.Policy != testWrap.Policy) {
				t.Errorf("%s %s: second time %+v, want already wrapped with the journal and policy", rels[i], e.Name, e)
			}
			if e.Action == Wrapped {
				t.Errorf("%s %s: wrapped twice", rels[i], e.Name)
			}
		}
	}
}

func TestRewriteLayouts(t *testing.T) {
	loc := Location{Path: "x.json", Servers: [][]string{{"mcpServers"}}}
	w := Wrap{Self: "/bin/mcp-confirm", Journal: "/j.db"}
	for _, tc := range []struct{ name, in, want string }{
		{"inline args", `{"mcpServers":{"a":{"command":"npx","args":["-y","x"]}}}`,
			`{"mcpServers":{"a":{"command":"/bin/mcp-confirm","args":["proxy", "--db", "/j.db", "--", "npx", "-y","x"]}}}`},
		{"no args, command last", `{"mcpServers": {"a": {"command": "srv"}}}`,
			`{"mcpServers": {"a": {"command": "/bin/mcp-confirm", "args": ["proxy", "--db", "/j.db", "--", "srv"]}}}`},
		{"no args, command last with trailing comma", "{\"mcpServers\": {\"a\": {\n  \"command\": \"srv\", // the server\n}}}",
			"{\"mcpServers\": {\"a\": {\n  \"command\": \"/bin/mcp-confirm\",\n  \"args\": [\"proxy\", \"--db\", \"/j.db\", \"--\", \"srv\"], // the server\n}}}"},
		{"empty args", `{"mcpServers": {"a": {"command": "srv", "args": []}}}`,
			`{"mcpServers": {"a": {"command": "/bin/mcp-confirm", "args": ["proxy", "--db", "/j.db", "--", "srv"]}}}`},
		{"escaped command kept as written", `{"mcpServers": {"a": {"command": "C:\\tools\\srv\u00e9"}}}`,
			`{"mcpServers": {"a": {"command": "/bin/mcp-confirm", "args": ["proxy", "--db", "/j.db", "--", "C:\\tools\\srv\u00e9"]}}}`},
		{"url entry, headers and env, headers last", `{"mcpServers": {"r": {"url": "https://x/mcp", "env": {"A": "1"}, "headers": {"X-Key": "k"}}}}`,
			`{"mcpServers": {"r": {"command": "/bin/mcp-confirm", "args": ["proxy", "--db", "/j.db", "--url", "https://x/mcp", "--header-env", "MCP_CONFIRM_HEADER_X_KEY"], "env": {"MCP_CONFIRM_HEADER_X_KEY": "X-Key: k", "A": "1"}}}}`},
		{"url entry, headers with a comment before env, trailing comma", "{\"mcpServers\": {\"r\": {\n  \"url\": \"https://x/mcp\",\n  // the token\n  \"headers\": {\"Authorization\": \"Bearer t\"},\n  \"env\": {},\n}}}",
			"{\"mcpServers\": {\"r\": {\n  \"command\": \"/bin/mcp-confirm\",\n  \"args\": [\"proxy\", \"--db\", \"/j.db\", \"--url\", \"https://x/mcp\", \"--header-env\", \"MCP_CONFIRM_HEADER_AUTHORIZATION\"],\n  // the token\n  \"env\": {\"MCP_CONFIRM_HEADER_AUTHORIZATION\": \"Authorization: Bearer t\"},\n}}}"},
		{"url entry, headers whose names collide", `{"mcpServers": {"r": {"url": "u", "headers": {"x-a": "1", "X_A": "2"}}}}`,
			`{"mcpServers": {"r": {"command": "/bin/mcp-confirm", "args": ["proxy", "--db", "/j.db", "--url", "u", "--header-env", "MCP_CONFIRM_HEADER_X_A", "--header-env", "MCP_CONFIRM_HEADER_X_A_2"], "env": {"MCP_CONFIRM_HEADER_X_A": "x-a: 1", "MCP_CONFIRM_HEADER_X_A_2": "X_A: 2"}}}}`},
		{"url with a key in its query, no env", `{"mcpServers": {"r": {"url": "https://x/mcp?api_key=${KEY}"}}}`,
			`{"mcpServers": {"r": {"command": "/bin/mcp-confirm", "args": ["proxy", "--db", "/j.db", "--url-env", "MCP_CONFIRM_URL"], "env": {"MCP_CONFIRM_URL": "https://x/mcp?api_key=${KEY}"}}}}`},
		{"url with a password, headers and env, trailing comma", "{\"mcpServers\": {\"r\": {\n  \"url\": \"https://u:p@x/mcp\",\n  \"headers\": {\"X-Key\": \"k\"},\n  \"env\": {\"MCP_CONFIRM_URL\": \"taken\",},\n}}}",
			"{\"mcpServers\": {\"r\": {\n  \"command\": \"/bin/mcp-confirm\",\n  \"args\": [\"proxy\", \"--db\", \"/j.db\", \"--url-env\", \"MCP_CONFIRM_URL_2\", \"--header-env\", \"MCP_CONFIRM_HEADER_X_KEY\"],\n  \"env\": {\"MCP_CONFIRM_HEADER_X_KEY\": \"X-Key: k\", \"MCP_CONFIRM_URL\": \"taken\", \"MCP_CONFIRM_URL_2\": \"https://u:p@x/mcp\",},\n}}}"},
		{"url with a key, layout one member a line", "{\"mcpServers\": {\"r\": {\n  \"type\": \"http\",\n  \"url\": \"https://x/mcp?token=t\"\n}}}",
			"{\"mcpServers\": {\"r\": {\n  \"type\": \"stdio\",\n  \"command\": \"/bin/mcp-confirm\",\n  \"args\": [\"proxy\", \"--db\", \"/j.db\", \"--url-env\", \"MCP_CONFIRM_URL\"],\n  \"env\": {\"MCP_CONFIRM_URL\": \"https://x/mcp?token=t\"}\n}}}"},
		{"empty file", "  \n", "  \n"},
		{"no servers", `{"theme": "dark"}`, `{"theme": "dark"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := Rewrite([]byte(tc.in), loc, w)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Errorf("got\n%s\nwant\n%s", out, tc.want)
			}
		})
	}
}

// TestRewriteGeminiSSE: Gemini CLI's url is an SSE endpoint (httpUrl is
// its Streamable HTTP), so init leaves it alone.
func TestRewriteGeminiSSE(t *testing.T) {
	loc := Location{Path: "settings.json", Host: "gemini-cli", Servers: [][]string{{"mcpServers"}}}
	in := `{"mcpServers": {"s": {"url": "http://localhost:8080/sse"}}}`
	out, entries, err := Rewrite([]byte(in), loc, testWrap)
	if err != nil || string(out) != in || len(entries) != 1 || entries[0].Reason != ReasonSSE {
		t.Errorf("got %s %+v %v, want it untouched as SSE", out, entries, err)
	}
}

// TestRewriteLeavesAlone: entries init cannot read as stdio servers are
// reported, not touched.
func TestRewriteLeavesAlone(t *testing.T) {
	loc := Location{Path: "x.json", Servers: [][]string{{"mcpServers"}}}
	in := `{"mcpServers": {
  "s": "not an entry",
  "n": {"args": ["x"]},
  "c": {"command": 3},
  "a": {"command": "srv", "args": "--flag"},
  "w": {"command": "/opt/bin/mcp-confirm", "args": ["--db", "/other.db", "proxy", "--", "srv"]},
  "t": {"type": "sse", "command": "x"},
  "d": {"command": "x", "disabled": true},
  "o": {"url": "https://x/mcp", "auth": {"kind": "custom"}},
  "g": {"httpUrl": "https://x/mcp", "authProviderType": "google_credentials"},
  "h": {"url": "https://x/mcp", "headers": {"X-Retries": 3}},
  "u": {"url": 5},
  "e": {"type": "http"},
  "dr": {"url": "https://x/mcp", "disabled": true}
}}`
	out, entries, err := Rewrite([]byte(in), loc, testWrap)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Errorf("changed:\n%s", out)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name+": "+actionWord(e)+" "+e.Journal)
	}
	want := []string{
		"s: skip the entry is a string, not an object ",
		"n: skip no command ",
		"c: skip command is not a string ",
		"a: skip args is not a list of strings ",
		"w: skip " + ReasonWrapped + " /other.db",
		"t: skip " + ReasonSSE + " ",
		"d: skip " + ReasonDisabled + " ",
		"o: skip " + ReasonOAuth + " ",
		"g: skip remote entry with authProviderType google_credentials; mcp-confirm logs in only by the MCP authorization spec (dynamic_discovery) ",
		"h: skip headers is not an object of strings ",
		"u: skip url is not a string ",
		"e: skip type http without a url ",
		"dr: skip " + ReasonDisabled + " ",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRewriteMalformed: a file that is not JSON with comments, or whose
// servers are not an object, is a ParseError naming the line.
func TestRewriteMalformed(t *testing.T) {
	loc := Location{Path: "/h/.cursor/mcp.json", Servers: [][]string{{"mcpServers"}}}
	for _, tc := range []struct {
		in   string
		line int
		msg  string
	}{
		{"{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"\n  }\n", 5, "unexpected EOF"},
		{"{\n  \"mcpServers\": {\n    \"a\" {}\n  }\n}\n", 3, "invalid character '{'"},
		{"{\n  \"mcpServers\": [\n  ]\n}\n", 2, "mcpServers is an array, not an object of servers"},
		{"[1, 2]", 1, "not a JSON object"},
	} {
		_, _, err := Rewrite([]byte(tc.in), loc, testWrap)
		pe, ok := err.(*ParseError)
		if !ok {
			t.Fatalf("%q: err %v, want a ParseError", tc.in, err)
		}
		if pe.Path != loc.Path || pe.Line != tc.line || !strings.Contains(pe.Msg, tc.msg) {
			t.Errorf("%q: %v (line %d), want line %d and %q", tc.in, pe, pe.Line, tc.line, tc.msg)
		}
	}
}

// comments are every comment in a file, in order.
func comments(t *testing.T, src []byte) []string {
	t.Helper()
	v, err := hujson.Parse(src)
	if err != nil {
		if len(bytes.TrimSpace(src)) == 0 {
			return nil
		}
		t.Fatal(err)
	}
	var out []string
	var extra func(e hujson.Extra)
	extra = func(e hujson.Extra) {
		for _, c := range regexp.MustCompile(`(?s)//[^\n]*|/\*.*?\*/`).FindAll(e, -1) {
			out = append(out, string(c))
		}
	}
	var walk func(v *hujson.Value)
	walk = func(v *hujson.Value) {
		extra(v.BeforeExtra)
		switch x := v.Value.(type) {
		case *hujson.Object:
			for i := range x.Members {
				walk(&x.Members[i].Name)
				walk(&x.Members[i].Value)
			}
			extra(x.AfterExtra)
		case *hujson.Array:
			for i := range x.Elements {
				walk(&x.Elements[i])
			}
			extra(x.AfterExtra)
		}
		extra(v.AfterExtra)
	}
	walk(&v)
	return out
}

func decode(t *testing.T, src []byte) map[string]any {
	t.Helper()
	std, err := hujson.Standardize(slices.Clone(src))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(std, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// lookupEntry finds e's entry in a decoded file by its At path.
func lookupEntry(t *testing.T, doc map[string]any, e Entry) map[string]any {
	t.Helper()
	cur := doc
	// At joins names with "."; a project path may hold dots, so walk
	// greedily: the longest member name that matches the next part.
	rest := e.At
	for rest != "" {
		found := false
		for name, v := range cur {
			if rest == name || strings.HasPrefix(rest, name+".") {
				cur, found = v.(map[string]any), true
				rest = strings.TrimPrefix(strings.TrimPrefix(rest, name), ".")
				break
			}
		}
		if !found {
			t.Fatalf("no %q in the decoded file", e.At)
		}
	}
	return cur[e.Name].(map[string]any)
}

// TestRewriteOAuthEntry: a remote entry whose host logs in itself is
// wrapped in proxy --url; the host's own OAuth settings leave the entry
// (it would try them on what is now a stdio server), and the entry says
// which mcp-confirm login to run instead, with Claude Code's client id
// and callback port.
func TestRewriteOAuthEntry(t *testing.T) {
	loc := Location{Path: "x.json", Servers: [][]string{{"mcpServers"}}}
	in := `{"mcpServers": {
  "shop": {"type": "http", "url": "https://shop/mcp", "oauth": {"clientId": "abc", "callbackPort": 8976}},
  "plain": {"type": "http", "url": "https://plain/mcp", "oauth": {}},
  "gem": {"httpUrl": "https://gem/mcp", "authProviderType": "dynamic_discovery"},
  "bad": {"url": "https://bad/mcp", "oauth": "yes"}
}}`
	out, entries, err := Rewrite([]byte(in), loc, testWrap)
	if err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	if err := json.Unmarshal(out, &parsed); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, name := range []string{"shop", "plain", "gem"} {
		e := parsed.MCPServers[name]
		if e["oauth"] != nil || e["authProviderType"] != nil || e["command"] != testWrap.Self {
			t.Errorf("%s rewritten as %v; want a proxy entry without the host's OAuth settings", name, e)
		}
	}
	if parsed.MCPServers["bad"]["oauth"] != "yes" {
		t.Errorf("an entry with an unreadable oauth member was changed: %v", parsed.MCPServers["bad"])
	}
	want := map[string]string{
		"shop":  "wrap login --url https://shop/mcp --client-id abc --callback-port 8976",
		"plain": "wrap login --url https://plain/mcp",
		"gem":   "wrap login --url https://gem/mcp",
		"bad":   "skip ",
	}
	for _, e := range entries {
		got := actionWord(e)[:4] + " " + strings.Join(e.LoginArgs, " ")
		if got != want[e.Name] {
			t.Errorf("%s: %q, want %q", e.Name, got, want[e.Name])
		}
	}
}
