package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/h2fault"
)

// TestE2ERandomFaultsHTTP is the randomized fault test over Streamable
// HTTP: 200 runs (MCP_CONFIRM_LONG=1; 60 by default), each a create_order
// through the binary with --url, on loopback, against demo servers that each worker keeps running
// (one database per worker), through a relay of the test's that counts
// every request and makes the faults a network makes. One fault a run: none
// (on the stateless 2026-07-28 era or a 2025 session); a cut after the
// commit on a 2025 session whose stream carried event ids (recovered by
// resuming: one attempt, succeeded, one order); the same with the resume
// refused, and a cut on the stateless era (unknown, one order); a reset
// before the server saw the request (unknown, no order); a gateway's 502
// after the server ran it (unknown, one order); a session the server ended
// (404: sent once more, on a new session, with the same key, as attempt 2;
// one order); a server or gateway that runs the call and then answers 404
// for the session (sent once more, on a new session, with the same key;
// the demo replays it; a second 404 is not followed by a third send), 404
// for the first send only (attempt 2 succeeds, a replay), 400 or 401
// (unknown, "it says it did not run this"; a 401 says to log in); a server
// that polls (SEP-1699: the answer comes on the GET that resumes the
// stream; succeeded, "recovered by resuming the stream"); over HTTPS and
// HTTP/2, through a frame relay, GOAWAY or a stream reset (REFUSED_STREAM,
// PROTOCOL_ERROR) once the server committed the order, which Go's client
// would resend by itself (unknown, connection lost, sent once, one order);
// a server that is
// down (connection refused: exit 5, nothing journaled, nothing sent); kill
// -9 of the client while its request or its answer is held (recovered as
// unknown). Then the operator's decisions, as
// in the stdio test (query, retry on the call's own URL or with
// --any-server, mark applied, abandon; a retry while the server is down),
// and at the end every call is accounted for, every send on the wire is an
// attempt its call's journal shows, and no key holds two orders.
//
// MCP_CONFIRM_FAULT_SEED replays a seed (printed at the start and on
// failure); MCP_CONFIRM_LONG=1 runs it 200 times (60 by default), and
// MCP_CONFIRM_FAULT_RUNS sets the run count.
func TestE2ERandomFaultsHTTP(t *testing.T) {
	runFaultSoak(t, faultSoak{
		name:   "HTTP fault test",
		groups: []string{"fault.", "decision.", "final.", "retry.", "kill_client.", "respelled.", "server."},
		worker: func(tb testing.TB, dir string, k int, seed uint64, stats *faultStats) *faultWorker {
			fw := newFaultWorker(tb, dir, k, seed, stats)
			fw.tr = newHTTPFaults(tb, fw.w)
			return fw
		},
		run: (*faultWorker).runHTTP,
	})
}

// The HTTP faults, each a route of the worker's relay (a URL of its own,
// so a call's stored server names its fault, as a stdio server's command
// line names its flags). No route: the plain demo server, on whichever era
// the client picks (2026-07-28).
const (
	httpSession       = "http-2025"           // the plain demo, 2025-11-25 only: a session
	httpResume        = "http-resume"         // 2025 session, --delay 600ms (progress events), every fresh write cut after commit
	httpResumeRefused = "http-resume-refused" // the same server; the relay refuses the resuming GET (405)
	httpCut           = "http-cut"            // 2026-07-28 only (no resumption), every fresh write cut after commit
	httpReset         = "http-reset"          // the relay resets the connection of every create_order, before forwarding it
	http502           = "http-502"            // the relay forwards every create_order, drops the answer and says 502
	httpExpire        = "http-expire"         // --expire-sessions; the relay has the session expired before a key's first create_order
	httpHoldRequest   = "http-hold-request"   // the relay holds a key's first create_order, unforwarded, until its client is gone
	httpHoldAnswer    = "http-hold-answer"    // the relay forwards a key's first create_order and holds the answer until its client is gone
	httpOther         = "http-other"          // the plain demo under another URL: another identity
	http404           = "http-404"            // 2025 session; the relay forwards every create_order, drops the answer and says 404
	http404First      = "http-404-first"      // the same, for a key's first create_order only; the rest pass
	http400           = "http-400"            // the relay forwards every create_order, drops the answer and says 400
	http401           = "http-401"            // the same, with 401
	httpPoll          = "http-poll"           // 2025 session; SEP-1699 polling: the POST's stream ends after an event id, the answer comes on the resuming GET
	// HTTPS, HTTP/2, through a frame relay (internal/h2fault) of its own
	// each, in front of the demo over TLS with --hang-after-commit: a key's
	// first create_order is answered, once the order is committed, with
	// the fault in place of the response; its retries pass (a replay).
	h2GoAway   = "h2-goaway"   // GOAWAY, last stream 0
	h2Refused  = "h2-refused"  // RST_STREAM REFUSED_STREAM
	h2Protocol = "h2-protocol" // RST_STREAM PROTOCOL_ERROR
	httpDown   = "http-down"   // a port where nothing listens: connection refused
)

