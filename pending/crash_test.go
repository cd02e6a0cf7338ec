package pending

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/pgtest"
)

// The crash tests run this test binary again as a child process (selected
// by PENDING_CHILD) so that a real process holds the journal and is killed
// with SIGKILL: no deferred Close, no cleanup, exactly like a crash.
func TestMain(m *testing.M) {
	switch os.Getenv("PENDING_CHILD") {
	case "":
		os.Exit(pgtest.Finish(runOnBothBackends(m))) // stops the PostgreSQL cluster, if a test started one
	case "intent":
		childIntent(os.Getenv("PENDING_DB"))
	case "bulk":
		n, _ := strconv.Atoi(os.Getenv("PENDING_N"))
		childBulk(os.Getenv("PENDING_DB"), os.Getenv("PENDING_TAG"), n)
	case "open":
		childOpen(os.Getenv("PENDING_DB"))
	case "intents":
		childIntents(os.Getenv("PENDING_DB"))
	case "classify":
		childClassify(os.Getenv("PENDING_DB"))
	case "keys":
		childKeys(os.Getenv("PENDING_DB"))
	case "hold":
		childHold(os.Getenv("PENDING_DB"))
	case "seal":
		childSeal(os.Getenv("PENDING_DB"))
	case "pgowner":
		childPGOwner(os.Getenv("PENDING_DB"))
	}
}

// childIntents records one intent, then one more for each line it reads on
// stdin, saying each on stdout, and waits to be killed.
func childIntents(path string) {
	ctx := context.Background()
	j, err := Open(ctx, path, Options{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	in := bufio.NewReader(os.Stdin)
	for i := 0; ; i++ {
		c, err := j.RecordIntent(ctx, intent("create_order", fmt.Sprintf(`{"item":"widget","i":%d}`, i)))
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Printf("recorded %d\n", c.ID)
		if _, err := in.ReadString('\n'); err != nil {
			select {} // "sending": wait for SIGKILL
		}
	}
}

// childClassify opens the journal and says which of the typed errors of
// Open the failure is ("error ErrReadOnly: ..."), or "opened".
func childClassify(path string) {
	j, err := Open(context.Background(), path, Options{})
	if err != nil {
		fmt.Printf("error %s: %v\n", errorKinds(err), err)
		os.Exit(1)
	}
	j.Close()
	fmt.Println("opened")
}

// childKeys opens the journal and prints the key of every call, one a line,
// then "end".
func childKeys(path string) {
	ctx := context.Background()
	j, err := Open(ctx, path, Options{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	calls, err := j.List(ctx, Filter{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	for _, c := range calls {
		fmt.Println(c.Key)
	}
	j.Close()
	fmt.Println("end")
}

// childOpen opens the journal, says how that went, and closes it.
func childOpen(path string) {
	j, err := Open(context.Background(), path, Options{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	j.Close()
	fmt.Println("opened")
}

// childIntent records one intent, says so on stdout, and waits to be killed.
func childIntent(path string) {
	j, err := Open(context.Background(), path, Options{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	c, err := j.RecordIntent(context.Background(), intent("create_order", `{"item":"widget"}`))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Printf("recorded %d\n", c.ID)
	select {} // "sending": wait for SIGKILL
}

// childBulk records n calls (intent, then outcome), then reports and waits
// on stdin so the parent can look while it is still alive.
func childBulk(path, tag string, n int) {
	ctx := context.Background()
	j, err := Open(ctx, path, Options{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	for i := range n {
		c, err := j.RecordIntent(ctx, intent("create_order", fmt.Sprintf(`{"tag":%q,"i":%d}`, tag, i)))
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		// Leave every tenth call in flight: a live owner's calls must not
		// be recovered by the other process's Open.
		if i%10 != 0 {
			if err := j.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventSucceeded}); err != nil {
				fmt.Println("error:", err)
				os.Exit(1)
			}
		}
	}
	fmt.Println("done")
	bufio.NewReader(os.Stdin).ReadString('\n')
	j.Close()
}

func startChild(t *testing.T, mode string, env ...string) (*exec.Cmd, *bufio.Reader, *os.File) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, "PENDING_CHILD="+mode)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = stdinR
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdinR.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); stdinW.Close() })
	return cmd, bufio.NewReader(out), stdinW
}

func TestCrashRecoversInFlightAsUnknown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	cmd, out, _ := startChild(t, "intent", "PENDING_DB="+testDB(t, path))
	line, err := out.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "recorded ") {
		t.Fatalf("child: %q %v", line, err)
	}
	id, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "recorded ")), 10, 64)

	// While the child lives, another process's open leaves its call alone.
	j := openTest(t, path)
	if c, _ := j.Get(context.Background(), id); c.State != StateInFlight {
		t.Fatalf("live owner's call was touched: %s", c.State)
	}
	if len(j.Recovered()) != 0 {
		t.Fatalf("recovered %v while the owner lives", j.Recovered())
	}
	j.Close()

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	j = openTest(t, path)
	if got := j.Recovered(); len(got) != 1 || got[0] != id {
		t.Fatalf("recovered %v, want [%d]", got, id)
	}
	c, err := j.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if c.State != StateUnknown || c.Reason != ReasonRecovered || len(c.Attempts) != 1 ||
		c.Attempts[0].Outcome != OutcomeUnknown || c.Attempts[0].EndedAt == nil {
		t.Fatalf("after crash: %+v", c)
	}
	if testBackend == "postgres" {
		return // no lock files: the owner's lock died with its session
	}
	// The dead owner's lock file is gone; ours remains.
	entries, _ := os.ReadDir(ownersDir(path))
	if len(entries) != 1 {
		t.Fatalf("owner files after recovery: %d", len(entries))
	}
}

