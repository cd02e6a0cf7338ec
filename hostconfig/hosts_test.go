package hostconfig

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPaths: each host's files on Linux and macOS, from $HOME,
// $XDG_CONFIG_HOME and the project folder (the hosts' documented places).
func TestPaths(t *testing.T) {
	linux := Env{GOOS: "linux", Home: "/home/me", Dir: "/src/app"}
	xdg := Env{GOOS: "linux", Home: "/home/me", ConfigHome: "/cfg", Dir: "/src/app"}
	mac := Env{GOOS: "darwin", Home: "/Users/me", ConfigHome: "/ignored", Dir: "/src/app"}
	for _, tc := range []struct {
		host string
		env  Env
		want []string
	}{
		{"claude-desktop", linux, []string{"/home/me/.config/Claude/claude_desktop_config.json"}},
		{"claude-desktop", xdg, []string{"/cfg/Claude/claude_desktop_config.json"}},
		{"claude-desktop", mac, []string{"/Users/me/Library/Application Support/Claude/claude_desktop_config.json"}},
		{"claude-code", linux, []string{"/src/app/.mcp.json", "/home/me/.claude.json"}},
		{"cursor", mac, []string{"/Users/me/.cursor/mcp.json", "/src/app/.cursor/mcp.json"}},
		{"vscode", linux, []string{"/src/app/.vscode/mcp.json", "/home/me/.config/Code/User/mcp.json", "/home/me/.config/Code/User/settings.json"}},
		{"vscode", mac, []string{"/src/app/.vscode/mcp.json", "/Users/me/Library/Application Support/Code/User/mcp.json", "/Users/me/Library/Application Support/Code/User/settings.json"}},
		{"windsurf", mac, []string{"/Users/me/.codeium/windsurf/mcp_config.json"}},
		{"gemini-cli", linux, []string{"/home/me/.gemini/settings.json", "/src/app/.gemini/settings.json"}},
		// Run in the home folder, the project file is the user file: once.
		{"gemini-cli", Env{GOOS: "linux", Home: "/home/me", Dir: "/home/me"}, []string{"/home/me/.gemini/settings.json"}},
	} {
		h, err := Lookup(tc.host)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range h.Files(tc.env) {
			got = append(got, l.Path)
			if l.Host != tc.host {
				t.Errorf("%s: location of host %q", l.Path, l.Host)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s on %s: %q, want %q", tc.host, tc.env.GOOS, got, tc.want)
		}
	}
}

func TestEnvFrom(t *testing.T) {
	vars := map[string]string{"HOME": "/home/me", "XDG_CONFIG_HOME": "/cfg"}
	e := EnvFrom(func(k string) string { return vars[k] }, "linux", "/src")
	if e != (Env{GOOS: "linux", Home: "/home/me", ConfigHome: "/cfg", Dir: "/src"}) {
		t.Errorf("%+v", e)
	}
}

func TestLookupUnknown(t *testing.T) {
	_, err := Lookup("cursr")
	var u *UnknownHostError
	if !errors.As(err, &u) || u.Suggestion != "cursor" {
		t.Fatalf("err %v, want unknown host with suggestion cursor", err)
	}
	_, err = Lookup("emacs")
	if !errors.As(err, &u) || u.Suggestion != "" {
		t.Fatalf("err %v, want unknown host without suggestion", err)
	}
	if got := HostNames(); !slices.Equal(got, []string{"claude-desktop", "claude-code", "cursor", "vscode", "windsurf", "gemini-cli"}) {
		t.Errorf("HostNames %q", got)
	}
}

func TestDetect(t *testing.T) {
	root := copyFixtures(t)
	os.Remove(filepath.Join(root, "home", ".codeium", "windsurf", "mcp_config.json"))
	var got []string
	for _, h := range Detect(fixtureEnv(root)) {
		got = append(got, h.Name)
	}
	if want := []string{"claude-desktop", "claude-code", "cursor", "vscode", "gemini-cli"}; !slices.Equal(got, want) {
		t.Errorf("Detect: %q, want %q", got, want)
	}
}

func TestChoose(t *testing.T) {
	found := []Host{hosts[0], hosts[2], hosts[3]} // claude-desktop, cursor, vscode
	for _, tc := range []struct {
		answer string
		want   []string
		err    error
	}{
		{"1 3\n", []string{"claude-desktop", "vscode"}, nil},
		{"cursor,vscode\n", []string{"cursor", "vscode"}, nil},
		{"all\n", []string{"claude-desktop", "cursor", "vscode"}, nil},
		{"\n", nil, nil},
		{"7\n2 2\n", []string{"cursor"}, nil}, // asked again
		{"", nil, ErrNoAnswer},
	} {
		var out strings.Builder
		got, err := Choose(strings.NewReader(tc.answer), &out, found, func(h Host) string { return "(" + h.Title + ")" })
		var names []string
		for _, h := range got {
			names = append(names, h.Name)
		}
		if !errors.Is(err, tc.err) || !slices.Equal(names, tc.want) {
			t.Errorf("%q: %q, %v; want %q, %v", tc.answer, names, err, tc.want, tc.err)
		}
		if !strings.Contains(out.String(), "  2. cursor          (Cursor)\n") {
			t.Errorf("%q: the list reads\n%s", tc.answer, out.String())
		}
		if tc.answer == "7\n2 2\n" && !strings.Contains(out.String(), `"7" is not one of the hosts above.`) {
			t.Errorf("no word about the bad answer:\n%s", out.String())
		}
	}
}

// TestSelfPath: the binary's own path, or the same file as found on PATH;
// a go run build is refused.
func TestSelfPath(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "Cellar", "1.0", "mcp-confirm")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)
	link := filepath.Join(dir, "bin", "mcp-confirm")
	os.MkdirAll(filepath.Dir(link), 0o755)
	os.Symlink(bin, link)
	other := filepath.Join(dir, "other", "mcp-confirm")
	os.MkdirAll(filepath.Dir(other), 0o755)
	os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755)

	found := func(p string) func(string) (string, error) {
		return func(string) (string, error) { return p, nil }
	}
	if got, err := SelfPath(bin, found(link)); err != nil || got != link {
		t.Errorf("same file on PATH: %q, %v; want %q", got, err, link)
	}
	if got, err := SelfPath(bin, found(other)); err != nil || got != bin {
		t.Errorf("another mcp-confirm on PATH: %q, %v; want %q", got, err, bin)
	}
	notFound := func(string) (string, error) { return "", errors.New("not found") }
	if _, err := SelfPath("/tmp/go-build123/b001/exe/mcp-confirm", notFound); !errors.Is(err, ErrTemporaryBinary) {
		t.Errorf("go run binary: %v, want ErrTemporaryBinary", err)
	}
}
