package demo

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// EndpointPath is where ServeHTTP answers MCP.
const EndpointPath = "/mcp"

// ServeHTTP runs a demo server over Streamable HTTP on opts.HTTPAddr until
// ctx ends, logging the URL it bound (port 0 picks one). With
// opts.CutAfterCommit, the first N create_order executions commit and then
// their connection is closed without the response: the lost response of a
// load balancer's cut, the case mcp-confirm exists for. The server keeps
// its SSE events, so a stream that carried events (progress, with
// opts.Delay) before the cut can be resumed, and the answer recovered. With
// opts.ExpireSessions, each create_order's session is expired after it.
// opts.Protocols restricts the protocol versions it offers.
func ServeHTTP(ctx context.Context, opts Options) error {
	s, stop, err := start(ctx, opts)
	if err != nil {
		return err
	}
	defer stop()
	ln, err := net.Listen("tcp", opts.HTTPAddr)
	if err != nil {
		return &ListenError{Addr: opts.HTTPAddr, What: "MCP over HTTP", Err: err}
	}
	mux := http.NewServeMux()
	// Events are kept (in memory), so that a client whose response stream
	// broke may resume it with Last-Event-ID and be sent what it missed.
	var h http.Handler = withCut(server.NewStreamableHTTPServer(s.mcp,
		server.WithEndpointPath(EndpointPath), server.WithStreamableHTTPLogger(s.log),
		server.WithEventStore(server.NewInMemoryEventStore()),
		server.WithStreamableHTTPProtocolVersions(opts.Protocols...)))
	if opts.ExpireSessions {
		h = expireSessions(h, s.log)
	}
	mux.Handle(EndpointPath, h)
	// A cut connection makes net/http complain of writes on it: debug, not noise.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ConnContext: withConn,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	done := make(chan error, 1)
	scheme := "http"
	if opts.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(opts.TLSCert, opts.TLSKey)
		if err != nil {
			ln.Close()
			return fmt.Errorf("--tls-cert, --tls-key: %w", err)
		}
		// ServeTLS offers h2 as well as http/1.1, as any Go server does.
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
		scheme = "https"
		go func() { done <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { done <- srv.Serve(ln) }()
	}
	s.log.Info("demo server listening", "url", scheme+"://"+ln.Addr().String()+EndpointPath)
	select {
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(shut)
		<-done
		s.log.Info("demo server stopped", "dedupe_hits", s.DedupeHits())
		return nil
	case err := <-done:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("serve http: %w", err)
	}
}

type (
	cutKey  struct{}
	connKey struct{}
)

// withCut gives each request's context a function that closes its
// connection at once, without a response. It closes the net.Conn itself
// (safe from any goroutine) rather than hijack the ResponseWriter: mcp-go
// may be flushing progress events on it from a goroutine of its own, and
// a hijack races with that flush.
func withCut(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cut := func() bool {
			conn, ok := r.Context().Value(connKey{}).(net.Conn)
			return ok && conn.Close() == nil
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), cutKey{}, cut)))
	})
}

// withConn puts each connection into its requests' contexts, for withCut.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// expireSessions answers 404 to every request on a session that has made a
// create_order (after that request ends), before the server sees it: a
// server that expired the session, which by the MCP spec must answer 404,
// and which ran nothing. Sessions exist only in the 2025 era, so the
// server's 2026-07-28 discovery is answered "method not found": clients
// then initialize a session, as with a server of 2025-11-25.
func expireSessions(next http.Handler, log *slog.Logger) http.Handler {
	var expired sync.Map
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sid := r.Header.Get("Mcp-Session-Id")
		if _, gone := expired.Load(sid); gone && sid != "" {
			log.Info("request on an expired session answered 404 (--expire-sessions)", "session", sid, "method", r.Method)
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		write := false
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if err != nil {
				http.Error(w, "cannot read the request", http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			_ = json.Unmarshal(body, &req)
			if req.Method == "server/discover" && len(req.ID) > 0 {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`))
				return
			}
			write = sid != "" && req.Method == "tools/call" && req.Params.Name == "create_order"
		}
		next.ServeHTTP(w, r)
		if write {
			expired.Store(sid, true)
			log.Info("session expired after a create_order (--expire-sessions)", "session", sid)
		}
	})
}
