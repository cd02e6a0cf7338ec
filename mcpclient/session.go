package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// drainGrace is how long, after the child exits, we keep reading its stdout
// before calling the session lost: an answer written just before exit is
// still an answer. It also bounds the wait for pipes held open by a
// grandchild that outlives the server.
const drainGrace = 300 * time.Millisecond

// killWait bounds the wait for the kernel to reap a SIGKILLed process.
const killWait = 5 * time.Second

// session is one server process and the MCP connection over its pipes.
type session struct {
	n      int
	opts   *Options
	cmd    *exec.Cmd
	stdin  *os.File // our end of the child's stdin
	stdout *os.File // our end of the child's stdout
	stderr *os.File // our end of the child's stderr
	tail   *stderrTail
	tap    *tap
	late   *lateQueue
	mc     *client.Client
	info   ServerInfo
	decl   *declaration // what the handshake declares beyond our own; may be nil
	// The _meta members every request carries on a 2026-07-28 connection,
	// set once by the handshake (setConnMeta); empty on a legacy one.
	connMeta   []byte                     // as a JSON fragment, for tools/call
	connFields map[string]json.RawMessage // as fields, for relayed requests

	w          *tapWriter    // the child's stdin, for tools/call lines
	exited     chan struct{} // cmd.Wait returned; exitErr set
	exitErr    error
	readerEOF  chan struct{}
	stdinBad   chan struct{}
	stopReq    chan struct{}
	stderrDone chan struct{} // drainStderr returned: EOF, or our end closed
	// Everything the child wrote on stderr is in the tail: closed by
	// drainStderr at EOF or, after settleStderr, once the pipe is empty.
	stderrSettled chan struct{}
	lateDone      chan struct{}
	causeSet      chan struct{} // goneCause and exitedFirst are final
	done          chan struct{} // reaped, pipes closed, goroutines gone

	eofOnce, badOnce, stopOnce sync.Once
	settleOnce, settledOnce    sync.Once

	// goneCtx ends when the session is lost: running calls are failed and the
	// handshake, if still running, gives up.
	goneCtx  context.Context
	goneStop context.CancelFunc

	mu          sync.Mutex // guards following; written once by monitor, before causeSet closes
	goneCause   string     // why the session ended, for error messages
	exitedFirst bool       // the child exited on its own, before we stopped it
}

// spawn starts the child process; the handshake is separate.
func spawn(spec ServerSpec, n int, tokenPrefix string, opts *Options, decl *declaration) (*session, error) {
	if spec.Command == "" {
		return nil, errors.New("no server command")
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	// No shell, no exec.CommandContext: the process lives as long as the
	// session, and we decide how it is stopped.
	cmd := exec.Command(spec.Command, spec.Args...)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Dir = spec.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	ownProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, err
	}
	// The child holds its own copies; ours would keep the pipes open after
	// it dies and hide its death.
	closeAll(inR, outW, errW)

	s := &session{
		n: n, opts: opts, cmd: cmd, decl: decl,
		stdin: inW, stdout: outR, stderr: errR,
		tail:       newStderrTail(opts.StderrLines, opts.Stderr),
		late:       newLateQueue(),
		exited:     make(chan struct{}),
		readerEOF:  make(chan struct{}),
		stdinBad:   make(chan struct{}),
		stopReq:    make(chan struct{}),
		stderrDone: make(chan struct{}),
		lateDone:   make(chan struct{}),
		causeSet:   make(chan struct{}),
		done:       make(chan struct{}),

		stderrSettled: make(chan struct{}),
	}
	s.goneCtx, s.goneStop = context.WithCancel(context.Background())
	s.tap = newTap(n, s.late)

	go func() {
		s.exitErr = cmd.Wait()
		close(s.exited)
	}()
	go func() {
		s.drainStderr()
		close(s.stderrDone)
	}()
	go func() {
		s.late.run(opts.OnLateResult)
		close(s.lateDone)
	}()

	r := &tapReader{t: s.tap, r: outR, eof: func() { s.eofOnce.Do(func() { close(s.readerEOF) }) }}
	w := &tapWriter{t: s.tap, w: inW, gone: s.goneCtx, broken: func() { s.badOnce.Do(func() { close(s.stdinBad) }) }}
	s.w = w
	s.mc = client.NewClient(transport.NewIO(r, w, nil), client.WithDiscoverTimeout(opts.ProbeTimeout))
	s.mc.OnNotification(s.tap.onNotification)
	if opts.OnNotification != nil {
		s.mc.OnNotification(s.relayNotification(tokenPrefix))
	}
	// The transport keeps this context for the server's requests to us; it
	// must live as long as the session and no longer.
	if err := s.mc.Start(s.goneCtx); err != nil {
		s.requestStop()
		go s.monitor()
		<-s.done
		return nil, fmt.Errorf("start mcp transport: %w", err)
	}
	if opts.OnServerRequest != nil {
		// Replaces mcp-go's own handler, which Start installed.
		if bt, ok := s.mc.GetTransport().(transport.BidirectionalInterface); ok {
			bt.SetRequestHandler(s.serverRequest)
		}
	}
	go s.monitor()
	return s, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// handshake runs server/discover (bounded by ProbeTimeout) and, for a legacy
// server, initialize; it gives up when ctx ends or the session is lost.
func (s *session) handshake(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()
	stop := context.AfterFunc(s.goneCtx, cancel)
	defer stop()

	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: s.opts.ClientName, Version: s.opts.ClientVersion}
	if s.decl != nil {
		// The legacy version the last session spoke: straight to the
		// initialize handshake that declares the capabilities.
		req.Params.Capabilities, req.Params.ProtocolVersion = s.decl.caps, s.decl.version
	}
	res, err := s.mc.Initialize(ctx, req)
	if err != nil {
		return err
	}
	s.info = ServerInfo{Name: res.ServerInfo.Name, Version: res.ServerInfo.Version, Protocol: s.mc.ProtocolVersion(),
		Title: res.ServerInfo.Title, Instructions: res.Instructions}
	s.setConnMeta()
	return nil
}

