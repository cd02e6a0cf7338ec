// Package metrics serves Prometheus metrics of a long-running guarded host
// (mcp-confirm proxy --metrics): what its calls did, kept apart the way the
// product keeps them apart (a timeout is not a failure: it is unknown), how
// many calls the journal holds unknown now and since when, and what the
// journal's commits cost.
//
//	mcp_confirm_calls_total{server,tool,kind,outcome}  calls this process ran; outcome is
//	                                                   succeeded, failed, not_sent (provably
//	                                                   not sent), timeout and unknown (both
//	                                                   unknown: never resent), held (an
//	                                                   identical call's resend, not sent),
//	                                                   refused (bad input, no such tool), or
//	                                                   the state an operator left it in
//	mcp_confirm_replays_total{server,tool}             answers the server (or the journal)
//	                                                   gave from a stored result
//	mcp_confirm_call_duration_seconds{kind}            how long calls took, start to answer
//	mcp_confirm_sessions_started_total                 sessions this process started with its
//	                                                   server (a restart is one more)
//	mcp_confirm_journal_commit_seconds{sync}           journal commits (sync="full" for
//	                                                   intents and decisions, "normal" else)
//	mcp_confirm_journal_commit_failures_total          commits that failed
//	mcp_confirm_journal_calls{state}                   calls in the journal, every process's,
//	                                                   read at scrape
//	mcp_confirm_unknown_calls{server,tool}             unknown calls in the journal now
//	mcp_confirm_unknown_oldest_age_seconds{server,tool} age of the oldest of them
//
// Server and tool names come from servers, which may be hostile: label
// values are cleaned (control characters dropped, at most 64 bytes) and
// capped (maxNames distinct values each, then "other"), so a server cannot
// grow the scrape without bound.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// maxNames bounds the distinct values of the server and of the tool label.
const maxNames = 64

// maxUnknownScan bounds the unknown calls read at one scrape; beyond it the
// per-tool gauges count the newest ones only (journal_calls stays exact).
const maxUnknownScan = 5000

// Metrics are one process's metrics, on a registry of their own.
type Metrics struct {
	reg      *prometheus.Registry
	server   func() string // the server's declared name, for this process's calls
	calls    *prometheus.CounterVec
	replays  *prometheus.CounterVec
	duration *prometheus.HistogramVec
	commits  *prometheus.HistogramVec
	failures prometheus.Counter
	servers  names
	tools    names
}

// Options configure New.
type Options struct {
	// Journal is read at each scrape for the journal gauges; nil: none.
	Journal *pending.Journal
	// Server is the name the server this process's calls go to declared
	// (serverInfo.name, as the journal records it): the server label.
	Server func() string
	// Sessions, when set, is the number of sessions started with the
	// server so far.
	Sessions func() int
}

// New makes the metrics and registers them.
func New(opts Options) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), server: opts.Server}
	if m.server == nil {
		m.server = func() string { return "" }
	}
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcp_confirm_calls_total",
		Help: "Tool calls this process ran, by how they ended; timeout and unknown are not failures: the server may have run them."},
		[]string{"server", "tool", "kind", "outcome"})
	m.replays = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcp_confirm_replays_total",
		Help: "Answers the server or the journal gave from a stored result (a deduplicated resend)."}, []string{"server", "tool"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mcp_confirm_call_duration_seconds",
		Help: "Tool calls from start to answer.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"kind"})
	m.commits = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mcp_confirm_journal_commit_seconds",
		Help:    "Journal commits, BEGIN to the end of COMMIT; sync=full is an intent or a decision (a full fsync).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 3, 10)}, []string{"sync"})
	m.failures = prometheus.NewCounter(prometheus.CounterOpts{Name: "mcp_confirm_journal_commit_failures_total",
		Help: "Journal commits that failed."})
	m.reg.MustRegister(m.calls, m.replays, m.duration, m.commits, m.failures)
	if opts.Sessions != nil {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mcp_confirm_sessions_started_total",
			Help: "Sessions this process started with its server; each restart is one more."},
			func() float64 { return float64(opts.Sessions()) }))
	}
	if opts.Journal != nil {
		m.SetJournal(opts.Journal)
	}
	return m
}

// SetJournal adds the journal's gauges (read at each scrape) and commit
// latencies, for a process that opens its journal after it made its
// metrics (the console: its guard must be given ObserveCall as it is
// made). Called at most once, and not with Options.Journal.
func (m *Metrics) SetJournal(j *pending.Journal) {
	m.reg.MustRegister(&journalCollector{j: j, m: m})
	j.ObserveCommits(m.observeCommit)
}

// Registry is where the metrics are, for a caller serving them itself.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ObserveCall counts one call; it is guard.Options.Observe.
func (m *Metrics) ObserveCall(o guard.Observation) {
	kind := string(o.Kind)
	if kind == "" {
		kind = "none"
	}
	server, tool := m.servers.label(m.server()), m.tools.label(o.Tool)
	m.calls.WithLabelValues(server, tool, kind, Outcome(o)).Inc()
	if o.Result.Replayed {
		m.replays.WithLabelValues(server, tool).Inc()
	}
	if o.Kind != "" {
		m.duration.WithLabelValues(kind).Observe(o.Took.Seconds())
	}
}

