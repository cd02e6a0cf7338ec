// Package demo is the built-in orders-and-budgets MCP server (SPEC §6): a
// write tool guarded by the idempotency middleware, two read tools, its state
// in a SQLite file, and faults to inject (a lost response, slowness, failures).
package demo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcp-confirm/mcp-confirm/idempotency"
)

// Name is the implementation name the server declares; clients remember a
// call's server by it.
const Name = "mcp-confirm-demo"

// Version is the server version it declares.
const Version = "0.1.0"

// Options configure the demo server. The zero value is a well-behaved server
// on a temporary database.
type Options struct {
	DB              string        // database file; "" means a temporary file removed on Close
	Delay           time.Duration // every create_order takes this long, with progress
	HangAfterCommit int           // the first N create_order executions commit, then never answer
	// CutAfterCommit, over HTTP (ServeHTTP): the first N create_order
	// executions commit, then their connection is closed, unanswered.
	CutAfterCommit int
	// ExpireSessions, over HTTP: after each create_order, its session is
	// forgotten, and any later request on it is answered 404 (unexecuted),
	// as a server that expires sessions answers: the client must start a
	// new session.
	ExpireSessions bool
	// Protocols, over HTTP: the protocol versions the server advertises
	// (server/discover); none means every version mcp-go implements. Only
	// 2025 versions: clients initialize a session, whose streams can be
	// resumed (2026-07-28 removed resumption).
	Protocols []string
	// HTTPAddr is the host:port ServeHTTP listens on (port 0 picks one).
	HTTPAddr string
	// TLSCert and TLSKey, over HTTP: PEM files of a certificate and its
	// key; ServeHTTP then serves https (HTTP/2 negotiated, as Go's server
	// does), for tests of what an h2 connection does to a write.
	TLSCert, TLSKey string
	// AnswerAfter, with HangAfterCommit, makes those executions answer
	// after all, this long after their commit, even if the client gave up
	// on them meanwhile: the response that was late, not lost.
	AnswerAfter time.Duration
	// AnswerWhen, with HangAfterCommit, makes those executions answer once
	// a file at this path exists (a test's "now"), or never if the client
	// gives up first.
	AnswerWhen string
	// UnusableAnswer: the first N create_order answers are replaced, on the
	// wire, by a line that is not a usable tool result (answers.go).
	UnusableAnswer int
	// AnswerTwice: the first N create_order answers are written twice, the
	// second copy sometimes different (answers.go).
	AnswerTwice int
	FailRate    float64 // share of create_order executions that fail before committing
	Seed        uint64  // seeds the fail-rate draws
	// DedupeWindow, when more than 0, deduplicates create_order calls sent
	// without a key: an identical one within the window is answered with the
	// first one's result (idempotency.WithDedupeWindow). Off by default.
	DedupeWindow time.Duration
	DedupeScope  idempotency.DedupeScope // what else makes two keyless calls the same
	// MetricsAddr, if set, is a TCP address (host:port; port 0 picks one)
	// on which Serve answers GET /metrics for Prometheus, logging the
	// address it bound.
	MetricsAddr string
	Logger      *slog.Logger // default: discard
	Now         func() time.Time
}

// Server is a demo server and the database behind it.
type Server struct {
	mcp    *server.MCPServer
	db     *sql.DB
	path   string
	temp   bool
	opts   Options
	log    *slog.Logger
	idem   *idempotency.Middleware
	reg    *prometheus.Registry
	hangs  atomic.Int64 // executions that hung so far
	randMu sync.Mutex
	rand   *rand.Rand
}

// NewServer opens the database and builds the MCP server.
func NewServer(ctx context.Context, opts Options) (*Server, error) {
	s := &Server{opts: opts, path: opts.DB, log: opts.Logger, rand: rand.New(rand.NewPCG(opts.Seed, opts.Seed))}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.opts.Now == nil {
		s.opts.Now = time.Now
	}
	if s.path == "" {
		f, err := os.CreateTemp("", "mcp-confirm-demo-*.db")
		if err != nil {
			return nil, fmt.Errorf("create temporary demo database: %w", err)
		}
		f.Close()
		s.path, s.temp = f.Name(), true
	}
	db, err := openDB(ctx, s.path)
	if err != nil {
		s.removeTemp()
		return nil, err
	}
	s.db = db
	store, err := idempotency.NewSQLiteStore(ctx, db)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("open idempotency store in %s: %w", s.path, err)
	}
	s.reg = prometheus.NewRegistry()
	with := []idempotency.Option{idempotency.WithLogger(s.log), idempotency.WithMetrics(s.reg)}
	if opts.DedupeWindow > 0 {
		with = append(with, idempotency.WithDedupeWindow(opts.DedupeWindow, opts.DedupeScope))
	}
	s.idem, err = idempotency.New(idempotency.Options{
		Store:  store,
		KeyArg: "idempotency_key",
		// Outlast the slowest write this server is told to make.
		Lease: idempotency.DefaultLease + 2*opts.Delay,
		// Safe here: create_order writes only through Commit, so a key left
		// processing proves its order was never committed.
		ReclaimExpiredLeases: true,
		Now:                  s.opts.Now,
		OnEvent:              s.logEvent,
	}, with...)
	if err != nil {
		s.Close()
		return nil, err
	}
	hooks := &server.Hooks{}
	s.idem.ObserveSessions(hooks)
	s.mcp = server.NewMCPServer(Name, Version, server.WithToolCapabilities(false), server.WithRecovery(), server.WithHooks(hooks))
	s.addTools()
	s.log.Info("demo server ready", "db", s.path, "delay", opts.Delay, "hang_after_commit", opts.HangAfterCommit,
		"cut_after_commit", opts.CutAfterCommit, "expire_sessions", opts.ExpireSessions,
		"fail_rate", opts.FailRate, "unusable_answer", opts.UnusableAnswer, "answer_twice", opts.AnswerTwice, "seed", opts.Seed,
		"dedupe_window", opts.DedupeWindow, "dedupe_scope", opts.DedupeScope.String())
	return s, nil
}

