package idempotency

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus"
)

// WithMetrics registers the middleware's Metrics on reg, which the server
// owns and serves (promhttp). New fails if reg refuses them (registered
// twice).
func WithMetrics(reg prometheus.Registerer) Option {
	return func(m *Middleware) error {
		if reg == nil {
			return errors.New("idempotency: WithMetrics needs a Registerer")
		}
		m.registerer = reg
		return nil
	}
}

// Metrics are the signals that show a server's owner whether deduplication
// works. Label "by" is "key" or "window"; every label has a small fixed set
// of values, except client, which is sanitised and capped (maxClientLabels
// names, then "other").
//
//	idempotency_writes_total{outcome}              every write, by WriteOutcome
//	idempotency_dedupe_hits_total{by,kind}         repeats, by EventKind (replayed, in_progress,
//	                                               lease_expired, key_reused, rerun, reclaimed)
//	idempotency_replays_total{by}                  stored results returned
//	idempotency_in_progress_answers_total{by}      in-progress answers (live lease)
//	idempotency_expired_leases_total{by}           expired leases found (answered unknown, or reclaimed)
//	idempotency_store_failures_total               store reads or writes that failed
//	idempotency_sessions_total{client}             sessions started (ObserveSessions)
//	idempotency_records{by,state}                  unexpired records in the store, read at scrape
type Metrics struct {
	writes        *prometheus.CounterVec
	dedupeHits    *prometheus.CounterVec
	replays       *prometheus.CounterVec
	inProgress    *prometheus.CounterVec
	leaseExpired  *prometheus.CounterVec
	storeFailures prometheus.Counter
	sessions      *prometheus.CounterVec
	records       *prometheus.Desc
	counter       recordCounter // nil when the store cannot count its records
	now           func() time.Time

	mu      sync.Mutex // guards clients
	clients map[string]bool
}

// maxClientLabels bounds the client label's values; later names count as
// "other".
const maxClientLabels = 32

// recordCounter is a Store that can count its unexpired records.
type recordCounter interface {
	CountRecords(ctx context.Context, now time.Time) (keys, window map[State]int64, err error)
}

func newMetrics(store Store, now func() time.Time) *Metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idempotency", Name: name, Help: help}, labels)
	}
	mt := &Metrics{
		writes:       counter("writes_total", "Writes the middleware saw, by outcome.", "outcome"),
		dedupeHits:   counter("dedupe_hits_total", "Repeats of a key or of a keyless call inside the dedupe window, by what was found.", "by", "kind"),
		replays:      counter("replays_total", "Stored results returned instead of running again.", "by"),
		inProgress:   counter("in_progress_answers_total", "In-progress answers to a repeat while the first execution runs.", "by"),
		leaseExpired: counter("expired_leases_total", "Processing records found with their lease expired.", "by"),
		storeFailures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "idempotency", Name: "store_failures_total",
			Help: "Reads or writes of the idempotency store that failed."}),
		sessions: counter("sessions_total", "MCP sessions started (initialize, or server/discover in 2026-07-28), by the client's declared name (sanitised, capped).", "client"),
		records: prometheus.NewDesc("idempotency_records", "Unexpired records in the store, by kind and state.",
			[]string{"by", "state"}, nil),
		now:     now,
		clients: map[string]bool{},
	}
	mt.counter, _ = store.(recordCounter)
	// Every series of a fixed label set starts at 0, so a scrape shows them
	// before the first event and rates work from the start.
	for _, o := range writeOutcomes {
		mt.writes.WithLabelValues(string(o))
	}
	for _, by := range []string{"key", "window"} {
		for _, k := range []EventKind{EventReplayed, EventInProgress, EventLeaseExpired, EventRerun, EventReclaimed} {
			mt.dedupeHits.WithLabelValues(by, string(k))
		}
		mt.replays.WithLabelValues(by)
		mt.inProgress.WithLabelValues(by)
		mt.leaseExpired.WithLabelValues(by)
	}
	mt.dedupeHits.WithLabelValues("key", string(EventKeyReused))
	return mt
}

