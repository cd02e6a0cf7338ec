package main

// End-to-end tests (issue 4): the built binary, run as a user runs it,
// against `mcp-confirm demo-server` over real stdio pipes, with a real
// SQLite journal and a real demo database. Nothing is mocked. The files
// e2e_*_test.go share the helpers in this one.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/demo"
	"github.com/mcp-confirm/mcp-confirm/idempotency"
	"github.com/mcp-confirm/mcp-confirm/internal/pgtest"
	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
)

// e2eBin is the mcp-confirm binary built once by TestMain. Under -race it
// is itself built with -race, so the product's own goroutines are checked
// under real faults too; every report lands in raceDir (see GORACE below).
// e2eFastBin is the same program built without -race, for the randomized
// fault test, whose hundreds of runs a race build (modernc SQLite, which is
// Go, instrumented) makes several times slower; MCP_CONFIRM_FAULT_RACE=1
// runs that test on e2eBin too.
var (
	e2eBin     string
	e2eFastBin string
	raceDir    string
)

// cmdHang is the hang guard for one command: far beyond anything a command
// here should take, so it only ever fires on a real hang.
const cmdHang = 2 * time.Minute

var bins testbin.Binaries

func TestMain(m *testing.M) {
	if err := buildE2E(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(pgtest.Finish(bins.Run(racesFail{m}))) // and stops the PostgreSQL cluster, if a test started one
}

// racesFail runs the tests and then fails them if the race detector wrote a
// report in any process they ran (the CLI, or the demo server behind it,
// whose stderr the CLI swallows). It reads the reports before bins.Run
// removes raceDir with the binaries.
type racesFail struct{ m *testing.M }

func (r racesFail) Run() int {
	code := r.m.Run()
	reports, _ := filepath.Glob(filepath.Join(raceDir, "race.*"))
	for _, rep := range reports {
		b, _ := os.ReadFile(rep)
		fmt.Fprintf(os.Stderr, "DATA RACE in a child process (%s):\n%s\n", rep, b)
		code = 1
	}
	return code
}

func buildE2E() error {
	dir, err := bins.Dir()
	if err != nil {
		return err
	}
	raceDir = filepath.Join(dir, "race")
	if err := os.Mkdir(raceDir, 0o700); err != nil {
		return err
	}
	var raceFlags []string
	if raceBuild {
		raceFlags = []string{"-race"}
	}
	if e2eBin, err = bins.Build(filepath.Join("bin", "mcp-confirm"), ".", raceFlags...); err != nil {
		return err
	}
	e2eFastBin = e2eBin
	if raceBuild {
		e2eFastBin, err = bins.Build(filepath.Join("fast", "mcp-confirm"), ".")
	}
	return err
}

// cliResult is what one run of the binary came to.
type cliResult struct {
	code           int
	stdout, stderr string
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
}

// childEnv keeps the binary away from the user's own journal and state
// even if a test forgot --db, and sends race reports to raceDir without the
// race runtime's default one-second sleep at exit.
func childEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "MCP_CONFIRM_DB", "XDG_STATE_HOME", "HOME", "GORACE":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "XDG_STATE_HOME="+filepath.Join(home, "state"),
		"GORACE=atexit_sleep_ms=0 log_path="+filepath.Join(raceDir, "race"))
}

