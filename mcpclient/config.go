package mcpclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// ServerSpec says how to reach one MCP server: a command started over
// stdio, or (URL set) a remote server over Streamable HTTP (NewRemote).
type ServerSpec struct {
	Name    string            // the name in the config file; "" when given on the command line
	URL     string            // a remote server's endpoint; then Command is empty
	Headers map[string]string // sent with every HTTP request (a bearer token, say)
	Command string            // run directly, never through a shell
	Args    []string          // passed as given
	Env     []string          // extra KEY=VAL entries, added to os.Environ()
	Dir     string            // working directory; "" for the current one
}

// ErrConfig marks a config file that cannot be used as written.
var ErrConfig = errors.New("mcp server config")

// LoadConfig reads a Claude Desktop style {"mcpServers": {...}} or a VS Code
// style {"servers": {...}} file and returns the stdio server called name.
// ${workspaceFolder} in a VS Code file is the folder holding .vscode/.
func LoadConfig(path, name string) (ServerSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return ServerSpec{}, fmt.Errorf("read mcp server config: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	spec, err := parseConfig(data, name, workspaceOf(abs))
	if err != nil {
		return ServerSpec{}, fmt.Errorf("%s: %w", path, err)
	}
	return spec, nil
}

// ConfigServers lists the names of the servers in a config file, sorted,
// for shell completion and for choosing one.
func ConfigServers(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read mcp server config: %w", err)
	}
	all, err := configEntries(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// ParseConfig is LoadConfig on bytes already read. ${workspaceFolder} is then
// the current directory.
func ParseConfig(data []byte, name string) (ServerSpec, error) {
	wd, _ := os.Getwd()
	return parseConfig(data, name, wd)
}

// workspaceOf guesses the VS Code workspace folder for a config file:
// .vscode/mcp.json lives one level below it.
func workspaceOf(path string) string {
	dir := filepath.Dir(path)
	if filepath.Base(dir) == ".vscode" {
		return filepath.Dir(dir)
	}
	return dir
}

// configEntries is the servers of a config file by name, from either
// shape.
func configEntries(data []byte) (map[string]json.RawMessage, error) {
	var file struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
		Servers    map[string]json.RawMessage `json:"servers"`
	}
	// VS Code allows comments and trailing commas in its JSON; we do not, and
	// say so rather than guess.
	if err := json.Unmarshal(bytes.TrimSpace(data), &file); err != nil {
		return nil, fmt.Errorf("%w: not valid JSON (comments and trailing commas are not supported): %v", ErrConfig, err)
	}
	if file.MCPServers == nil && file.Servers == nil {
		return nil, fmt.Errorf(`%w: no "mcpServers" (Claude Desktop) or "servers" (VS Code) object`, ErrConfig)
	}
	all := map[string]json.RawMessage{}
	for n, v := range file.Servers {
		all[n] = v
	}
	for n, v := range file.MCPServers {
		if _, dup := all[n]; dup {
			return nil, fmt.Errorf(`%w: server %q is defined under both "mcpServers" and "servers"`, ErrConfig, n)
		}
		all[n] = v
	}
	return all, nil
}

// serverEntry is the union of both shapes. Unknown keys are ignored on
// purpose: hosts add their own (disabled, autoApprove, timeout, ...).
type serverEntry struct {
	Type    string                     `json:"type"`
	Command string                     `json:"command"`
	Args    []json.RawMessage          `json:"args"`
	Env     map[string]json.RawMessage `json:"env"`
	Cwd     string                     `json:"cwd"`
	URL     string                     `json:"url"`
	Headers map[string]json.RawMessage `json:"headers"`
	EnvFile string                     `json:"envFile"`
}

func parseConfig(data []byte, name, workspace string) (ServerSpec, error) {
	all, err := configEntries(data)
	if err != nil {
		return ServerSpec{}, err
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	if name == "" {
		if len(names) != 1 {
			return ServerSpec{}, fmt.Errorf("%w: %d servers defined; pick one with --server (available: %s)", ErrConfig, len(names), strings.Join(names, ", "))
		}
		name = names[0]
	}
	raw, ok := all[name]
	if !ok {
		return ServerSpec{}, fmt.Errorf("%w: no server named %q (available: %s)", ErrConfig, name, strings.Join(names, ", "))
	}
	var e serverEntry
	if err := json.Unmarshal(raw, &e); err != nil {
		return ServerSpec{}, fmt.Errorf("%w: server %q: %v", ErrConfig, name, err)
	}
	switch {
	case e.URL != "" && e.Command == "":
		return remoteEntry(name, workspace, e)
	case e.Type != "" && e.Type != "stdio":
		return ServerSpec{}, fmt.Errorf("%w: server %q has type %q without a \"url\"", ErrConfig, name, e.Type)
	case e.Command == "":
		return ServerSpec{}, fmt.Errorf(`%w: server %q has no "command" or "url"`, ErrConfig, name)
	}
	if e.EnvFile != "" {
		return ServerSpec{}, fmt.Errorf(`%w: server %q uses "envFile", which is not supported; put the variables in "env"`, ErrConfig, name)
	}

	x := expander{server: name, workspace: workspace}
	spec := ServerSpec{Name: name}
	spec.Command = x.expand("command", e.Command)
	for i, a := range e.Args {
		s, err := scalar(a)
		if err != nil {
			return ServerSpec{}, fmt.Errorf("%w: server %q: args[%d]: %v", ErrConfig, name, i, err)
		}
		spec.Args = append(spec.Args, x.expand(fmt.Sprintf("args[%d]", i), s))
	}
	keys := make([]string, 0, len(e.Env))
	for k := range e.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "" || strings.Contains(k, "=") {
			return ServerSpec{}, fmt.Errorf("%w: server %q: env name %q is not valid", ErrConfig, name, k)
		}
		s, err := scalar(e.Env[k])
		if err != nil {
			return ServerSpec{}, fmt.Errorf("%w: server %q: env %s: %v", ErrConfig, name, k, err)
		}
		spec.Env = append(spec.Env, k+"="+x.expand("env "+k, s))
	}
	if e.Cwd != "" {
		spec.Dir = x.expand("cwd", e.Cwd)
		if !filepath.IsAbs(spec.Dir) && workspace != "" {
			spec.Dir = filepath.Join(workspace, spec.Dir)
		}
	}
	if x.err != nil {
		return ServerSpec{}, x.err
	}
	return spec, nil
}

// remoteEntry is a config's remote server: {"type": "http", "url": ...,
// "headers": {...}} (Claude Code, VS Code) or {"url": ...} (Cursor).
func remoteEntry(name, workspace string, e serverEntry) (ServerSpec, error) {
	switch e.Type {
	case "", "http", "streamable-http", "streamableHttp":
	case "sse":
		return ServerSpec{}, fmt.Errorf("%w: server %q uses the old HTTP+SSE transport (type \"sse\"), which mcp-confirm does not speak; "+
			"most servers also serve Streamable HTTP: try its /mcp endpoint with type \"http\"", ErrConfig, name)
	default:
		return ServerSpec{}, fmt.Errorf("%w: server %q has type %q; want \"http\" for a url", ErrConfig, name, e.Type)
	}
	x := expander{server: name, workspace: workspace}
	spec := ServerSpec{Name: name, URL: x.expand("url", e.URL)}
	for k, raw := range e.Headers {
		v, err := scalar(raw)
		if err != nil {
			return ServerSpec{}, fmt.Errorf("%w: server %q: header %s: %v", ErrConfig, name, k, err)
		}
		if spec.Headers == nil {
			spec.Headers = map[string]string{}
		}
		spec.Headers[k] = x.expand("header "+k, v)
	}
	if x.err != nil {
		return ServerSpec{}, x.err
	}
	return spec, nil
}

// ExpandHeader is a --header value with ${NAME} taken from the environment,
// so that a token is not typed on the command line. An unset variable is an
// error: a request with an empty token is worse than none.
func ExpandHeader(s string) (string, error) {
	var err error
	out := varPattern.ReplaceAllStringFunc(s, func(m string) string {
		name := strings.TrimPrefix(m[2:len(m)-1], "env:")
		v, ok := os.LookupEnv(name)
		if !ok && err == nil {
			err = fmt.Errorf("%s is not set in the environment", m)
		}
		return v
	})
	return out, err
}

// scalar accepts a JSON string, number or bool: config files written by hand
// put ports and flags as numbers.
func scalar(raw json.RawMessage) (string, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case float64, bool:
		return strings.TrimSpace(string(raw)), nil
	default:
		return "", fmt.Errorf("want a string, got %s", raw)
	}
}

