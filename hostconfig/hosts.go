// Package hostconfig knows where MCP hosts (Claude Desktop, Claude Code,
// Cursor, VS Code, Windsurf, Gemini CLI) keep their server lists, and
// rewrites a host's stdio server entries to start through `mcp-confirm
// proxy`, in place: the file's comments, order and formatting stay as they
// were outside the two values changed in each entry (command and args).
// It keeps a byte-exact backup of every file it changes, so that uninstall
// can put the file back.
//
// It knows nothing of the journal, the guard or the proxy beyond the proxy's
// command line.
package hostconfig

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/mcp-confirm/mcp-confirm/internal/closest"
)

// Env is what locating the files depends on. Tests set Home to a temporary
// folder.
type Env struct {
	GOOS       string // "linux" or "darwin"
	Home       string // $HOME
	ConfigHome string // $XDG_CONFIG_HOME; "" means Home/.config (Linux)
	Dir        string // the project folder: per-project files are looked for here
}

// EnvFrom fills an Env from environment variables, the OS and the working
// folder.
func EnvFrom(getenv func(string) string, goos, dir string) Env {
	return Env{GOOS: goos, Home: getenv("HOME"), ConfigHome: getenv("XDG_CONFIG_HOME"), Dir: dir}
}

func (e Env) configHome() string {
	if e.ConfigHome != "" {
		return e.ConfigHome
	}
	return filepath.Join(e.Home, ".config")
}

// appSupport is where a desktop app keeps its settings: ~/Library/Application
// Support on macOS, $XDG_CONFIG_HOME elsewhere.
func (e Env) appSupport() string {
	if e.GOOS == "darwin" {
		return filepath.Join(e.Home, "Library", "Application Support")
	}
	return e.configHome()
}

// Host is one MCP host and the files it reads servers from.
type Host struct {
	Name  string // the --host name: "claude-desktop", ...
	Title string // "Claude Desktop"
	files func(Env) []Location
}

// Location is one config file of a host and where in it the servers are.
type Location struct {
	Host  string
	Path  string
	Scope string // "user" or "project"
	// Servers are the paths, from the file's top, of the objects that map
	// a server name to its entry; "*" stands for every member of an object
	// (Claude Code's projects.<path>.mcpServers).
	Servers [][]string
	// disabled reports the names the host itself leaves out, besides an
	// entry's own "disabled": true (Gemini CLI's mcp.excluded, Claude
	// Code's per-project disabledMcpServers), given the file's top value.
	disabled func(root jsonObject, at []string) []string
}

var hosts = []Host{
	{Name: "claude-desktop", Title: "Claude Desktop", files: func(e Env) []Location {
		return []Location{{Path: filepath.Join(e.appSupport(), "Claude", "claude_desktop_config.json"), Scope: "user",
			Servers: [][]string{{"mcpServers"}}}}
	}},
	{Name: "claude-code", Title: "Claude Code", files: func(e Env) []Location {
		return []Location{
			{Path: filepath.Join(e.Dir, ".mcp.json"), Scope: "project", Servers: [][]string{{"mcpServers"}}},
			{Path: filepath.Join(e.Home, ".claude.json"), Scope: "user",
				Servers:  [][]string{{"mcpServers"}, {"projects", "*", "mcpServers"}},
				disabled: claudeCodeDisabled},
		}
	}},
	{Name: "cursor", Title: "Cursor", files: func(e Env) []Location {
		return []Location{
			{Path: filepath.Join(e.Home, ".cursor", "mcp.json"), Scope: "user", Servers: [][]string{{"mcpServers"}}},
			{Path: filepath.Join(e.Dir, ".cursor", "mcp.json"), Scope: "project", Servers: [][]string{{"mcpServers"}}},
		}
	}},
	{Name: "vscode", Title: "VS Code", files: func(e Env) []Location {
		user := filepath.Join(e.appSupport(), "Code", "User")
		return []Location{
			{Path: filepath.Join(e.Dir, ".vscode", "mcp.json"), Scope: "project", Servers: [][]string{{"servers"}}},
			{Path: filepath.Join(user, "mcp.json"), Scope: "user", Servers: [][]string{{"servers"}}},
			{Path: filepath.Join(user, "settings.json"), Scope: "user", Servers: [][]string{{"mcp", "servers"}}},
		}
	}},
	{Name: "windsurf", Title: "Windsurf", files: func(e Env) []Location {
		return []Location{{Path: filepath.Join(e.Home, ".codeium", "windsurf", "mcp_config.json"), Scope: "user",
			Servers: [][]string{{"mcpServers"}}}}
	}},
	{Name: "gemini-cli", Title: "Gemini CLI", files: func(e Env) []Location {
		return []Location{
			{Path: filepath.Join(e.Home, ".gemini", "settings.json"), Scope: "user", Servers: [][]string{{"mcpServers"}},
				disabled: geminiDisabled},
			{Path: filepath.Join(e.Dir, ".gemini", "settings.json"), Scope: "project", Servers: [][]string{{"mcpServers"}},
				disabled: geminiDisabled},
		}
	}},
}

// Hosts lists the hosts this package knows, in a fixed order.
func Hosts() []Host { return slices.Clone(hosts) }

// HostNames are the --host names.
func HostNames() []string {
	names := make([]string, len(hosts))
	for i, h := range hosts {
		names[i] = h.Name
	}
	return names
}

// Lookup finds a host by its --host name.
func Lookup(name string) (Host, error) {
	for _, h := range hosts {
		if h.Name == name {
			return h, nil
		}
	}
	near, _ := closest.Name(name, HostNames())
	return Host{}, &UnknownHostError{Name: name, Suggestion: near}
}

// UnknownHostError is a --host name this package does not know.
type UnknownHostError struct {
	Name       string
	Suggestion string // the nearest known name, if any
}

func (e *UnknownHostError) Error() string { return fmt.Sprintf("unknown host %q", e.Name) }

// Files are the host's config files, whether or not they exist; a file
// seen twice (the project folder is the home folder) is listed once.
func (h Host) Files(e Env) []Location {
	var out []Location
	seen := map[string]bool{}
	for _, l := range h.files(e) {
		l.Path = filepath.Clean(l.Path)
		if seen[l.Path] {
			continue
		}
		seen[l.Path] = true
		l.Host = h.Name
		out = append(out, l)
	}
	return out
}

// geminiDisabled: Gemini CLI skips the servers named in mcp.excluded.
func geminiDisabled(root jsonObject, _ []string) []string {
	mcp, _ := root.object("mcp")
	return mcp.strings("excluded")
}

// claudeCodeDisabled: Claude Code skips, in a project, the servers named in
// that project's disabledMcpServers.
func claudeCodeDisabled(root jsonObject, at []string) []string {
	if len(at) != 3 || at[0] != "projects" {
		return nil
	}
	projects, _ := root.object("projects")
	project, _ := projects.object(at[1])
	return project.strings("disabledMcpServers")
}
