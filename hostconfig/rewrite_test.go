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
		"claude-code mcpServers.api-server: skip " + ReasonRemote,
		"claude-code mcpServers.airtable: wrap",
		"claude-code projects./home/me/src/shop.mcpServers.postgres: wrap",
		"claude-code projects./home/me/src/shop.mcpServers.sentry: skip " + ReasonRemote,
		"claude-code projects./home/me/src/shop.mcpServers.stripe: skip " + ReasonDisabled,
		"cursor mcpServers.server-name: wrap",
		"cursor mcpServers.python-tool: skip " + ReasonExcluded,
		"cursor mcpServers.remote-server: skip " + ReasonRemote,
		"cursor mcpServers.db-tools: wrap",
		"vscode servers.Perplexity: wrap",
		"vscode servers.fetch: wrap",
		"vscode servers.github: skip " + ReasonRemote,
		"vscode servers.myserver: wrap",
		"vscode servers.playwright: wrap",
		"vscode mcp.servers.memory: wrap",
		"windsurf mcpServers.github: wrap",
		"windsurf mcpServers.git: skip " + ReasonDisabled,
		"windsurf mcpServers.figma: skip " + ReasonRemote,
		"gemini-cli mcpServers.pythonTools: wrap",
		"gemini-cli mcpServers.nodeServer: wrap",
		"gemini-cli mcpServers.httpServer: skip " + ReasonRemote,
		"gemini-cli mcpServers.experimental-server: skip " + ReasonDisabled,
		"gemini-cli mcpServers.dockerizedServer: wrap",
	}
	if !slices.Equal(got, want) {
		t.Errorf("entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func actionWord(e Entry) string {
	if e.Action == Wrapped {
		return "wrap"
	}
	return "skip " + e.Reason
}

// TestRewriteKeepsEverythingElse: outside the command and args of wrapped
// entries nothing changes. Comments come through byte for byte and in
// order; every line that changed held a command or args; and read as data,
// the rewritten file is the original with exactly those two values changed
// in each wrapped entry (env, cwd, type, envFile, timeout ... as they were).
// A file of plain JSON stays plain JSON.
func TestRewriteKeepsEverythingElse(t *testing.T) {
	locs, rels := fixtureFiles(t, "testdata")
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
			changedLine := regexp.MustCompile(`"(command|args)"`)
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
			before, after := decode(t, src), decode(t, out)
			for _, e := range entries {
				if e.Action != Wrapped {
					continue
				}
				entry := lookupEntry(t, before, e)
				args := []any{}
				for _, a := range testWrap.proxyArgs() {
					args = append(args, a)
				}
				args = append(args, entry["command"])
				if old, ok := entry["args"].([]any); ok {
					args = append(args, old...)
				}
				entry["command"], entry["args"] = testWrap.Self, args
			}
			if !reflect.DeepEqual(before, after) {
				t.Errorf("read as data, the rewritten file is not the original with command and args changed:\n got %v\nwant %v", after, before)
			}
		})
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
  "d": {"command": "x", "disabled": true}
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
		"t: skip " + ReasonRemote + " ",
		"d: skip " + ReasonDisabled + " ",
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