// MCPServer is the mcp-go server, for serving over any transport.
func (s *Server) MCPServer() *server.MCPServer { return s.mcp }

// DBPath is the database file in use (a temporary one if Options.DB was "").
func (s *Server) DBPath() string { return s.path }

// Metrics is the registry the server's idempotency metrics are on.
func (s *Server) Metrics() *prometheus.Registry { return s.reg }

// DedupeHits counts repeats (of keys, and with DedupeWindow of keyless
// calls) answered without a second execution.
func (s *Server) DedupeHits() int64 { return s.idem.DedupeHits() }

// Close closes the database and removes it if it was temporary.
func (s *Server) Close() error {
	err := s.db.Close()
	s.removeTemp()
	return err
}

func (s *Server) removeTemp() {
	if s.temp {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Remove(s.path + suffix)
		}
	}
}

// start makes the server both transports serve, and its metrics listener
// when asked; stop closes both.
func start(ctx context.Context, opts Options) (s *Server, stop func(), err error) {
	s, err = NewServer(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	if opts.MetricsAddr == "" {
		return s, func() { s.Close() }, nil
	}
	stopMetrics, err := s.serveMetrics(opts.MetricsAddr)
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return s, func() { stopMetrics(); s.Close() }, nil
}

// Serve runs a demo server over stdio until stdin closes or ctx ends. Logs go
// to opts.Logger; stdout carries protocol only.
func Serve(ctx context.Context, opts Options, stdin io.Reader, stdout io.Writer) error {
	s, stop, err := start(ctx, opts)
	if err != nil {
		return err
	}
	defer stop()
	if opts.UnusableAnswer > 0 || opts.AnswerTwice > 0 {
		stdin, stdout = newAnswerFaults(opts, s.log).wrap(stdin, stdout)
	}
	stdio := server.NewStdioServer(s.mcp)
	stdio.SetErrorLogger(slog.NewLogLogger(s.log.Handler(), slog.LevelError))
	err = stdio.Listen(ctx, stdin, stdout)
	s.log.Info("demo server stopped", "dedupe_hits", s.DedupeHits())
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("serve stdio: %w", err)
	}
	return nil
}

// logEvent logs store failures; every write, repeats included, has its
// own line from the middleware (idempotency.WithLogger).
func (s *Server) logEvent(e idempotency.Event) {
	if e.Kind == idempotency.EventStoreFailed {
		s.log.Error("idempotency store failed", "key", e.Key, "window", e.Window, "tool", e.Tool, "err", e.Err)
	}
}

// ListenError is an address (--metrics, --http) that could not be listened on.
type ListenError struct {
	Addr string
	What string // what was to be served there; "" is metrics
	Err  error
}

func (e *ListenError) Error() string {
	what := e.What
	if what == "" {
		what = "metrics"
	}
	return fmt.Sprintf("listen for %s on %s: %v", what, e.Addr, e.Err)
}

func (e *ListenError) Unwrap() error { return e.Err }

// serveMetrics answers GET /metrics on addr until stop is called, and logs
// the address bound (addr may ask for port 0).
func (s *Server) serveMetrics(addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &ListenError{Addr: addr, Err: err}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics server stopped", "err", err)
		}
	}()
	s.log.Info("metrics listening", "metrics_url", "http://"+ln.Addr().String()+"/metrics")
	return func() {
		srv.Close()
		<-done
	}, nil
}

// failNow draws whether this execution fails (--fail-rate).
func (s *Server) failNow() bool {
	if s.opts.FailRate <= 0 {
		return false
	}
	s.randMu.Lock()
	defer s.randMu.Unlock()
	return s.rand.Float64() < s.opts.FailRate
}