var (
	varPattern = regexp.MustCompile(`\$\{([^}]*)\}`)
	envName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// expander resolves the VS Code variables that need no editor: ${env:NAME},
// ${userHome}, ${workspaceFolder}. ${input:...} asks the user in the editor;
// there is no editor here, and running a server with a placeholder where a
// secret should be is worse than refusing.
type expander struct {
	server, workspace string
	err               error
}

func (x *expander) expand(field, s string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	return varPattern.ReplaceAllStringFunc(s, func(m string) string {
		v := m[2 : len(m)-1]
		switch {
		case strings.HasPrefix(v, "input:"):
			x.fail(fmt.Errorf("%w: server %q: %s uses %s, an editor prompt that mcp-confirm cannot show; replace it with the value (or ${env:NAME})", ErrConfig, x.server, field, m))
		case strings.HasPrefix(v, "env:"):
			return os.Getenv(strings.TrimPrefix(v, "env:"))
		case v == "userHome":
			home, err := os.UserHomeDir()
			if err != nil {
				x.fail(fmt.Errorf("%w: server %q: %s: %v", ErrConfig, x.server, field, err))
			}
			return home
		case v == "workspaceFolder":
			return x.workspace
		case envName.MatchString(v):
			// Claude Code's form: ${NAME} is an environment variable.
			val, ok := os.LookupEnv(v)
			if !ok {
				x.fail(fmt.Errorf("%w: server %q: %s uses %s, which is not set in the environment", ErrConfig, x.server, field, m))
			}
			return val
		default:
			x.fail(fmt.Errorf("%w: server %q: %s uses %s, which mcp-confirm does not resolve; replace it with the value", ErrConfig, x.server, field, m))
		}
		return m
	})
}

func (x *expander) fail(err error) {
	if x.err == nil {
		x.err = err
	}
}
