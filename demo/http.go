package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// EndpointPath is where ServeHTTP answers MCP.
const EndpointPath = "/mcp"

// ServeHTTP runs a demo server over Streamable HTTP on opts.HTTPAddr until
// ctx ends, logging the URL it bound (port 0 picks one). With
// opts.CutAfterCommit, the first N create_order executions commit and then
// their connection is closed without the response: the lost response of a
// load balancer's cut, the case mcp-confirm exists for.
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
	mux.Handle(EndpointPath, withCut(server.NewStreamableHTTPServer(s.mcp,
		server.WithEndpointPath(EndpointPath), server.WithStreamableHTTPLogger(s.log))))
	// A cut connection makes net/http complain of writes on it: debug, not noise.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	s.log.Info("demo server listening", "url", "http://"+ln.Addr().String()+EndpointPath)
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

type cutKey struct{}

// withCut gives each request's context a function that closes its
// connection at once, without a response; the tool handler runs on the
// request's own goroutine, so it may hijack the connection.
func withCut(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cut := func() bool {
			hj, ok := w.(http.Hijacker)
			if !ok {
				return false
			}
			conn, _, err := hj.Hijack()
			if err != nil {
				return false
			}
			return conn.Close() == nil
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), cutKey{}, cut)))
	})
}