func (s *session) alive() bool { return s.goneCtx.Err() == nil }

func (s *session) requestStop() { s.stopOnce.Do(func() { close(s.stopReq) }) }

// monitor waits for the first sign that the session is over, fails every
// running call at once, then stops and reaps the process.
func (s *session) monitor() {
	cause, exitedFirst := "", false
	select {
	case <-s.exited:
		exitedFirst = true
		// Let mcp-go read what the child wrote before it died.
		select {
		case <-s.readerEOF:
		case <-time.After(drainGrace):
		}
		cause = "the server exited"
	case <-s.readerEOF:
		cause = "the server closed its stdout"
	case <-s.stdinBad:
		cause = "the server stopped reading its stdin"
	case <-s.stopReq:
		cause = "the client closed the session"
	}
	// Calls end now; the description can take a moment longer.
	s.goneStop()
	s.tap.failAll(ErrConnectionLost)
	if !exitedFirst && cause != "the client closed the session" && s.waitExit(drainGrace) {
		// A closed pipe is usually the first sign of a dying process.
		exitedFirst, cause = true, "the server exited"
	}
	if exitedFirst {
		// Its last words are usually why it died: in the tail before the
		// description is final.
		s.settleStderr()
	}
	s.mu.Lock()
	s.goneCause, s.exitedFirst = cause, exitedFirst
	s.mu.Unlock()
	close(s.causeSet)
	s.opts.Logger.Debug("mcp session lost", "session", s.n, "cause", cause)

	s.stopProcess()
	// mcp-go's Close closes its done channel (pending requests return at
	// once) and our stdin end, which stopProcess already closed.
	_ = s.mc.Close()
	s.late.close()
	<-s.lateDone
	s.opts.Logger.Debug("mcp session reaped", "session", s.n, "exit", s.exitErr)
	close(s.done)
}

// stopProcess: stdin closed (a well-behaved server exits on EOF), then
// SIGTERM, then SIGKILL, each after StopGrace; always reaped.
func (s *session) stopProcess() {
	_ = s.stdin.Close()
	if !s.waitExit(s.opts.StopGrace) {
		terminate(s.cmd)
		if !s.waitExit(s.opts.StopGrace) {
			kill(s.cmd)
			if !s.waitExit(killWait) {
				s.opts.Logger.Error("mcp server did not die after SIGKILL", "session", s.n, "pid", s.cmd.Process.Pid)
			}
		}
	}
	select {
	case <-s.exited:
		s.settleStderr()
	default:
	}
	// A grandchild (the server behind npx, say) may still hold the pipes.
	select {
	case <-s.readerEOF:
	case <-time.After(drainGrace):
		kill(s.cmd)
		_ = s.stdout.Close()
		<-s.readerEOF
	}
	select {
	case <-s.stderrDone:
	case <-time.After(drainGrace):
		_ = s.stderr.Close()
		<-s.stderrDone
	}
	_ = s.stdout.Close()
	_ = s.stderr.Close()
}

func (s *session) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.exited:
		return true
	case <-t.C:
		return false
	}
}

