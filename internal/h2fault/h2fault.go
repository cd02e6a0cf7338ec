// Package h2fault is a frame-level HTTP/2 relay for tests of "no write is
// sent twice below the journal" (issue 44, item 1): it terminates TLS
// toward the client (with a certificate the client is made to trust),
// passes every frame on, verbatim, to a real HTTP/2 server over TLS, and,
// for a request its Plan picks, once that server has run it, answers the
// client with a fault in place of the response: GOAWAY (last stream 0) or
// RST_STREAM (REFUSED_STREAM or PROTOCOL_ERROR), all of which Go's HTTP/2
// client treats as "retry". The frames are not decoded beyond their 9-byte
// header (RFC 9113 §4.1), and request bodies read as bytes; header blocks
// pass untouched, so both ends' HPACK state stays in step, since the server
// is never let send headers on the faulted stream (it is reset there with
// CANCEL, so its handler must still be running when the fault is sent: a
// server that holds the answer of what it ran).
package h2fault

import (
	"bytes"
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
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Fault is what the relay answers a faulted request with.
type Fault string

const (
	GoAway        Fault = "goaway"         // GOAWAY, last stream 0, NO_ERROR
	RefusedStream Fault = "refused-stream" // RST_STREAM REFUSED_STREAM
	ProtocolError Fault = "protocol-error" // RST_STREAM PROTOCOL_ERROR
)

const (
	frameData      = 0x0
	frameHeaders   = 0x1
	frameRSTStream = 0x3
	frameGoAway    = 0x7
	frameCont      = 0x9

	flagEndStream = 0x1
	flagPadded    = 0x8

	codeProtocol      = 0x1
	codeRefusedStream = 0x7
	codeCancel        = 0x8
)

// Cert is a self-signed certificate for 127.0.0.1 and localhost, which is
// its own root: Pool for an in-process client, File (PEM) for
// SSL_CERT_FILE, and KeyFile (PEM) with File for a server of its own.
type Cert struct {
	TLS     tls.Certificate
	Pool    *x509.CertPool
	File    string
	KeyFile string
}

// NewCert makes a Cert, its files in a directory of tb's.
func NewCert(tb testing.TB) *Cert {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
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
		tb.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	c := &Cert{TLS: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, Pool: x509.NewCertPool()}
	c.Pool.AddCert(leaf)
	dir := tb.TempDir()
	c.File, c.KeyFile = filepath.Join(dir, "relay.pem"), filepath.Join(dir, "relay-key.pem")
	if err := os.WriteFile(c.File, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(c.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		tb.Fatal(err)
	}
	return c
}

// Plan decides, for each request whose body the client has sent whole,
// whether to fault it: the fault ("" for none), and ran, which returns
// true once the server has run the request, or false (the request then
// passes unfaulted) if it gives up or done is closed (the connection
// ended). Plan is called on the connection's reading goroutine, in the
// order the bodies complete; ran on a goroutine of its own.
type Plan func(body []byte) (fault Fault, ran func(done <-chan struct{}) bool)

// Relay is the relay; URL is its endpoint (https://127.0.0.1:PORT/mcp).
type Relay struct {
	URL      string
	upstream string
	plan     Plan

	mu        sync.Mutex // guards following
	toolCalls int        // tools/call request bodies seen, over all connections
	injected  int        // faults sent
	h2Conns   int        // client connections that negotiated h2
	problems  []string
}

// Start runs a relay on loopback, with cert toward the client, in front of
// the HTTP/2 server at upstream (HOST:PORT, TLS, its certificate not
// checked), until tb ends. Problems not taken by Problems are reported then.
func Start(tb testing.TB, cert *Cert, upstream string, plan Plan) *Relay {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	rl := &Relay{URL: "https://" + ln.Addr().String() + "/mcp", upstream: upstream, plan: plan}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert.TLS}, NextProtos: []string{"h2"}}
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
	tb.Cleanup(func() {
		ln.Close()
		conns.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true })
		wg.Wait()
		for _, p := range rl.Problems() {
			tb.Errorf("h2 relay: %s", p)
		}
	})
	return rl
}

func (rl *Relay) trouble(p string) {
	rl.mu.Lock()
	rl.problems = append(rl.problems, p)
	rl.mu.Unlock()
}

// Problems returns, and forgets, what went wrong in the relay.
func (rl *Relay) Problems() []string {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	p := rl.problems
	rl.problems = nil
	return p
}

// Counts is what the relay saw: tools/call requests, faults sent, and
// client connections that spoke h2.
func (rl *Relay) Counts() (toolCalls, injected, h2Conns int) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return rl.toolCalls, rl.injected, rl.h2Conns
}

type frame struct {
	head    [9]byte
	payload []byte
}

func (f *frame) typ() byte      { return f.head[3] }
func (f *frame) flags() byte    { return f.head[4] }
func (f *frame) stream() uint32 { return binary.BigEndian.Uint32(f.head[5:9]) & 0x7fffffff }
func (f *frame) bytes() []byte  { return append(f.head[:], f.payload...) }
func (f *frame) length() uint32 {
	return uint32(f.head[0])<<16 | uint32(f.head[1])<<8 | uint32(f.head[2])
}
func (f *frame) setLength(n int) { f.head[0], f.head[1], f.head[2] = byte(n>>16), byte(n>>8), byte(n) }
func (f *frame) dataBytes() []byte {
	p := f.payload
	if f.flags()&flagPadded != 0 && len(p) > 0 {
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

func (rl *Relay) serve(client *tls.Conn) {
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
				if f.typ() == frameHeaders || f.typ() == frameCont {
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
	inject := func(id uint32, fault Fault, ran func(<-chan struct{}) bool) {
		if !ran(done) {
			return
		}
		dropMu.Lock()
		dropped[id] = true
		dropMu.Unlock()
		var b []byte
		switch fault {
		case GoAway:
			b = newFrame(frameGoAway, 0, make([]byte, 8)) // last stream 0, NO_ERROR
		case RefusedStream:
			b = newFrame(frameRSTStream, id, binary.BigEndian.AppendUint32(nil, codeRefusedStream))
		case ProtocolError:
			b = newFrame(frameRSTStream, id, binary.BigEndian.AppendUint32(nil, codeProtocol))
		default:
			rl.trouble("no such fault: " + string(fault))
			return
		}
		rl.mu.Lock()
		rl.injected++ // before the client can see it and the test look
		rl.mu.Unlock()
		_ = toClient.write(b)
		// The server's handler is let go without its answer reaching anyone.
		_ = toServer.write(newFrame(frameRSTStream, id, binary.BigEndian.AppendUint32(nil, codeCancel)))
	}
	bodies := map[uint32][]byte{}
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
			bodies[id] = append(bodies[id], f.dataBytes()...)
			if f.flags()&flagEndStream != 0 {
				body := bodies[id]
				delete(bodies, id)
				if bytes.Contains(body, []byte(`"method":"tools/call"`)) {
					rl.mu.Lock()
					rl.toolCalls++
					rl.mu.Unlock()
				}
				if fault, ran := rl.plan(body); fault != "" {
					go inject(id, fault, ran)
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