// e2eCmd prepares bin with args; the caller starts it.
func e2eCmd(ctx context.Context, bin, home string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = childEnv(home)
	cmd.Dir = home
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// cliIn runs bin to completion with stdin. home is a t.TempDir of the test
// (the working directory and $HOME of the command).
func cliIn(t testing.TB, bin, home, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdHang)
	defer cancel()
	cmd := e2eCmd(ctx, bin, home, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := cliResult{stdout: out.String(), stderr: errb.String()}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("mcp-confirm %s: still running after %s (hang guard)\n%s", strings.Join(args, " "), cmdHang, res)
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run mcp-confirm %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// wantExit fails the test unless the command exited with code.
func wantExit(t testing.TB, r cliResult, code int, what string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: want exit %d, got %s", what, code, r)
	}
}

// world is one test's files: a journal, a demo database, and a log of every
// byte the client wrote to the demo server's stdin.
type world struct {
	t       testing.TB
	bin     string // the mcp-confirm binary, client and server
	dir     string
	journal string
	demoDB  string
	wire    string

	wireRead int64                     // bytes of wire.log parsed so far
	wireSent map[string]map[string]int // tool → key → tools/call requests
}

func newWorld(t testing.TB, dir string) *world {
	return &world{t: t, bin: e2eBin, dir: dir, journal: filepath.Join(dir, "journal.db"),
		demoDB: filepath.Join(dir, "demo.db"), wire: filepath.Join(dir, "wire.log")}
}

// server is the words after "--" that start the demo server with flags.
// Its stdin comes through `tee`, so the test can read every byte the client
// sent it (wire.log) and prove what was and was not sent. bash execs the
// server itself, so the process the client starts is the demo server (a
// crash is its death, seen at once) and tee is its child, reading the
// client's pipe. The demo database path on the command line is unique per
// world, which is how the tests find the server's process.
func (w *world) server(flags ...string) []string {
	script := `exec "$@" < <(exec tee -a "$0")`
	return append([]string{"--", "/bin/bash", "-c", script, w.wire, w.bin, "demo-server", "--db", w.demoDB}, flags...)
}

// run runs a command against this world's journal (and server, if given).
func (w *world) run(args ...string) cliResult {
	w.t.Helper()
	return cliIn(w.t, w.bin, w.dir, "", w.withDB(args)...)
}

// withDB inserts --db before a "--" (or at the end).
func (w *world) withDB(args []string) []string {
	out := make([]string, 0, len(args)+2)
	for i, a := range args {
		if a == "--" {
			out = append(out, "--db", w.journal)
			return append(out, args[i:]...)
		}
		out = append(out, a)
	}
	return append(out, "--db", w.journal)
}

// call is one run of `call create_order`.
func (w *world) call(args string, extra []string, serverFlags ...string) cliResult {
	w.t.Helper()
	a := append([]string{"call", "create_order", "--args", args}, extra...)
	return w.run(append(a, w.server(serverFlags...)...)...)
}

// callOut is what call, retry and query print on stdout.
type callOut struct {
	ID       int64           `json:"id"`
	State    string          `json:"state"`
	Reason   string          `json:"reason"`
	Key      string          `json:"key"`
	Result   json.RawMessage `json:"result"`
	Error    json.RawMessage `json:"error"`
	Replayed bool            `json:"replayed"`
	Held     bool            `json:"held"`
	HeldBy   int64           `json:"held_by"`
}

func parseCallOut(t testing.TB, r cliResult) callOut {
	t.Helper()
	var o callOut
	if err := json.Unmarshal([]byte(r.stdout), &o); err != nil {
		t.Fatalf("call output is not one JSON object: %v\n%s", err, r)
	}
	return o
}

// jCall is a call as list/show --json print it, with the names of SPEC §4.
type jCall struct {
	ID           int64           `json:"id"`
	State        string          `json:"state"`
	Reason       string          `json:"reason"`
	Server       string          `json:"server"`
	Tool         string          `json:"tool"`
	Kind         string          `json:"kind"`
	KindSource   string          `json:"kind_source"`
	Key          string          `json:"key"`
	Args         json.RawMessage `json:"args"`
	CreatedAt    time.Time       `json:"created_at"`
	UpdatedAt    time.Time       `json:"updated_at"`
	Conflict     bool            `json:"conflict"`
	Proposal     string          `json:"proposal"`
	AttemptCount int             `json:"attempt_count"`
	Attempts     []jAttempt      `json:"attempts"`
	Decisions    []jDecision     `json:"decisions"`
}

type jAttempt struct {
	N       int             `json:"n"`
	Session int             `json:"session"`
	SentAt  time.Time       `json:"sent_at"`
	EndedAt *time.Time      `json:"ended_at"`
	Outcome string          `json:"outcome"`
	Reason  string          `json:"reason"`
	Clock   string          `json:"clock"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
	Late    bool            `json:"late"`
}

type jDecision struct {
	Action   string          `json:"action"`
	Operator string          `json:"operator"`
	At       time.Time       `json:"at"`
	Note     string          `json:"note"`
	Evidence json.RawMessage `json:"evidence"`
	Attempt  int             `json:"attempt"`
}

func (w *world) list() []jCall {
	w.t.Helper()
	r := w.run("list", "--json")
	wantExit(w.t, r, 0, "list --json")
	var calls []jCall
	if err := json.Unmarshal([]byte(r.stdout), &calls); err != nil {
		w.t.Fatalf("list --json: %v\n%s", err, r)
	}
	return calls
}

func (w *world) show(id int64) jCall {
	w.t.Helper()
	r := w.run("show", strconv.FormatInt(id, 10), "--json")
	wantExit(w.t, r, 0, "show --json")
	var c jCall
	if err := json.Unmarshal([]byte(r.stdout), &c); err != nil {
		w.t.Fatalf("show --json: %v\n%s", err, r)
	}
	return c
}

// sent counts the tools/call requests for tool in the wire log, by the
// idempotency key in their _meta ("" for none): what the client actually
// wrote to a server, whatever the journal says. The log only grows, so it
// is read from where the last look stopped (at a line end).
func (w *world) sent(tool string) map[string]int {
	w.t.Helper()
	f, err := os.Open(w.wire)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]int{}
	}
	if err != nil {
		w.t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, w.wireRead, 1<<40))
	if err != nil {
		w.t.Fatal(err)
	}
	end := bytes.LastIndexByte(b, '\n') + 1
	w.wireRead += int64(end)
	if w.wireSent == nil {
		w.wireSent = map[string]map[string]int{}
	}
	for _, line := range bytes.Split(b[:end], []byte("\n")) {
		if tool, k, ok := toolsCallOf(line); ok {
			if w.wireSent[tool] == nil {
				w.wireSent[tool] = map[string]int{}
			}
			w.wireSent[tool][k]++
		}
	}
	out := map[string]int{}
	for k, n := range w.wireSent[tool] {
		out[k] = n
	}
	return out
}

// toolsCallOf reads one JSON-RPC message as a client sent it: if it is a
// tools/call request, the tool and the idempotency key in its _meta ("" for
// none).
func toolsCallOf(msg []byte) (tool, key string, ok bool) {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Name string         `json:"name"`
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &m) != nil || m.Method != "tools/call" {
		return "", "", false
	}
	key, _ = m.Params.Meta["io.github.mcp-confirm/idempotency-key"].(string)
	return m.Params.Name, key, true
}

// sentTotal is the number of tools/call requests for tool in the wire log.
func (w *world) sentTotal(tool string) int {
	w.t.Helper()
	total := 0
	for _, n := range w.sent(tool) {
		total += n
	}
	return total
}

// demoDB opens the demo database for reading what the server did. It
// creates and migrates the file if needed (demo.CountOrders does), so a
// world can set budgets before its first call.
func (w *world) db() *sql.DB {
	w.t.Helper()
	if _, err := demo.CountOrders(context.Background(), w.demoDB, ""); err != nil {
		w.t.Fatal(err)
	}
	db, err := sql.Open("sqlite", idempotency.DSN(w.demoDB))
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { db.Close() })
	return db
}

func queryInt(t testing.TB, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func ordersFor(t testing.TB, db *sql.DB, key string) int {
	t.Helper()
	return queryInt(t, db, "SELECT count(*) FROM orders WHERE idempotency_key = ?", key)
}

func totalOrders(t testing.TB, db *sql.DB) int {
	t.Helper()
	return queryInt(t, db, "SELECT count(*) FROM orders")
}

func budgetOf(t testing.TB, db *sql.DB, buyer string) int {
	t.Helper()
	return queryInt(t, db, "SELECT budget_left FROM budgets WHERE buyer = ?", buyer)
}

// duplicateKeys is the one query that must always be empty: no key ever
// holds two orders.
func duplicateKeys(t testing.TB, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query("SELECT idempotency_key, count(*) FROM orders GROUP BY 1 HAVING count(*) > 1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k sql.NullString
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s×%d", k.String, n))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// demoPIDs finds the live demo-server processes of a world by the unique
// database path on their command line (through /proc, not a PID file: the
// client starts them). A zombie counts as gone: it has exited, and in a
// container nobody may ever reap it.
func demoPIDs(t testing.TB, demoDB string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		words := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(words) < 2 || (words[0] != e2eBin && words[0] != e2eFastBin) || words[1] != "demo-server" || !contains(words, demoDB) {
			continue
		}
		if !processLive(pid) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

func contains(words []string, w string) bool {
	for _, x := range words {
		if x == w {
			return true
		}
	}
	return false
}

// processLive: the process exists and is not a zombie.
func processLive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) STATE ...; comm may hold spaces and parentheses.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	return s[i+2] != 'Z' && s[i+2] != 'X'
}

// waitNoDemo waits until no demo server of the world runs; it fails the
// test if one is still alive after d (a generous guard, not a timing claim).
func waitNoDemo(t testing.TB, demoDB string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		pids := demoPIDs(t, demoDB)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("demo server(s) %v still running %s after their client went away", pids, d)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// killPIDs sends SIGKILL to each pid.
func killPIDs(t testing.TB, pids []int) {
	t.Helper()
	for _, p := range pids {
		if err := syscall.Kill(p, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("kill %d: %v", p, err)
		}
	}
}

// stderrLines checks SPEC §4's rule for errors: one or two lines, not empty.
func stderrLines(t testing.TB, r cliResult, what string) {
	t.Helper()
	s := strings.TrimRight(r.stderr, "\n")
	n := strings.Count(s, "\n") + 1
	if s == "" || n > 2 {
		t.Errorf("%s: stderr should say what was wrong in 1-2 lines, got %d:\n%s", what, n, r.stderr)
	}
}

// structured reads a CallToolResult's structuredContent.
func structuredOf(t testing.TB, raw json.RawMessage) map[string]any {
	t.Helper()
	var r struct {
		StructuredContent map[string]any `json:"structuredContent"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	return r.StructuredContent
}

// replayedMeta reports whether a result carries _meta replayed: true.
func replayedMeta(t testing.TB, raw json.RawMessage) bool {
	t.Helper()
	var r struct {
		Meta map[string]any `json:"_meta"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	v, _ := r.Meta["io.github.mcp-confirm/replayed"].(bool)
	return v
}
