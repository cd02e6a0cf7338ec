package mcpclient_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// A frame-level HTTP/2 relay for the tests of "no write is sent twice below
// the journal": it terminates TLS toward the client (with a certificate the
// client is made to trust), passes every frame on, verbatim, to a real
// HTTP/2 server (Go's, over TLS), and, once that server has executed the
// first tools/call, answers the client with a fault in place of the
// response: GOAWAY (last stream 0) or RST_STREAM (REFUSED_STREAM or
// PROTOCOL_ERROR), all of which Go's HTTP/2 client treats as "retry". The
// frames are not decoded beyond their 9-byte header (RFC 9113 §4.1); header
// blocks pass untouched, so both ends' HPACK state stays in step, since the
// server is never let send headers on the faulted stream (it is reset there
// with CANCEL before its handler returns).

const (
	frameData      = 0x0
	frameRSTStream = 0x3
	frameGoAway    = 0x7

	codeProtocol      = 0x1
	codeRefusedStream = 0x7
	codeCancel        = 0x8
)

// h2Fault is what the relay answers the executed tools/call with.
type h2Fault string

const (
	faultGoAway   h2Fault = "goaway"
	faultRefused  h2Fault = "refused-stream"
	faultProtocol h2Fault = "protocol-error"
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

// testCert is a self-signed certificate for 127.0.0.1, which is its own
// root: pool for an in-process client, file (PEM) for SSL_CERT_FILE.
type testCert struct {
	cert tls.Certificate
	pool *x509.CertPool
	file string
}

func newTestCert(t *testing.T) *testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "mcp-confirm h2 relay"},
		NotBefore:    time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	c := &testCert{cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool: x509.NewCertPool()}
	c.pool.AddCert(leaf)
	c.file = filepath.Join(t.TempDir(), "relay.pem")
	if err := os.WriteFile(c.file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// h2Relay is the relay (see above). One fault, on the first tools/call.
type h2Relay struct {
	t        *testing.T
	url      string
	upstream string
	fault    h2Fault
	ran      <-chan struct{} // closed when the server has executed the call

	mu        sync.Mutex // guards following
	toolCalls int        // tools/call request streams seen, over all connections
	faulted   bool       // the fault was armed (first tools/call)
	injected  bool       // the fault was sent
	h2Conns   int        // client connections that negotiated h2
	problems  []string
}

func newH2Relay(t *testing.T, cert *testCert, srv *h2WriteServer, fault h2Fault) *h2Relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rl := &h2Relay{t: t, url: "https://" + ln.Addr().String() + "/mcp", upstream: srv.addr, fault: fault, ran: srv.ran}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert.cert}, NextProtos: []string{"h2"}}
	var wg sync.WaitGroup
	var conns sync.Map
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Store(c, true)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conns.Delete(c)
				rl.serve(tls.Server(c, cfg))
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		conns.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true })
		wg.Wait()
		for _, p := range rl.problemList() {
			t.Errorf("relay: %s", p)
		}
	})
	return rl
}

func (rl *h2Relay) trouble(p string) {
	rl.mu.Lock()
	rl.problems = append(rl.problems, p)
	rl.mu.Unlock()
}

func (rl *h2Relay) problemList() []string {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return append([]string(nil), rl.problems...)
}

// counts is what the relay saw: tools/call requests, whether the fault was
// sent, and how many client connections spoke h2.
func (rl *h2Relay) counts() (toolCalls int, injected bool, h2Conns int) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return rl.toolCalls, rl.injected, rl.h2Conns
}

type frame struct {
	head    [9]byte
	payload []byte
}

func (f *frame) typ() byte      { return f.head[3] }
func (f *frame) stream() uint32 { return binary.BigEndian.Uint32(f.head[5:9]) & 0x7fffffff }
func (f *frame) bytes() []byte  { return append(f.head[:], f.payload...) }
func (f *frame) padded() bool   { return f.head[4]&0x8 != 0 }
func (f *frame) length() uint32 {
	return uint32(f.head[0])<<16 | uint32(f.head[1])<<8 | uint32(f.head[2])
}
func (f *frame) setLength(n int) { f.head[0], f.head[1], f.head[2] = byte(n>>16), byte(n>>8), byte(n) }
func (f *frame) dataBytes() []byte {
	p := f.payload
	if f.padded() && len(p) > 0 {
		pad := int(p[0])
		if 1+pad > len(p) {
			return nil
		}
		p = p[1 : len(p)-pad]
	}
	return p
}

