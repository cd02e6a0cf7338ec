// Package notify tells someone when a call becomes unknown, so that an
// operator learns of it without watching: the policy's [notify] section
// names a command (run with the event as JSON on stdin and in environment
// variables) and/or a webhook (POSTed the same JSON). Delivery is in the
// background and bounded: a slow or failing receiver is logged, never
// waited on by the guard or the proxy, and never holds up a call.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/termtext"
)

// Config is the policy's [notify] section.
type Config struct {
	Command string `toml:"command"` // run by /bin/sh -c
	Webhook string `toml:"webhook"` // https://…, or http:// to a loopback address
}

// Check says what is wrong with c, for the policy's parser.
func (c Config) Check() error {
	if c.Webhook == "" {
		return nil
	}
	u, err := url.Parse(c.Webhook)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("notify.webhook %q is not an https:// URL", c.Webhook)
	}
	if u.Scheme == "http" && !loopback(u.Hostname()) {
		// The event names calls, keys and servers: not in clear text
		// across a network.
		return fmt.Errorf("notify.webhook %q: plain http is allowed only to a loopback address; use https://", c.Webhook)
	}
	return nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Event is one call becoming unknown, or settling late after its caller
// was told it was unknown.
type Event struct {
	Event   string    `json:"event"` // EventUnknown or EventLateSettled
	CallID  int64     `json:"call_id"`
	Server  string    `json:"server"`
	Tool    string    `json:"tool"`
	Key     string    `json:"key"`
	State   string    `json:"state"`
	Reason  string    `json:"reason,omitempty"`
	Resolve string    `json:"resolve"` // the command that shows and decides it
	At      time.Time `json:"at"`
}

// Event kinds.
const (
	EventUnknown     = "unknown"
	EventLateSettled = "late_settled"
)

// Bounds of delivery: a webhook request's timeout and its attempts, a
// command's run time, and how many deliveries may be under way (more are
// dropped, and logged, rather than pile up behind a dead receiver).
const (
	webhookTimeout  = 2 * time.Second
	webhookAttempts = 4
	commandTimeout  = 10 * time.Second
	maxPending      = 64
)

// Notifier delivers events as its Config says. The zero of Config makes a
// Notifier that does nothing. Safe for concurrent use.
type Notifier struct {
	cfg     Config
	log     *slog.Logger
	httpc   *http.Client
	backoff time.Duration // first pause between webhook attempts; doubles
	pending chan struct{}
	wg      sync.WaitGroup
}

// New returns a Notifier for cfg; log receives delivery failures.
func New(cfg Config, log *slog.Logger) *Notifier {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Notifier{cfg: cfg, log: log, backoff: 250 * time.Millisecond,
		httpc:   &http.Client{Timeout: webhookTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		pending: make(chan struct{}, maxPending)}
}

// Enabled reports whether the Notifier delivers anything.
func (n *Notifier) Enabled() bool { return n != nil && (n.cfg.Command != "" || n.cfg.Webhook != "") }

// Notify delivers e in the background.
func (n *Notifier) Notify(e Event) {
	if !n.Enabled() {
		return
	}
	select {
	case n.pending <- struct{}{}:
	default:
		n.log.Warn("notification dropped: too many still being delivered", "call", e.CallID, "event", e.Event)
		return
	}
	body, _ := json.Marshal(e)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer func() { <-n.pending }()
		var wg sync.WaitGroup
		if n.cfg.Command != "" {
			wg.Add(1)
			go func() { defer wg.Done(); n.runCommand(e, body) }()
		}
		if n.cfg.Webhook != "" {
			wg.Add(1)
			go func() { defer wg.Done(); n.post(e, body) }()
		}
		wg.Wait()
	}()
}

// Wait waits for deliveries under way, until ctx ends: a CLI command calls
// it before it exits, so that its notification is not lost with it.
func (n *Notifier) Wait(ctx context.Context) {
	if !n.Enabled() {
		return
	}
	done := make(chan struct{})
	go func() { n.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		n.log.Warn("exiting with notifications still being delivered")
	}
}