// Processes that open a journal not yet created, all at once (four
// identical calls started together, say), all get it. Two races lost here
// once: the switch to WAL mode answered SQLITE_BUSY without waiting, and
// the schema check, read in three statements, could see another process's
// first migration half (its tables, not yet its application id) and call
// the file another application's. Each round starts on a new file; a
// round is over in well under a second, and the races showed about once
// in twenty rounds of six.
func TestProcessesCreateOneJournalTogether(t *testing.T) {
	const rounds, procs = 30, 6
	for r := range rounds {
		path := filepath.Join(t.TempDir(), "journal.db")
		var outs []*bufio.Reader
		for range procs {
			_, out, _ := startChild(t, "open", "PENDING_DB="+testDB(t, path))
			outs = append(outs, out)
		}
		for i, out := range outs {
			line, err := out.ReadString('\n')
			if err != nil || strings.TrimSpace(line) != "opened" {
				t.Fatalf("round %d, process %d: %q %v", r, i, strings.TrimSpace(line), err)
			}
		}
	}
}

func TestTwoProcessesShareOneJournal(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips the 2x1000-call two-process test")
	}
	path := filepath.Join(t.TempDir(), "journal.db")
	// Create the file first so the children do not race on the migration.
	openTest(t, path).Close()
	const n = 1000
	var outs []*bufio.Reader
	for _, tag := range []string{"a", "b"} {
		_, out, _ := startChild(t, "bulk", "PENDING_DB="+testDB(t, path), "PENDING_TAG="+tag, "PENDING_N="+strconv.Itoa(n))
		outs = append(outs, out)
	}
	deadline := time.AfterFunc(5*time.Minute, func() { panic("children did not finish in 5 minutes") })
	for i, out := range outs {
		line, err := out.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "done" {
			t.Fatalf("child %d: %q %v", i, line, err)
		}
	}
	deadline.Stop()
	// Both owners alive: opening recovers nothing.
	j := openTest(t, path)
	counts, err := j.Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if total := counts[StateSucceeded] + counts[StateInFlight]; total != 2*n || counts[StateUnknown] != 0 {
		t.Fatalf("counts with both owners alive: %v", counts)
	}
	if counts[StateInFlight] != 2*n/10 {
		t.Fatalf("in flight: %d, want %d", counts[StateInFlight], 2*n/10)
	}
}