// Describe implements prometheus.Collector.
func (mt *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range mt.collectors() {
		c.Describe(ch)
	}
	ch <- mt.records
}

// Collect implements prometheus.Collector. The record counts are read from
// the store at each scrape.
func (mt *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range mt.collectors() {
		c.Collect(ch)
	}
	if mt.counter == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	keys, window, err := mt.counter.CountRecords(ctx, mt.now())
	if err != nil {
		ch <- prometheus.NewInvalidMetric(mt.records, err)
		return
	}
	for by, counts := range map[string]map[State]int64{"key": keys, "window": window} {
		for _, st := range []State{StateProcessing, StateCompleted, StateFailed} {
			ch <- prometheus.MustNewConstMetric(mt.records, prometheus.GaugeValue, float64(counts[st]), by, string(st))
		}
	}
}

func (mt *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{mt.writes, mt.dedupeHits, mt.replays, mt.inProgress, mt.leaseExpired, mt.storeFailures, mt.sessions}
}

// event counts a dedupe hit or store failure.
func (mt *Metrics) event(e Event) {
	if e.Kind == EventStoreFailed {
		mt.storeFailures.Inc()
		return
	}
	by := "key"
	if e.Window != "" {
		by = "window"
	}
	mt.dedupeHits.WithLabelValues(by, string(e.Kind)).Inc()
	switch e.Kind {
	case EventReplayed:
		mt.replays.WithLabelValues(by).Inc()
	case EventInProgress:
		mt.inProgress.WithLabelValues(by).Inc()
	case EventLeaseExpired, EventReclaimed:
		mt.leaseExpired.WithLabelValues(by).Inc()
	}
}

// clientLabel is the client label for a declared name: cleaned, "unnamed"
// when empty, "other" once maxClientLabels names have been seen.
func (mt *Metrics) clientLabel(name string) string {
	label := cleanName(name)
	if label == "" {
		label = "unnamed"
	}
	mt.mu.Lock()
	defer mt.mu.Unlock()
	if !mt.clients[label] {
		if len(mt.clients) >= maxClientLabels {
			return "other"
		}
		mt.clients[label] = true
	}
	return label
}

// ObserveSessions adds hooks to hooks (give them to the server with
// server.WithHooks) that count each session started, by its client's
// declared name, and with WithLogger log it. A session starts with the
// initialize handshake; protocol 2026-07-28 has neither handshake nor
// sessions, so there a server/discover counts as the start.
func (m *Middleware) ObserveSessions(hooks *server.Hooks) {
	hooks.AddAfterInitialize(func(ctx context.Context, _ any, req *mcp.InitializeRequest, _ *mcp.InitializeResult) {
		m.sessionStarted(ctx, "initialize", req.Params.ClientInfo)
	})
	hooks.AddAfterDiscover(func(ctx context.Context, _ any, _ *mcp.DiscoverRequest, _ *mcp.DiscoverResult) {
		var client mcp.Implementation
		if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.ClientInfo != nil {
			client = *info.ClientInfo
		}
		m.sessionStarted(ctx, "discover", client)
	})
}

func (m *Middleware) sessionStarted(ctx context.Context, via string, client mcp.Implementation) {
	if m.metrics != nil {
		m.metrics.sessions.WithLabelValues(m.metrics.clientLabel(client.Name)).Inc()
	}
	if m.log != nil {
		var session string
		if s := server.ClientSessionFromContext(ctx); s != nil {
			session = s.SessionID()
		}
		m.log.LogAttrs(ctx, slog.LevelInfo, "session started", slog.String("via", via), slog.String("session", session),
			slog.String("client", cleanName(client.Name)), slog.String("client_version", cleanName(client.Version)))
	}
}