// httpFaults is the HTTP transport of the fault test: the relay in front
// of a worker's demo servers, and a refusing port.
type httpFaults struct {
	relay *faultRelay
	base  string // the relay's URL
	down  string // a URL on a port that refuses connections
	h2    map[string]*h2fault.Relay
}

// newHTTPFaults starts a worker's demo servers on its database (plain;
// 2025 sessions only; expiring sessions; cutting after commit, on a 2025
// session with events and on the stateless era) and the relay in front of
// them.
func newHTTPFaults(t testing.TB, w *world) *httpFaults {
	const every = "1000000000" // --cut-after-commit: every fresh execution
	plain := startHTTPDemo(t, w)
	session := startHTTPDemo(t, w, "--protocols", "2025-11-25")
	expiring := startHTTPDemo(t, w, "--expire-sessions")
	cut25 := startHTTPDemo(t, w, "--cut-after-commit", every, "--delay", "600ms", "--protocols", "2025-11-25")
	cut26 := startHTTPDemo(t, w, "--cut-after-commit", every, "--delay", "300ms", "--protocols", "2026-07-28")
	rl := newFaultRelay(map[string]relayRoute{
		"":                {upstream: plain},
		httpSession:       {upstream: session},
		httpResume:        {upstream: cut25},
		httpResumeRefused: {upstream: cut25, fault: httpResumeRefused},
		httpCut:           {upstream: cut26},
		httpReset:         {upstream: plain, fault: httpReset},
		http502:           {upstream: plain, fault: http502},
		httpExpire:        {upstream: expiring, fault: httpExpire},
		httpHoldRequest:   {upstream: plain, fault: httpHoldRequest},
		httpHoldAnswer:    {upstream: plain, fault: httpHoldAnswer},
		httpOther:         {upstream: plain},
		http404:           {upstream: session, fault: http404},
		http404First:      {upstream: session, fault: http404First},
		http400:           {upstream: plain, fault: http400},
		http401:           {upstream: plain, fault: http401},
		httpPoll:          {upstream: session, fault: httpPoll},
	})
	srv := httptest.NewServer(rl)
	t.Cleanup(srv.Close)
	h := &httpFaults{relay: rl, base: srv.URL, down: "http://" + refusingAddr(t) + "/mcp", h2: map[string]*h2fault.Relay{}}
	h.startH2(t, w)
	return h
}

