package guard

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// specPolicy is the policy file of SPEC §5, verbatim.
const specPolicy = `
[defaults]
write_timeout = "30s"     # per attempt; progress resets it
max_total = "10m"         # cap on progress resets
read_timeout = "30s"
read_attempts = 3

[tools.create_order]
kind = "write"                       # "write" | "read"
timeout = "30s"
key_arg = "idempotency_key"
query_tool = "find_orders"
query_args = { idempotency_key = "{key}" }
redact = ["card_number"]             # kept out of the journal and the screen
`

func TestParsePolicySpecFile(t *testing.T) {
	p, err := ParsePolicy(specPolicy, "spec.toml")
	if err != nil {
		t.Fatal(err)
	}
	d := p.Defaults
	if d.WriteTimeout.Duration != 30*time.Second || d.MaxTotal.Duration != 10*time.Minute ||
		d.ReadTimeout.Duration != 30*time.Second || d.ReadAttempts != 3 {
		t.Errorf("defaults = %+v", d)
	}
	co, ok := p.Tools["create_order"]
	if !ok {
		t.Fatalf("tools = %v", p.Tools)
	}
	if co.Kind != "write" || co.Timeout.Duration != 30*time.Second || co.KeyArg != "idempotency_key" ||
		co.QueryTool != "find_orders" || co.AutoResolve {
		t.Errorf("create_order = %+v", co)
	}
	if len(co.QueryArgs) != 1 || co.QueryArgs["idempotency_key"] != "{key}" {
		t.Errorf("query_args = %#v", co.QueryArgs)
	}
	if len(co.Redact) != 1 || co.Redact[0] != "card_number" {
		t.Errorf("redact = %v", co.Redact)
	}
}

