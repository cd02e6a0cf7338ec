package guard

import (
	"errors"
	"fmt"
	"github.com/mcp-confirm/mcp-confirm/notify"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// Policy is the operator's word on tools (SPEC §5). It always wins over the
// server's annotations, which are untrusted hints.
type Policy struct {
	Defaults Defaults              `toml:"defaults"`
	Tools    map[string]ToolPolicy `toml:"tools"`
	// Notify says who to tell when a call becomes unknown (package notify).
	Notify notify.Config `toml:"notify"`
}

// Defaults apply to every tool the policy does not name.
type Defaults struct {
	WriteTimeout Duration `toml:"write_timeout"` // idle clock per attempt; progress resets it
	MaxTotal     Duration `toml:"max_total"`     // absolute clock per attempt
	ReadTimeout  Duration `toml:"read_timeout"`
	ReadAttempts int      `toml:"read_attempts"`
	// ListTimeout bounds each tools/list mcp-confirm makes for itself
	// (0: mcpclient's default, 30s).
	ListTimeout Duration `toml:"list_timeout"`
	// LateHold is how long a call that settled late, after its caller was
	// told it was unknown, keeps holding identical calls unless an operator
	// acknowledges it first (SPEC §9).
	LateHold Duration `toml:"late_hold"`
	// HostTimeout is the proxy's host's own deadline for a tools/call, for a
	// host its table does not know or knows wrong (--host-timeout wins):
	// the proxy's write clocks are fitted under it.
	HostTimeout Duration `toml:"host_timeout"`
	// KeyRetention is how long the server keeps idempotency keys (Stripe
	// 24h; many APIs say 15 minutes to 36 hours; unset: not known). Past
	// it, a retry with the same key may no longer be recognised, so may do
	// the write twice: retry asks for --past-retention, the console for
	// "retry" typed.
	KeyRetention Duration `toml:"key_retention"`
}

// ToolPolicy is one [tools.NAME] table.
type ToolPolicy struct {
	Kind         string         `toml:"kind"` // "write" | "read" | "" (ask the annotations)
	Timeout      Duration       `toml:"timeout"`
	MaxTotal     Duration       `toml:"max_total"`
	KeyArg       string         `toml:"key_arg"`
	QueryTool    string         `toml:"query_tool"`
	QueryArgs    map[string]any `toml:"query_args"`
	Redact       []string       `toml:"redact"`        // field names (any depth) or dotted paths (guard/redact.go)
	AutoResolve  bool           `toml:"auto_resolve"`  // mark applied on its own when the query finds a definite match
	KeyRetention Duration       `toml:"key_retention"` // overrides [defaults] key_retention for this tool
	// CancelTool, with CancelArgs ({key} and {arg.NAME} filled in, as in
	// query_args), is the call that undoes this tool's (mcp-confirm
	// compensate): as payment APIs offer a cancel by key.
	CancelTool string         `toml:"cancel_tool"`
	CancelArgs map[string]any `toml:"cancel_args"`
}

// Duration reads "30s" from TOML.
type Duration struct{ time.Duration }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration like \"30s\" or \"5m\"", b)
	}
	if v <= 0 {
		return fmt.Errorf("duration %q must be positive", b)
	}
	d.Duration = v
	return nil
}

// Built-in defaults (SPEC §5).
const (
	DefaultWriteTimeout = 30 * time.Second
	DefaultMaxTotal     = 10 * time.Minute
	DefaultReadTimeout  = 30 * time.Second
	DefaultReadAttempts = 3
	DefaultLateHold     = 24 * time.Hour
)

// lateHold is the policy's late_hold, or the default.
func (p *Policy) lateHold() time.Duration {
	if p == nil || p.Defaults.LateHold.Duration == 0 {
		return DefaultLateHold
	}
	return p.Defaults.LateHold.Duration
}

// ErrPolicy marks a policy file that cannot be used as written.
var ErrPolicy = errors.New("policy")

// LoadPolicy reads a TOML policy file. Unknown keys are refused, so a typo
// ("kinds = ...") cannot silently leave a write tool unguarded.
func LoadPolicy(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPolicy, err)
	}
	return ParsePolicy(string(data), path)
}