func readFrame(r io.Reader) (*frame, error) {
	f := &frame{}
	if _, err := io.ReadFull(r, f.head[:]); err != nil {
		return nil, err
	}
	f.payload = make([]byte, f.length())
	if _, err := io.ReadFull(r, f.payload); err != nil {
		return nil, err
	}
	return f, nil
}

func newFrame(typ byte, stream uint32, payload []byte) []byte {
	f := &frame{payload: payload}
	f.setLength(len(payload))
	f.head[3] = typ
	binary.BigEndian.PutUint32(f.head[5:9], stream)
	return f.bytes()
}

// lockedWriter writes whole frames, one at a time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) write(b []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.w.Write(b)
	return err
}

const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

func (rl *h2Relay) serve(client *tls.Conn) {
	defer client.Close()
	if err := client.Handshake(); err != nil {
		return
	}
	if p := client.ConnectionState().NegotiatedProtocol; p != "h2" {
		rl.trouble("client negotiated " + p + ", not h2")
		return
	}
	rl.mu.Lock()
	rl.h2Conns++
	rl.mu.Unlock()
	up, err := tls.Dial("tcp", rl.upstream, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		rl.trouble("dial upstream: " + err.Error())
		return
	}
	defer up.Close()
	if p := up.ConnectionState().NegotiatedProtocol; p != "h2" {
		rl.trouble("upstream negotiated " + p + ", not h2")
		return
	}
	preface := make([]byte, len(clientPreface))
	if _, err := io.ReadFull(client, preface); err != nil || string(preface) != clientPreface {
		return
	}
	if _, err := up.Write(preface); err != nil {
		return
	}
	toClient, toServer := &lockedWriter{w: client}, &lockedWriter{w: up}
	var dropMu sync.Mutex
	dropped := map[uint32]bool{} // streams faulted: nothing more of them passes, either way
	isDropped := func(id uint32) bool {
		dropMu.Lock()
		defer dropMu.Unlock()
		return id != 0 && dropped[id]
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer client.Close()
		for {
			f, err := readFrame(up)
			if err != nil {
				return
			}
			if isDropped(f.stream()) {
				if f.typ() == 0x1 || f.typ() == 0x9 {
					// Headers dropped would put the client's HPACK out of step.
					rl.trouble("the server sent headers on the faulted stream")
				}
				continue
			}
			if toClient.write(f.bytes()) != nil {
				return
			}
		}
	}()
	data := map[uint32][]byte{}
	inject := func(id uint32) {
		select {
		case <-rl.ran:
		case <-done:
			return
		}
		dropMu.Lock()
		dropped[id] = true
		dropMu.Unlock()
		var fault []byte
		switch rl.fault {
		case faultGoAway:
			fault = newFrame(frameGoAway, 0, make([]byte, 8)) // last stream 0, NO_ERROR
		case faultRefused:
			fault = newFrame(frameRSTStream, id, binary.BigEndian.AppendUint32(nil, codeRefusedStream))
		case faultProtocol:
			fault = newFrame(frameRSTStream, id, binary.BigEndian.AppendUint32(nil, codeProtocol))
		}
		rl.mu.Lock()
		rl.injected = true // before the client can see it and the test look
		rl.mu.Unlock()
		_ = toClient.write(fault)
		// The server's handler is let go without its answer reaching anyone.
		_ = toServer.write(newFrame(frameRSTStream, id, binary.BigEndian.AppendUint32(nil, codeCancel)))
	}
	for {
		f, err := readFrame(client)
		if err != nil {
			break
		}
		id := f.stream()
		if isDropped(id) {
			continue
		}
		if f.typ() == frameData && id != 0 {
			before := len(data[id])
			data[id] = append(data[id], f.dataBytes()...)
			if isToolsCall(data[id]) && !isToolsCall(data[id][:before]) {
				rl.mu.Lock()
				rl.toolCalls++
				arm := !rl.faulted
				rl.faulted = true
				rl.mu.Unlock()
				if arm {
					go inject(id)
				}
			}
		}
		if toServer.write(f.bytes()) != nil {
			break
		}
	}
	up.Close()
	<-done
}

func isToolsCall(body []byte) bool {
	return bytes.Contains(body, []byte(`"method":"tools/call"`))
}