func (n *Notifier) runCommand(e Event, body []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", n.cfg.Command)
	cmd.Stdin = bytes.NewReader(body)
	cmd.Env = append(os.Environ(),
		"MCP_CONFIRM_EVENT="+e.Event,
		"MCP_CONFIRM_CALL_ID="+strconv.FormatInt(e.CallID, 10),
		"MCP_CONFIRM_SERVER="+envValue(e.Server),
		"MCP_CONFIRM_TOOL="+envValue(e.Tool),
		"MCP_CONFIRM_KEY="+envValue(e.Key),
		"MCP_CONFIRM_STATE="+e.State,
		"MCP_CONFIRM_REASON="+envValue(e.Reason),
		"MCP_CONFIRM_RESOLVE="+e.Resolve, // ours: a command to run, kept exact
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		n.log.Warn("notify command failed", "call", e.CallID, "event", e.Event, "err", err, "output", tail(out.Bytes()))
	}
}

// maxEnvValue bounds one value in the command's environment: the kernel
// refuses an exec with a single string over 128 KiB (E2BIG), and a
// server's long error text as the reason must not be what stops the
// command. The whole value is on stdin.
const maxEnvValue = 4 << 10

// envValue is v, a value a server chose (its name, its tool's, the reason
// its errors gave), as the command's environment may carry it. exec
// refuses a NUL byte in the environment, so a server could silence the
// warning about its own call; and controls would reach whatever terminal
// or log the command writes to. termtext.Name spells each control, NUL
// included, as \xNN (a NUL dropped would make "a\x00b" read as "ab").
// Stdin keeps the exact values, as JSON.
func envValue(v string) string {
	v = termtext.Name(v)
	if len(v) > maxEnvValue {
		cut := maxEnvValue
		for cut > 0 && !utf8.RuneStart(v[cut]) {
			cut--
		}
		v = v[:cut] + "…"
	}
	return v
}

func (n *Notifier) post(e Event, body []byte) {
	pause := n.backoff
	var err error
	for attempt := 1; attempt <= webhookAttempts; attempt++ {
		if err = n.postOnce(body); err == nil {
			return
		}
		if attempt < webhookAttempts {
			time.Sleep(pause)
			pause *= 2
		}
	}
	n.log.Warn("notify webhook failed", "call", e.CallID, "event", e.Event, "attempts", webhookAttempts, "err", err)
}

func (n *Notifier) postOnce(body []byte) error {
	req, err := http.NewRequest(http.MethodPost, n.cfg.Webhook, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "mcp-confirm-notify")
	resp, err := n.httpc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return errors.New("HTTP " + resp.Status)
	}
	return nil
}

// tail is the end of a command's output, for the log.
func tail(b []byte) string {
	const max = 512
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(bytes.TrimSpace(b))
}

// Func is what guard.Options.Notify takes: each notice about call c,
// delivered by n, with the command that resolves it on journal (its path).
func (n *Notifier) Func(journal string) func(notice string, c pending.Call) {
	if !n.Enabled() {
		return nil
	}
	return func(notice string, c pending.Call) {
		server := c.ServerAlias
		if server == "" {
			server = c.Server
		}
		n.Notify(Event{Event: notice, CallID: c.ID, Server: server, Tool: c.Tool, Key: c.Key, State: string(c.State),
			Reason: c.Reason, At: time.Now().UTC(),
			Resolve: fmt.Sprintf("mcp-confirm --db %s show %d", shellQuote(journal), c.ID)})
	}
}

// Recovered tells of the calls of ids, which this process's recovery of
// journal j turned unknown (the process that was sending them died): an
// unknown event for each that is still unknown. Only the process whose
// recovery turned a call unknown has its id, so each is told once.
func (n *Notifier) Recovered(ctx context.Context, j *pending.Journal, ids []int64) {
	if !n.Enabled() || len(ids) == 0 {
		return
	}
	f := n.Func(j.Path())
	for _, id := range ids {
		c, err := j.Get(ctx, id)
		if err != nil {
			n.log.Warn("recovered call not notified: cannot read it", "call", id, "err", err)
			continue
		}
		if c.State == pending.StateUnknown {
			f(EventUnknown, c)
		}
	}
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	for _, r := range s {
		if !(r == '/' || r == '.' || r == '-' || r == '_' || r == '~' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