// drainStderr reads the child's stderr into the tail until EOF, or until
// stopProcess closes our end because a grandchild still holds the pipe. It is
// the pipe's only reader, so the tail keeps the order of the bytes.
func (s *session) drainStderr() {
	defer s.settledOnce.Do(func() { close(s.stderrSettled) })
	buf := make([]byte, 32<<10)
	for {
		n, err := s.stderr.Read(buf)
		if n > 0 {
			s.tail.write(buf[:n])
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			// settleStderr: the child is dead, so all it wrote is in the
			// pipe already; take it up to "would block", then go on
			// reading for whoever else holds the pipe.
			_ = s.stderr.SetReadDeadline(time.Time{})
			if sweep(s.stderr, buf, s.tail.write) {
				s.tail.flush()
				return
			}
			s.settledOnce.Do(func() { close(s.stderrSettled) })
		default:
			s.tail.flush()
			return
		}
	}
}

// settleStderr returns once every byte the child wrote on stderr is in the
// tail. Call it only once the child has exited: then no byte of its is still
// to come, and EOF comes at once unless a grandchild holds the pipe, which
// is why drainStderr is woken (a read deadline of now) to empty the pipe
// rather than waited on for EOF. Without deadlines (a pipe the runtime
// cannot poll) it waits for EOF, at most drainGrace.
func (s *session) settleStderr() {
	s.settleOnce.Do(func() {
		if err := s.stderr.SetReadDeadline(time.Now()); err != nil {
			select {
			case <-s.stderrSettled:
			case <-time.After(drainGrace):
			}
			return
		}
		<-s.stderrSettled
	})
}

// lostError describes why a session ended, for Delivery.Err and Tools. Call it
// only once the session is lost or being stopped: it waits for monitor to
// make the description final, which it does within a bound.
func (s *session) lostError() error {
	<-s.causeSet
	s.mu.Lock()
	cause, exitedFirst := s.goneCause, s.exitedFirst
	s.mu.Unlock()
	if cause == "" {
		cause = "the session ended"
	}
	msg := fmt.Sprintf("session %d: %s", s.n, cause)
	if exitedFirst {
		msg += fmt.Sprintf(" (%s)", exitText(s.exitErr))
	}
	if lines := s.tail.Lines(); len(lines) > 0 {
		msg += "; last stderr: " + lines[len(lines)-1]
	}
	return fmt.Errorf("%w: %s", ErrConnectionLost, msg)
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// StartError is returned when a server process cannot be started or does
// not complete the handshake. Nothing was sent to it but the handshake.
type StartError struct {
	Server  string // the command line, or the config name
	Session int
	Err     error
	Exit    string   // how the process ended on its own; "" if it was still running
	Stderr  []string // its last stderr lines
	// Lines on stdout that were not JSON-RPC: the usual cause is a server
	// that logs to stdout.
	NonJSONLines int
	FirstNonJSON string
	// NeedsLogin: a remote server answered 401 (ErrAuthorization) to a
	// client that authorizes with the logins stored in Options.OAuth (no
	// Authorization header of its own): no login is stored for Server, or
	// its token was refused and could not be refreshed. A new login for
	// Server (Authorize, then Logins.Save) is what it needs; the next
	// session reads it.
	NeedsLogin bool
}

func (e *StartError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "start MCP server %s: %v", e.Server, e.Err)
	if e.Exit != "" {
		fmt.Fprintf(&b, "; it exited (%s)", e.Exit)
	}
	if e.NonJSONLines > 0 {
		fmt.Fprintf(&b, "; it wrote %d line(s) on stdout that are not JSON-RPC (stdout must carry only MCP messages), first: %q", e.NonJSONLines, e.FirstNonJSON)
	}
	if len(e.Stderr) > 0 {
		b.WriteString("; last stderr:")
		for _, l := range e.Stderr {
			b.WriteString("\n  ")
			b.WriteString(l)
		}
	}
	return b.String()
}

func (e *StartError) Unwrap() error { return e.Err }

// startError is built after the session is fully reaped, so the exit status
// and the stderr tail are complete.
func (s *session) startError(server string, err error) *StartError {
	se := &StartError{Server: server, Session: s.n, Err: err, Stderr: s.tail.Lines()}
	s.mu.Lock()
	if s.exitedFirst {
		se.Exit = exitText(s.exitErr)
	}
	s.mu.Unlock()
	se.NonJSONLines = int(s.tap.nonJSON.Load())
	if p := s.tap.firstNonJSON.Load(); p != nil {
		se.FirstNonJSON = *p
	}
	return se
}