func TestLoadPolicy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.toml")
	if err := os.WriteFile(path, []byte(specPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPolicy(path); err != nil {
		t.Fatal(err)
	}
	_, err := LoadPolicy(filepath.Join(t.TempDir(), "missing.toml"))
	if !errors.Is(err, ErrPolicy) {
		t.Errorf("missing file: %v, want ErrPolicy", err)
	}
}

func TestParsePolicyRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string // substrings of the error
	}{
		{"unknown key in a tool", "[tools.create_order]\nkinds = \"write\"\n", []string{"unknown key", "kinds"}},
		{"unknown key in defaults", "[defaults]\nwrite_timeot = \"3s\"\n", []string{"unknown key", "write_timeot"}},
		{"unknown table", "[default]\nwrite_timeout = \"3s\"\n", []string{"unknown key", "default"}},
		{"bad kind", "[tools.x]\nkind = \"readonly\"\n", []string{"tools.x.kind", "readonly"}},
		{"bad duration", "[defaults]\nwrite_timeout = \"thirty seconds\"\n", []string{"thirty seconds", "not a duration"}},
		{"bad tool duration", "[tools.x]\ntimeout = \"5\"\n", []string{"not a duration"}},
		{"zero duration", "[defaults]\nread_timeout = \"0s\"\n", []string{"must be positive"}},
		{"negative duration", "[tools.x]\nmax_total = \"-1m\"\n", []string{"must be positive"}},
		{"duration as number", "[defaults]\nwrite_timeout = 30\n", nil},
		{"negative read_attempts", "[defaults]\nread_attempts = -1\n", []string{"read_attempts"}},
		{"read_attempts 0 (was silently 3)", "[defaults]\nread_attempts = 0\n", []string{"read_attempts must be at least 1"}},
		{"query_args without query_tool", "[tools.x]\nquery_args = { id = \"{key}\" }\n", []string{"tools.x", "query_args without query_tool"}},
		{"not TOML", "[tools.x\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePolicy(tc.text, "p.toml")
			if err == nil {
				t.Fatalf("accepted: %+v", p)
			}
			if !errors.Is(err, ErrPolicy) {
				t.Errorf("error %v does not wrap ErrPolicy", err)
			}
			if !strings.Contains(err.Error(), "p.toml") {
				t.Errorf("error %q does not name the file", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// tool builds an mcp.Tool directly: mcp.NewTool presets every hint, which
// would hide the "annotation absent" case.
func tool(name string, readOnly *bool, props ...string) mcp.Tool {
	t := mcp.Tool{Name: name, InputSchema: mcp.ToolInputSchema{Type: "object", Properties: map[string]any{}}}
	t.Annotations.ReadOnlyHint = readOnly
	for _, p := range props {
		t.InputSchema.Properties[p] = map[string]any{"type": "string"}
	}
	return t
}

func TestClassify(t *testing.T) {
	pol, err := ParsePolicy(`
[tools.lookup]
kind = "read"
[tools.report]
kind = "write"
[tools.other]
timeout = "5s"
`, "p.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		p    *Policy
		tool mcp.Tool
		kind pending.Kind
		src  pending.KindSource
	}{
		{"policy read beats readOnlyHint false", pol, tool("lookup", ptr(false)), pending.KindRead, pending.KindFromPolicy},
		{"policy read without a hint", pol, tool("lookup", nil), pending.KindRead, pending.KindFromPolicy},
		{"policy write beats readOnlyHint true", pol, tool("report", ptr(true)), pending.KindWrite, pending.KindFromPolicy},
		{"policy silent on the tool: hint true", pol, tool("other", ptr(true)), pending.KindRead, pending.KindFromAnnotation},
		{"readOnlyHint true", nil, tool("t", ptr(true)), pending.KindRead, pending.KindFromAnnotation},
		{"readOnlyHint false", nil, tool("t", ptr(false)), pending.KindWrite, pending.KindFromAnnotation},
		{"no hint", nil, tool("t", nil), pending.KindWrite, pending.KindFromDefault},
		{"no hint, empty policy", &Policy{}, tool("t", nil), pending.KindWrite, pending.KindFromDefault},
		{"other hints do not make a read", nil, func() mcp.Tool {
			x := tool("t", nil)
			x.Annotations.IdempotentHint, x.Annotations.DestructiveHint = ptr(true), ptr(false)
			return x
		}(), pending.KindWrite, pending.KindFromDefault},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, s := tc.p.Classify(tc.tool)
			if k != tc.kind || s != tc.src {
				t.Errorf("Classify = %s/%s, want %s/%s", k, s, tc.kind, tc.src)
			}
		})
	}
	// mcp.NewTool presets readOnlyHint false: a tool built that way is a
	// write by annotation, not by default.
	if k, s := (*Policy)(nil).Classify(mcp.NewTool("n")); k != pending.KindWrite || s != pending.KindFromAnnotation {
		t.Errorf("NewTool classified %s/%s", k, s)
	}
}

func TestClocks(t *testing.T) {
	pol, err := ParsePolicy(`
[defaults]
write_timeout = "20s"
max_total = "2m"
read_timeout = "7s"
read_attempts = 5
[tools.slow]
timeout = "90s"
[tools.capped]
max_total = "40s"
[tools.tiny]
max_total = "1s"
`, "p.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		p           *Policy
		tool        string
		override    time.Duration
		idle, total time.Duration
	}{
		{"built-in defaults", nil, "x", 0, DefaultWriteTimeout, DefaultMaxTotal},
		{"empty policy", &Policy{}, "x", 0, DefaultWriteTimeout, DefaultMaxTotal},
		{"policy defaults", pol, "x", 0, 20 * time.Second, 2 * time.Minute},
		{"per-tool timeout", pol, "slow", 0, 90 * time.Second, 2 * time.Minute},
		{"per-tool max_total", pol, "capped", 0, 20 * time.Second, 40 * time.Second},
		{"max_total never below idle", pol, "tiny", 0, 20 * time.Second, 20 * time.Second},
		{"--timeout beats defaults", pol, "x", 3 * time.Second, 3 * time.Second, 2 * time.Minute},
		{"--timeout beats per-tool", pol, "slow", 3 * time.Second, 3 * time.Second, 2 * time.Minute},
		{"--timeout without policy", nil, "x", 50 * time.Second, 50 * time.Second, DefaultMaxTotal},
		{"--timeout above max_total raises it", pol, "capped", time.Minute, time.Minute, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idle, total := tc.p.clocks(tc.tool, tc.override)
			if idle != tc.idle || total != tc.total {
				t.Errorf("clocks = %v/%v, want %v/%v", idle, total, tc.idle, tc.total)
			}
		})
	}

	if to, n := (*Policy)(nil).readSettings(); to != DefaultReadTimeout || n != DefaultReadAttempts {
		t.Errorf("default read settings = %v, %d", to, n)
	}
	if to, n := pol.readSettings(); to != 7*time.Second || n != 5 {
		t.Errorf("policy read settings = %v, %d", to, n)
	}
}