// Outcome is a call's outcome label (see the package comment).
func Outcome(o guard.Observation) string {
	var held *guard.HeldError
	switch {
	case errors.As(o.Err, &held):
		return "held"
	case o.Result.State == "":
		if o.Err == nil {
			return "unknown"
		}
		return "refused"
	case o.Result.State == pending.StateFailed && o.Err != nil:
		return "not_sent"
	case o.Result.State == pending.StateUnknown:
		r := o.Result.Call.Reason
		if strings.HasPrefix(r, string(mcpclient.ReasonIdleTimeout)) || strings.HasPrefix(r, string(mcpclient.ReasonAbsoluteTimeout)) {
			return "timeout"
		}
		return "unknown"
	}
	return string(o.Result.State)
}

func (m *Metrics) observeCommit(durable bool, took time.Duration, err error) {
	sync := "normal"
	if durable {
		sync = "full"
	}
	if err != nil {
		m.failures.Inc()
		return
	}
	m.commits.WithLabelValues(sync).Observe(took.Seconds())
}

// journalCollector reads the journal's gauges at scrape.
type journalCollector struct {
	j *pending.Journal
	m *Metrics
}

var (
	journalCallsDesc = prometheus.NewDesc("mcp_confirm_journal_calls",
		"Calls in the journal, of every process that writes it, by state.", []string{"state"}, nil)
	unknownDesc = prometheus.NewDesc("mcp_confirm_unknown_calls",
		"Unknown calls in the journal now: each waits for an operator (mcp-confirm, or reconcile).", []string{"server", "tool"}, nil)
	unknownAgeDesc = prometheus.NewDesc("mcp_confirm_unknown_oldest_age_seconds",
		"Age of the oldest unknown call in the journal.", []string{"server", "tool"}, nil)
)

func (c *journalCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- journalCallsDesc
	ch <- unknownDesc
	ch <- unknownAgeDesc
}

func (c *journalCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.j.Counts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(journalCallsDesc, err)
		return
	}
	for _, s := range []pending.State{pending.StateInFlight, pending.StateSucceeded, pending.StateFailed,
		pending.StateUnknown, pending.StateApplied, pending.StateAbandoned} {
		ch <- prometheus.MustNewConstMetric(journalCallsDesc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
	unknown, err := c.j.List(ctx, pending.Filter{States: []pending.State{pending.StateUnknown}, Limit: maxUnknownScan})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(unknownDesc, err)
		return
	}
	type group struct {
		n      int
		oldest time.Time
	}
	groups := map[[2]string]*group{}
	for _, call := range unknown {
		k := [2]string{c.m.servers.label(call.Server), c.m.tools.label(call.Tool)}
		g := groups[k]
		if g == nil {
			g = &group{oldest: call.CreatedAt}
			groups[k] = g
		}
		g.n++
		if call.CreatedAt.Before(g.oldest) {
			g.oldest = call.CreatedAt
		}
	}
	now := time.Now()
	for k, g := range groups {
		ch <- prometheus.MustNewConstMetric(unknownDesc, prometheus.GaugeValue, float64(g.n), k[0], k[1])
		ch <- prometheus.MustNewConstMetric(unknownAgeDesc, prometheus.GaugeValue, now.Sub(g.oldest).Seconds(), k[0], k[1])
	}
}

// names cleans label values and caps how many distinct ones there are.
type names struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (n *names) label(raw string) string {
	v := clean(raw)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seen[v] {
		return v
	}
	if len(n.seen) >= maxNames {
		return "other"
	}
	if n.seen == nil {
		n.seen = map[string]bool{}
	}
	n.seen[v] = true
	return v
}

// clean drops control and invalid characters and keeps at most 64 bytes.
func clean(s string) string {
	s = strings.ToValidUTF8(s, "")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, s)
	if len(s) > 64 {
		cut := 64
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	if s == "" {
		return "unnamed"
	}
	return s
}

// CheckAddr refuses an address Serve could not listen on for its form,
// before anything else is opened.
func CheckAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		if n, perr := strconv.Atoi(port); perr != nil || n < 0 || n > 65535 {
			err = errors.New("bad port")
		}
	}
	if err != nil {
		return fmt.Errorf("--metrics %q: want HOST:PORT, such as 127.0.0.1:9464 (port 0 picks one; without a host, loopback)", addr)
	}
	return nil
}

// Serve answers GET /metrics on addr until ctx ends. An address without a
// host (":9464") is loopback: metrics are served to other machines only
// when a host is given. It returns the URL it serves.
func (m *Metrics) Serve(ctx context.Context, addr string, log *slog.Logger) (string, error) {
	if err := CheckAddr(addr); err != nil {
		return "", err
	}
	host, port, _ := net.SplitHostPort(addr)
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return "", fmt.Errorf("--metrics %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && log != nil {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	return "http://" + ln.Addr().String() + "/metrics", nil
}
