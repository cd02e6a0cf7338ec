package notify

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCheckWebhook(t *testing.T) {
	for hook, ok := range map[string]bool{
		"":                            true,
		"https://hooks.example.com/x": true,
		"http://127.0.0.1:9/x":        true,
		"http://localhost/x":          true,
		"http://[::1]:8080/x":         true,
		"http://example.com/x":        false,
		"ftp://example.com/x":         false,
		"https:///x":                  false,
		"not a url":                   false,
	} {
		if err := (Config{Webhook: hook}).Check(); (err == nil) != ok {
			t.Errorf("Check(%q) = %v, want ok=%v", hook, err, ok)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/home/me/journal.db": "/home/me/journal.db",
		"/tmp/a b/j.db":       "'/tmp/a b/j.db'",
		"/tmp/it's/j.db":      `'/tmp/it'\''s/j.db'`,
		"/tmp/$(rm)/j.db":     "'/tmp/$(rm)/j.db'",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// A Notifier of the zero Config does nothing and is not enabled.
func TestZeroConfigIsOff(t *testing.T) {
	n := New(Config{}, nil)
	if n.Enabled() || n.Func("/j.db") != nil {
		t.Fatal("a notifier with nothing configured is enabled")
	}
	n.Notify(Event{CallID: 1}) // must not panic or block
}

// A reason longer than the kernel lets one environment string be (128 KiB)
// and holding a NUL would make exec refuse the command: it still runs, with
// the reason cut and spelled, and the whole event on its stdin.
func TestCommandRunsWhateverTheEventHolds(t *testing.T) {
	dir := t.TempDir()
	envFile, stdinFile := filepath.Join(dir, "reason"), filepath.Join(dir, "stdin")
	n := New(Config{Command: `printf '%s' "$MCP_CONFIRM_REASON" > ` + envFile + `; cat > ` + stdinFile}, nil)
	reason := "a\x00b" + strings.Repeat("é", 200<<10) + "\x00"
	n.Notify(Event{Event: EventUnknown, CallID: 1, Server: "s\x00", Tool: "t\x1b[2J", Reason: reason})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n.Wait(ctx)
	got, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatalf("the command did not run: %v", err)
	}
	if !strings.HasPrefix(string(got), `a\x00b`) || len(got) > 8<<10 || strings.ContainsRune(string(got), 0) {
		t.Errorf("the reason in the environment: %d bytes beginning %q", len(got), got[:min(len(got), 20)])
	}
	if b, _ := os.ReadFile(stdinFile); len(b) < len(reason) {
		t.Errorf("stdin holds %d bytes, less than the reason", len(b))
	}
}
