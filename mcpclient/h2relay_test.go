package mcpclient_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-confirm/mcp-confirm/internal/h2fault"
)

// The tests of "no write is sent twice below the journal" put a
// frame-level HTTP/2 relay (internal/h2fault) between the client and a
// real HTTP/2 server (Go's, over TLS), which faults the first tools/call
// once the server has executed it: GOAWAY (last stream 0) or RST_STREAM
// (REFUSED_STREAM or PROTOCOL_ERROR), all of which Go's HTTP/2 client
// treats as "retry".

// h2Fault is what the relay answers the executed tools/call with.
type h2Fault = h2fault.Fault

const (
	faultGoAway   = h2fault.GoAway
	faultRefused  = h2fault.RefusedStream
	faultProtocol = h2fault.ProtocolError
)

// h2WriteServer is a real mcp-go Streamable HTTP server over TLS with
// HTTP/2, one write tool, create_order, that counts its executions. The
// first execution signals ran and then holds its response until the
// request ends (the relay resets it), so that the relay's fault, not an
// answer, is what the client gets.
type h2WriteServer struct {
	addr     string
	executed atomic.Int64
	ran      chan struct{}
}

func newH2WriteServer(t *testing.T) *h2WriteServer {
	t.Helper()
	w := &h2WriteServer{ran: make(chan struct{})}
	release := make(chan struct{})
	s := server.NewMCPServer("h2-writes", "1.0.0")
	s.AddTool(mcp.NewTool("create_order", mcp.WithString("item")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if w.executed.Add(1) == 1 {
				close(w.ran)
				select {
				case <-ctx.Done():
				case <-release:
				}
			}
			return mcp.NewToolResultText("order placed"), nil
		})
	ts := httptest.NewUnstartedServer(server.NewStreamableHTTPServer(s))
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(release) }) // runs first: no handler left waiting
	w.addr = ts.Listener.Addr().String()
	return w
}

// testCert is the relay's certificate (h2fault.Cert): pool for an
// in-process client, file for SSL_CERT_FILE.
type testCert struct {
	*h2fault.Cert
	pool *x509.CertPool
	file string
}

func newTestCert(t *testing.T) *testCert {
	c := h2fault.NewCert(t)
	return &testCert{Cert: c, pool: c.Pool, file: c.File}
}

// h2Relay is the relay (h2fault) with one fault, on the first tools/call,
// sent once the server has executed it.
type h2Relay struct {
	*h2fault.Relay
	url string
}

func newH2Relay(t *testing.T, cert *testCert, srv *h2WriteServer, fault h2Fault) *h2Relay {
	t.Helper()
	var armed atomic.Bool
	plan := func(body []byte) (h2fault.Fault, func(<-chan struct{}) bool) {
		if !bytes.Contains(body, []byte(`"method":"tools/call"`)) || armed.Swap(true) {
			return "", nil
		}
		return fault, func(done <-chan struct{}) bool {
			select {
			case <-srv.ran:
				return true
			case <-done:
				return false
			}
		}
	}
	rl := h2fault.Start(t, cert.Cert, srv.addr, plan)
	return &h2Relay{Relay: rl, url: rl.URL}
}

// counts is what the relay saw: tools/call requests, whether the fault was
// sent, and how many client connections spoke h2.
func (rl *h2Relay) counts() (toolCalls int, injected bool, h2Conns int) {
	calls, n, conns := rl.Counts()
	return calls, n > 0, conns
}