// startH2 starts the demo over TLS (HTTP/2), every fresh create_order
// committed and its answer held (--hang-after-commit), and an h2 frame
// relay per HTTP/2 fault in front of it, which counts every tools/call
// with the other routes' (faultRelay.count) and faults a key's first
// create_order there once the demo's database holds its order. The binary
// trusts the relays' certificate as a user's own CA: through SSL_CERT_FILE,
// which a wrapper of the worker's binary sets.
func (h *httpFaults) startH2(t testing.TB, w *world) {
	cert := h2fault.NewCert(t)
	w.bin = trustingBin(t, w.bin, cert.File)
	demoURL, err := url.Parse(startHTTPDemo(t, w, "--tls-cert", cert.File, "--tls-key", cert.KeyFile, "--hang-after-commit", "1000000000"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+w.demoDB+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for route, fault := range map[string]h2fault.Fault{h2GoAway: h2fault.GoAway, h2Refused: h2fault.RefusedStream, h2Protocol: h2fault.ProtocolError} {
		h.h2[route] = h2fault.Start(t, cert, demoURL.Host, func(body []byte) (h2fault.Fault, func(<-chan struct{}) bool) {
			tool, key, ok := toolsCallOf(body)
			if !ok || !h.relay.count(route, tool, key, tool == "create_order") {
				return "", nil
			}
			return fault, func(done <-chan struct{}) bool { return h.committed(db, key, done) }
		})
	}
}

// committed waits until the demo's database holds an order under key (the
// server has run the create_order, and holds its answer), and reports
// whether it does; false if done closes first (the client went away).
func (h *httpFaults) committed(db *sql.DB, key string, done <-chan struct{}) bool {
	deadline := time.Now().Add(time.Minute)
	for {
		var n int
		if err := db.QueryRow("SELECT count(*) FROM orders WHERE idempotency_key = ?", key).Scan(&n); err != nil {
			h.relay.trouble("h2: read the orders of %s: %v", key, err)
			return false
		}
		if n > 0 {
			return true
		}
		if time.Now().After(deadline) {
			h.relay.trouble("h2: no order under %s a minute after its create_order went on", key)
			return false
		}
		select {
		case <-done:
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// trustingBin is a wrapper of bin that runs it (exec: the same process)
// with SSL_CERT_FILE set to certFile.
func trustingBin(t testing.TB, bin, certFile string) string {
	path := filepath.Join(t.TempDir(), "mcp-confirm")
	script := fmt.Sprintf("#!/bin/sh\nSSL_CERT_FILE=%s\nexport SSL_CERT_FILE\nexec %s \"$@\"\n", shellQuote(certFile), shellQuote(bin))
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func (h *httpFaults) server(faults ...string) []string {
	switch {
	case len(faults) == 0:
		return []string{"--url", h.base + "/mcp"}
	case faults[0] == httpDown:
		return []string{"--url", h.down}
	case h.h2[faults[0]] != nil:
		return []string{"--url", h.h2[faults[0]].URL}
	}
	return []string{"--url", h.base + "/" + faults[0] + "/mcp"}
}

func (h *httpFaults) other(faults []string) []string {
	if len(faults) > 0 {
		return h.server()
	}
	return h.server(httpOther)
}

func (h *httpFaults) sent(tool string) map[string]int { return h.relay.sent(tool) }

func (h *httpFaults) lossy() (faults, clock []string, reason string) {
	return []string{httpCut}, nil, "connection lost"
}

// ownRetry: every retry on a call's own URL means something (the holds are
// for a key's first request only; a cut is at once). The 502 and the reset
// lose it again, and so does a cut of a fresh execution (nothing committed
// yet) where no resume recovers it.
func (h *httpFaults) ownRetry(faults []string, committed int) (meaningful bool, unknownAgain string) {
	switch {
	case faultFlag(faults, http502):
		return true, "http error status"
	case faultFlag(faults, httpReset):
		return true, "connection lost"
	case (faultFlag(faults, httpCut) || faultFlag(faults, httpResumeRefused)) && committed == 0:
		return true, "connection lost"
	case faultFlag(faults, http404):
		// The call had its one automatic resend: the retry's 404 is
		// followed by none.
		return true, refused404 + noFurtherResend
	case faultFlag(faults, http400):
		return true, refusedSaid(400)
	case faultFlag(faults, http401):
		return true, refusedSaid(401)
	}
	return true, ""
}

// What a call's reason says of a server that answered a status without a
// JSON-RPC answer after the request left (mcpclient.RefusedReason), and
// what an attempt answered 404 for its session adds.
const (
	refused404      = "the server answered 404 for the session: it says it did not run this"
	resentOnce      = "sent once more as attempt 2, on a new session, with the same key"
	noFurtherResend = "; no further resend: the call had its one automatic resend after a 404"
)

func refusedSaid(status int) string {
	return fmt.Sprintf("the server answered %d: it says it did not run this", status)
}

// runHTTP is one HTTP fault run and the operator's decisions after it.
func (fw *faultWorker) runHTTP(i int) {
	args, fault, extra, ok := fw.begin(i, map[string]int{"ok": 10, "resumed": 15, "resume_refused": 10, "cut": 25,
		"reset": 15, "gateway_502": 15, "expired": 15, "refused": 10, "kill_client": 20,
		"ran_404": 10, "ran_404_first": 10, "ran_400": 8, "ran_401": 8, "poll": 12,
		"h2_goaway": 8, "h2_refused_stream": 8, "h2_protocol_error": 8})
	if !ok {
		fw.relayProblems(i)
		return
	}
	relay := fw.tr.(*httpFaults).relay
	refusedGETs, pollResumes := relay.refusedResumes(), relay.pollResumes()
	var flags []string
	var printed callOut
	attempts, committed := 1, 1 // what the fault leaves: the call's attempts, its key's orders
	unknown := func(reason string) {
		r := fw.callOn(args, extra, flags...)
		if printed = fw.expectCall(i, r, exitUnknown); printed.Reason != reason {
			fw.fail(i, "want unknown (%s), got %s", reason, r)
		}
	}
	switch fault {
	case "ok":
		if fw.rng.IntN(2) == 0 {
			flags = []string{httpSession}
		}
		printed = fw.expectCall(i, fw.callOn(args, extra, flags...), exitOK)
	case "resumed":
		flags = []string{httpResume}
		printed = fw.expectCall(i, fw.callOn(args, extra, flags...), exitOK)
	case "resume_refused":
		flags = []string{httpResumeRefused}
		unknown("connection lost")
		if n := relay.refusedResumes() - refusedGETs; n != 1 {
			fw.fail(i, "%d resuming GETs refused, want 1 (a refusal ends the resume)", n)
		}
	case "cut":
		flags = []string{httpCut}
		unknown("connection lost")
	case "reset":
		flags, committed = []string{httpReset}, 0
		unknown("connection lost")
	case "gateway_502":
		flags = []string{http502}
		unknown("http error status")
	case "expired":
		flags, attempts = []string{httpExpire}, 2
		printed = fw.expectCall(i, fw.callOn(args, extra, flags...), exitOK)
	case "ran_404":
		// Run, then 404 for the session, every time: sent once more on a
		// new session with the same key (the demo replays it), 404 again,
		// and no further resend.
		flags, attempts = []string{http404}, 2
		unknown(refused404 + noFurtherResend)
	case "ran_404_first":
		// Run, then 404 for the session; the resend passes: the demo's
		// replay of the order it made.
		flags, attempts = []string{http404First}, 2
		printed = fw.expectCall(i, fw.callOn(args, extra, flags...), exitOK)
		if !printed.Replayed {
			fw.fail(i, "call %d: attempt 2 is not a replay, though the server ran attempt 1", printed.ID)
		}
	case "ran_400":
		flags = []string{http400}
		unknown(refusedSaid(400))
	case "ran_401":
		flags = []string{http401}
		r := fw.callOn(args, extra, flags...)
		if printed = fw.expectCall(i, r, exitUnknown); printed.Reason != refusedSaid(401) {
			fw.fail(i, "want unknown (%s), got %s", refusedSaid(401), r)
		}
		if !strings.Contains(r.stderr, "mcp-confirm login --url "+fw.tr.server(flags...)[1]) {
			fw.fail(i, "a 401 does not say to log in: %s", r)
		}
	case "poll":
		flags = []string{httpPoll}
		printed = fw.expectCall(i, fw.callOn(args, extra, flags...), exitOK)
		if n := relay.pollResumes() - pollResumes; n != 1 {
			fw.fail(i, "%d answers sent on a resuming GET, want 1", n)
		}
	case "h2_goaway", "h2_refused_stream", "h2_protocol_error":
		// Go's HTTP/2 client would resend the POST itself after each of
		// these: the relay must see the key's create_order once.
		flags = []string{map[string]string{"h2_goaway": h2GoAway, "h2_refused_stream": h2Refused, "h2_protocol_error": h2Protocol}[fault]}
		h2 := fw.tr.(*httpFaults).h2[flags[0]]
		_, injected, _ := h2.Counts()
		unknown("connection lost")
		if _, n, conns := h2.Counts(); n != injected+1 || conns == 0 {
			fw.fail(i, "%d h2 faults sent, want 1, on %d h2 connections: the run did not test", n-injected, conns)
		}
	case "refused":
		fw.refusedRun(i, args, extra)
		fw.relayProblems(i)
		return
	case "kill_client":
		printed, flags, committed = fw.killHTTP(i, args, extra)
	}
	fw.relayProblems(i)
	c := &fcall{id: printed.ID, key: printed.Key, args: args, fault: fault, flags: flags}
	got := fw.made(i, c, attempts)
	if n := ordersFor(fw.t, fw.db, c.key); n != committed {
		fw.fail(i, "call %d (%s): %d orders for its key, want %d", c.id, got.State, n, committed)
	}
	switch fault {
	case "resumed", "poll":
		if a := got.Attempts[0]; a.Outcome != "succeeded" || !strings.Contains(a.Reason, "recovered by resuming the stream") {
			fw.fail(i, "call %d: attempt %+v, want succeeded, recovered by resuming the stream", c.id, a)
		}
		fw.checkOrderResult(i, c, got.Attempts[0].Result, "the resumed answer")
	case "expired":
		a1, a2 := got.Attempts[0], got.Attempts[1]
		if a1.Outcome != "unknown" || !strings.Contains(a1.Reason, "the server answered 404 for the session: it says it did not run this") ||
			!strings.Contains(a1.Reason, "the server deduplicates a second run") {
			fw.fail(i, "call %d: attempt 1 %s %q, want unknown, the server's 404, resent as the key makes safe", c.id, a1.Outcome, a1.Reason)
		}
		if a2.Outcome != "succeeded" || a2.Session <= a1.Session {
			fw.fail(i, "call %d: attempt 2 %s on session %d (attempt 1 on %d), want succeeded on a newer session", c.id, a2.Outcome, a2.Session, a1.Session)
		}
		fw.checkOrderResult(i, c, a2.Result, "attempt 2's answer")
	case "ran_404", "ran_404_first":
		a1, a2 := got.Attempts[0], got.Attempts[1]
		if a1.Outcome != "unknown" || !strings.HasPrefix(a1.Reason, refused404) || !strings.Contains(a1.Reason, resentOnce) {
			fw.fail(i, "call %d: attempt 1 %s %q, want unknown, the server's 404, sent once more", c.id, a1.Outcome, a1.Reason)
		}
		if a2.Session <= a1.Session {
			fw.fail(i, "call %d: attempt 2 on session %d, attempt 1 on %d: want a newer session", c.id, a2.Session, a1.Session)
		}
		if fault == "ran_404" && (a2.Outcome != "unknown" || a2.Reason != refused404+noFurtherResend) {
			fw.fail(i, "call %d: attempt 2 %s %q, want unknown, the server's 404, no further resend", c.id, a2.Outcome, a2.Reason)
		}
		if fault == "ran_404_first" {
			if a2.Outcome != "succeeded" {
				fw.fail(i, "call %d: attempt 2 %s %q, want succeeded (the server's replay)", c.id, a2.Outcome, a2.Reason)
			}
			fw.checkOrderResult(i, c, a2.Result, "attempt 2's answer")
		}
	}
	if c.state == "unknown" && fw.rng.IntN(4) == 0 {
		fw.retryDown(i, c)
	}
	fw.afterFault(i, c, fw.check(i, c), extra)
	fw.relayProblems(i)
}

// relayProblems fails the run if the relay could not make a fault.
func (fw *faultWorker) relayProblems(i int) {
	h := fw.tr.(*httpFaults)
	p := h.relay.problems()
	for _, rl := range h.h2 {
		p = append(p, rl.Problems()...)
	}
	if len(p) > 0 {
		fw.fail(i, "the relay: %s", strings.Join(p, "; "))
	}
}

// refusedRun: a create_order to a server that is down (connection
// refused): exit 5, nothing journaled, nothing sent.
func (fw *faultWorker) refusedRun(i int, args string, extra []string) {
	calls, sent := len(fw.calls), fw.sentTotal("create_order")
	r := fw.callOn(args, extra, httpDown)
	if r.code != exitUnavailable || !strings.Contains(r.stderr, "nothing was sent") {
		fw.fail(i, "a create_order to a port that refuses connections: want exit 5, nothing was sent; got %s", r)
	}
	if n := len(fw.w.list()); n != calls {
		fw.fail(i, "a call that could not connect added a journal row (%d → %d)", calls, n)
	}
	if n := fw.sentTotal("create_order"); n != sent {
		fw.fail(i, "a call that could not connect was sent (%d → %d)", sent, n)
	}
}

// retryDown: the operator retries unknown call c on a server that is down
// (--any-server, a port that refuses connections): exit 5, nothing sent,
// the call unchanged (still unknown: nothing was learnt).
func (fw *faultWorker) retryDown(i int, c *fcall) {
	id := strconv.FormatInt(c.id, 10)
	before, sent := fw.check(i, c), fw.tr.sent("create_order")[c.key]
	r := fw.w.run(append([]string{"retry", id, "--any-server"}, fw.tr.server(httpDown)...)...)
	if r.code != exitUnavailable || !strings.Contains(r.stderr, "nothing was sent") {
		fw.fail(i, "retry %s on a port that refuses connections: want exit 5, nothing was sent; got %s", id, r)
	}
	after := fw.check(i, c)
	if after.State != "unknown" || len(after.Attempts) != len(before.Attempts) || len(after.Decisions) != len(before.Decisions) {
		fw.fail(i, "a retry that could not connect changed call %s: %s → %s, %d → %d attempts, %d → %d decisions", id,
			before.State, after.State, len(before.Attempts), len(after.Attempts), len(before.Decisions), len(after.Decisions))
	}
	if n := fw.tr.sent("create_order")[c.key]; n != sent {
		fw.fail(i, "a retry that could not connect was sent (%d → %d)", sent, n)
	}
	fw.stats.add("server.retry_down")
}

// killHTTP: kill -9 of the client while the relay holds its create_order,
// unforwarded (nothing ordered), or its answer (the order committed). The
// next command (list) recovers the call as unknown. It returns the call,
// its route, and the orders its key has.
func (fw *faultWorker) killHTTP(i int, args string, extra []string) (callOut, []string, int) {
	t, w := fw.t, fw.w
	flags, committed := []string{httpHoldRequest}, 0
	if fw.rng.IntN(2) == 0 {
		flags, committed = []string{httpHoldAnswer}, 1
		fw.stats.add("kill_client.answer_held")
	} else {
		fw.stats.add("kill_client.request_held")
	}
	a := append(append([]string{"call", "create_order", "--args", args}, extra...), "--timeout", "60s")
	bg := w.start(t, w.withDB(append(a, fw.tr.server(flags...)...)))
	var key string
	select {
	case key = <-fw.tr.(*httpFaults).relay.holding:
	case <-bg.done:
		fw.fail(i, "the call ended before the relay held it: %s", bg.result())
	case <-time.After(time.Minute):
		fw.fail(i, "the relay held no create_order within a minute")
	}
	fw.kill9(i, bg)
	return fw.recovered(i, key), flags, committed
}

// refusingAddr is a loopback address whose port is bound but not
// listening: a connection to it is refused, and no other program can take
// the port while the test holds it (as a port closed a moment ago could
// be).
func refusingAddr(t testing.TB) string {
	syscall.ForkLock.RLock()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("getsockname: %v", err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}

// relayRoute is one route of a faultRelay: the demo server behind it and
// the fault the relay makes there ("": none).
type relayRoute struct {
	upstream string
	fault    string
}

// faultRelay is a reverse proxy in front of demo servers, one route (URL
// path /ROUTE/mcp) per fault. It counts every tools/call it is sent, by
// tool and idempotency key: the wire, as the stdio test's tee is. Anything
// else it passes on as it comes (SSE streams flushed event by event); a cut
// upstream is a cut to the client, never an answer of its own.
type faultRelay struct {
	routes  map[string]relayRoute
	proxy   *httputil.ReverseProxy
	client  *http.Client
	holding chan string // the key of a create_order held (httpHoldRequest, httpHoldAnswer)

	mu       sync.Mutex
	calls    map[string]map[string]int // tool → key → tools/call requests
	seen     map[string]bool           // route and key of a create_order already sent there
	refused  int                       // resuming GETs refused
	polls    map[string][]byte         // httpPoll: answers kept for the GET that resumes from their event id
	pollN    int                       // httpPoll: event ids given
	resumed  int                       // httpPoll: answers sent on a resuming GET
	troubles []string                  // faults the relay could not make
}

// relayUpstream is the context key of the URL a request is passed on to.
type relayUpstream struct{}

func newFaultRelay(routes map[string]relayRoute) *faultRelay {
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	rl := &faultRelay{routes: routes, client: &http.Client{Transport: tr}, holding: make(chan string, 4),
		calls: map[string]map[string]int{}, seen: map[string]bool{}, polls: map[string][]byte{}}
	rl.proxy = &httputil.ReverseProxy{
		Transport: tr,
		Rewrite: func(r *httputil.ProxyRequest) {
			u := r.In.Context().Value(relayUpstream{}).(*url.URL)
			r.Out.URL.Scheme, r.Out.URL.Host, r.Out.URL.Path, r.Out.URL.RawPath = u.Scheme, u.Host, u.Path, ""
			r.Out.Host = ""
		},
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
		// The upstream cut the connection (or the client went away): cut
		// the client's too, as a cut network path does, not a 502.
		ErrorHandler: func(http.ResponseWriter, *http.Request, error) { panic(http.ErrAbortHandler) },
	}
	return rl
}

func (rl *faultRelay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.Trim(strings.TrimSuffix(r.URL.Path, "/mcp"), "/")
	route, ok := rl.routes[name]
	if !ok || !strings.HasSuffix(r.URL.Path, "/mcp") {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away
	}
	up, err := url.Parse(route.upstream)
	if err != nil {
		rl.trouble("route %q: %v", name, err)
		return
	}
	write, first := false, false
	if tool, key, ok := toolsCallOf(body); ok && r.Method == http.MethodPost {
		write = tool == "create_order"
		first = rl.count(name, tool, key, write)
		if write {
			switch {
			case route.fault == httpReset:
				rl.reset(w)
				return
			case route.fault == http502:
				rl.gateway502(w, r, up, body)
				return
			case route.fault == http404 || route.fault == http404First && first:
				rl.ranThenRefused(w, r, up, body, http.StatusNotFound)
				return
			case route.fault == http400:
				rl.ranThenRefused(w, r, up, body, http.StatusBadRequest)
				return
			case route.fault == http401:
				rl.ranThenRefused(w, r, up, body, http.StatusUnauthorized)
				return
			case route.fault == httpPoll:
				rl.poll(w, r, up, body)
				return
			case route.fault == httpExpire && first:
				rl.expireSession(r, up)
			case route.fault == httpHoldRequest && first:
				rl.hold(key)
				<-r.Context().Done() // until the client is gone; never forwarded
				return
			case route.fault == httpHoldAnswer && first:
				if _, err := rl.forward(r, up, body); err != nil {
					rl.trouble("%s: forward: %v", name, err)
				}
				rl.hold(key)
				<-r.Context().Done() // the answer dies with the client
				return
			}
		}
	}
	if route.fault == httpPoll && r.Method == http.MethodGet && rl.answerPoll(w, r) {
		return
	}
	if route.fault == httpResumeRefused && r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
		rl.mu.Lock()
		rl.refused++
		rl.mu.Unlock()
		http.Error(w, "no streams to resume here", http.StatusMethodNotAllowed)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rl.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), relayUpstream{}, up)))
}

// count records a tools/call of tool with key on route, and reports
// whether it is the first create_order with that key there.
func (rl *faultRelay) count(route, tool, key string, write bool) bool {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.calls[tool] == nil {
		rl.calls[tool] = map[string]int{}
	}
	rl.calls[tool][key]++
	if !write {
		return false
	}
	k := route + "\x00" + key
	first := !rl.seen[k]
	rl.seen[k] = true
	return first
}

// sent is what count recorded for tool, by key.
func (rl *faultRelay) sent(tool string) map[string]int {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	out := map[string]int{}
	for k, n := range rl.calls[tool] {
		out[k] = n
	}
	return out
}

// hold tells the test that the relay holds key's create_order.
func (rl *faultRelay) hold(key string) {
	select {
	case rl.holding <- key:
	default:
		rl.trouble("held %s, and the test has not taken the last %d held keys", key, cap(rl.holding))
	}
}

func (rl *faultRelay) refusedResumes() int {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return rl.refused
}

func (rl *faultRelay) trouble(format string, args ...any) {
	rl.mu.Lock()
	rl.troubles = append(rl.troubles, fmt.Sprintf(format, args...))
	rl.mu.Unlock()
}

// problems returns, and forgets, what the relay could not do.
func (rl *faultRelay) problems() []string {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	p := rl.troubles
	rl.troubles = nil
	return p
}

// reset closes the client's connection with a TCP reset, after its request
// was read whole and before any of it went on: the request left, the
// server never saw it.
func (rl *faultRelay) reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		rl.trouble("reset: hijack: %v", err)
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// gateway502 forwards the request, waits for the whole answer (the server
// has then run the call), throws it away and answers 502.
func (rl *faultRelay) gateway502(w http.ResponseWriter, r *http.Request, up *url.URL, body []byte) {
	if _, err := rl.forward(r, up, body); err != nil {
		rl.trouble("502: forward: %v", err)
	}
	http.Error(w, "upstream answer lost", http.StatusBadGateway)
}

// ranThenRefused forwards the request, waits for the whole answer (the
// server has then run the call), throws it away and answers status without
// a JSON-RPC answer: a server or gateway that runs a call and says it did
// not (issue 44, item 2).
func (rl *faultRelay) ranThenRefused(w http.ResponseWriter, r *http.Request, up *url.URL, body []byte, status int) {
	if _, err := rl.forward(r, up, body); err != nil {
		rl.trouble("%d: forward: %v", status, err)
	}
	http.Error(w, http.StatusText(status), status)
}

// poll is the polling of SEP-1699 in front of a 2025 session: the relay
// forwards the request and reads the whole answer (the server has run it),
// keeps the JSON-RPC response, and answers the POST with an SSE stream of
// one priming event, an id and a retry field and no data, which then ends;
// the answer waits for the GET that resumes from that id (answerPoll).
func (rl *faultRelay) poll(w http.ResponseWriter, r *http.Request, up *url.URL, body []byte) {
	answer, err := rl.forward(r, up, body)
	if err != nil {
		rl.trouble("poll: forward: %v", err)
		return
	}
	msg := responseOf(answer)
	if msg == nil {
		rl.trouble("poll: no JSON-RPC response in the server's answer: %q", answer)
		return
	}
	rl.mu.Lock()
	rl.pollN++
	ev := fmt.Sprintf("relay-poll-%d", rl.pollN)
	rl.polls[ev] = msg
	rl.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "id: %s\nretry: 20\ndata: \n\n", ev)
}

// answerPoll answers a GET that resumes from an event id poll gave with
// the answer kept for it, and reports whether it did.
func (rl *faultRelay) answerPoll(w http.ResponseWriter, r *http.Request) bool {
	last := strings.TrimSpace(r.Header.Get("Last-Event-ID"))
	rl.mu.Lock()
	msg, ok := rl.polls[last]
	delete(rl.polls, last)
	if ok {
		rl.resumed++
	}
	rl.mu.Unlock()
	if !ok {
		return false
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "id: %s-answer\ndata: %s\n\n", last, msg)
	return true
}

// pollResumes is how many answers the relay sent on a resuming GET.
func (rl *faultRelay) pollResumes() int {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return rl.resumed
}

// responseOf is the JSON-RPC response in a server's answer to a request:
// the body itself (application/json), or the data of the SSE event that
// carries a result or an error (progress notifications are skipped).
func responseOf(answer []byte) []byte {
	isResponse := func(b []byte) bool {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		return json.Unmarshal(b, &m) == nil && len(m.ID) > 0 && (m.Result != nil || m.Error != nil)
	}
	if t := bytes.TrimSpace(answer); isResponse(t) {
		return t
	}
	for _, line := range bytes.Split(answer, []byte("\n")) {
		if data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:")); ok {
			if d := bytes.TrimSpace(data); isResponse(d) {
				return d
			}
		}
	}
	return nil
}

// expireSession has the demo (--expire-sessions, which forgets a session
// after a create_order on it) expire the session the request came on, so
// that it answers the request 404, unexecuted: the relay sends a
// create_order of its own on that session, which the demo refuses before
// running it (no such item; no key, no order), then pings on it until the
// demo says 404.
func (rl *faultRelay) expireSession(r *http.Request, up *url.URL) {
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		rl.trouble("expire: the create_order carried no session")
		return
	}
	send := func(body string) (int, error) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, up.String(), strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		for _, h := range []string{"Mcp-Session-Id", "Mcp-Protocol-Version"} {
			req.Header.Set(h, r.Header.Get(h))
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := rl.client.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if status, err := send(`{"jsonrpc":"2.0","id":"relay-expire","method":"tools/call",` +
		`"params":{"name":"create_order","arguments":{"item":"no such item","quantity":1,"buyer":"nobody"}}}`); err != nil || status != http.StatusOK {
		rl.trouble("expire: the create_order that expires session %s: status %d, %v", sid, status, err)
		return
	}
	for n := 0; n < 200; n++ {
		status, err := send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"relay-ping-%d","method":"ping"}`, n))
		if err != nil {
			rl.trouble("expire: ping: %v", err)
			return
		}
		if status == http.StatusNotFound {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	rl.trouble("expire: session %s still answered after 2s", sid)
}

// forward sends the request on and reads the whole answer.
func (rl *faultRelay) forward(r *http.Request, up *url.URL, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, up.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = r.Header.Clone()
	resp, err := rl.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// demo-server --tls-cert and --tls-key serve https, HTTP/2 negotiated (the
// soak's h2 faults need it); given one without the other, without --http,
// or files that are no certificate and key: exit 2, one line naming the
// fault, nothing served.
func TestDemoServerTLS(t *testing.T) {
	w := newWorld(t, t.TempDir())
	cert := h2fault.NewCert(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--http", "127.0.0.1:0", "--tls-cert", cert.File}, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-cert", cert.File, "--tls-key", cert.KeyFile}, "--tls-cert and --tls-key are for --http"},
		{[]string{"--http", "127.0.0.1:0", "--tls-cert", cert.KeyFile, "--tls-key", cert.File}, "--tls-cert, --tls-key: "},
	} {
		r := cliIn(t, w.bin, w.dir, "", append([]string{"demo-server"}, tt.args...)...)
		wantExit(t, r, exitBadInput, strings.Join(tt.args, " "))
		if !strings.Contains(r.stderr, tt.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 {
			t.Errorf("demo-server %v: want one or two lines saying %q; stderr:\n%s", tt.args, tt.want, r.stderr)
		}
	}
	u := startHTTPDemo(t, w, "--tls-cert", cert.File, "--tls-key", cert.KeyFile)
	if !strings.HasPrefix(u, "https://") {
		t.Fatalf("the demo logged %s, want an https URL", u)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cert.Pool}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Post(u, "application/json",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Errorf("the demo answered over %s, want HTTP/2", resp.Proto)
	}
}