// ParsePolicy parses policy text; name is used in error messages.
func ParsePolicy(text, name string) (*Policy, error) {
	var p Policy
	md, err := toml.Decode(text, &p)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrPolicy, name, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("%w %s: unknown key %s", ErrPolicy, name, strings.Join(keys, ", "))
	}
	if err := p.Notify.Check(); err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrPolicy, name, err)
	}
	if p.Defaults.ReadAttempts < 0 || (p.Defaults.ReadAttempts == 0 && md.IsDefined("defaults", "read_attempts")) {
		// 0 used to mean the default (3) silently.
		return nil, fmt.Errorf("%w %s: read_attempts must be at least 1 (leave it out for %d)", ErrPolicy, name, DefaultReadAttempts)
	}
	names := make([]string, 0, len(p.Tools))
	for n := range p.Tools {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t := p.Tools[n]
		if t.Kind != "" && t.Kind != "read" && t.Kind != "write" {
			return nil, fmt.Errorf("%w %s: tools.%s.kind is %q; use \"write\" or \"read\"", ErrPolicy, name, n, t.Kind)
		}
		for _, f := range t.Redact {
			if err := checkRedact(f); err != nil {
				return nil, fmt.Errorf("%w %s: tools.%s.redact: %v", ErrPolicy, name, n, err)
			}
		}
		if t.QueryTool == "" && len(t.QueryArgs) > 0 {
			return nil, fmt.Errorf("%w %s: tools.%s has query_args without query_tool", ErrPolicy, name, n)
		}
		if t.CancelTool == "" && len(t.CancelArgs) > 0 {
			return nil, fmt.Errorf("%w %s: tools.%s has cancel_args without cancel_tool", ErrPolicy, name, n)
		}
		if t.CancelTool == n {
			return nil, fmt.Errorf("%w %s: tools.%s names itself as its cancel_tool", ErrPolicy, name, n)
		}
	}
	return &p, nil
}

// tool returns the policy for a tool (zero value when unnamed).
func (p *Policy) tool(name string) ToolPolicy {
	if p == nil {
		return ToolPolicy{}
	}
	return p.Tools[name]
}

// KeyRetention is how long the server keeps the keys of tool's calls: the
// tool's key_retention, else the defaults'; 0 when the policy does not say.
func (p *Policy) KeyRetention(tool string) time.Duration {
	if p == nil {
		return 0
	}
	if r := p.tool(tool).KeyRetention.Duration; r > 0 {
		return r
	}
	return p.Defaults.KeyRetention.Duration
}

// KeyRetentionLeft is how long the server should still recognise c's key,
// counted from the call's intent (just before its first send, when the
// server could first have stored the key): negative once past. ok is false
// when the policy does not say how long the server keeps keys.
func (p *Policy) KeyRetentionLeft(c pending.Call, now time.Time) (left time.Duration, ok bool) {
	r := p.KeyRetention(c.Tool)
	if r <= 0 {
		return 0, false
	}
	return c.CreatedAt.Add(r).Sub(now), true
}

// Classify says whether a tool is a read or a write, and who said so: the
// policy; else the server's readOnlyHint when it is true; else write. An
// annotation can only ever make a tool a read when the policy is silent.
func (p *Policy) Classify(t mcp.Tool) (pending.Kind, pending.KindSource) {
	switch p.tool(t.Name).Kind {
	case "read":
		return pending.KindRead, pending.KindFromPolicy
	case "write":
		return pending.KindWrite, pending.KindFromPolicy
	}
	if ro := t.Annotations.ReadOnlyHint; ro != nil && *ro {
		return pending.KindRead, pending.KindFromAnnotation
	}
	if t.Annotations.ReadOnlyHint != nil {
		return pending.KindWrite, pending.KindFromAnnotation
	}
	return pending.KindWrite, pending.KindFromDefault
}

// clocks returns the idle and absolute deadlines for a write attempt.
// override (--timeout) replaces the idle clock of every tool.
func (p *Policy) clocks(tool string, override time.Duration) (idle, total time.Duration) {
	idle, total = DefaultWriteTimeout, DefaultMaxTotal
	if p != nil {
		if p.Defaults.WriteTimeout.Duration > 0 {
			idle = p.Defaults.WriteTimeout.Duration
		}
		if p.Defaults.MaxTotal.Duration > 0 {
			total = p.Defaults.MaxTotal.Duration
		}
		t := p.tool(tool)
		if t.Timeout.Duration > 0 {
			idle = t.Timeout.Duration
		}
		if t.MaxTotal.Duration > 0 {
			total = t.MaxTotal.Duration
		}
	}
	if override > 0 {
		idle = override
	}
	if total < idle {
		total = idle
	}
	return idle, total
}

func (p *Policy) readSettings() (timeout time.Duration, attempts int) {
	timeout, attempts = DefaultReadTimeout, DefaultReadAttempts
	if p != nil {
		if p.Defaults.ReadTimeout.Duration > 0 {
			timeout = p.Defaults.ReadTimeout.Duration
		}
		if p.Defaults.ReadAttempts > 0 {
			attempts = p.Defaults.ReadAttempts
		}
	}
	return timeout, attempts
}
