package notify

import "testing"

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
