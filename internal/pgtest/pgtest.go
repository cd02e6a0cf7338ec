// Package pgtest runs one throwaway PostgreSQL cluster per test binary, for
// the tests of the journal's PostgreSQL backend: a data folder in a temp
// folder, reached only through a Unix socket inside it (no TCP port), made
// on first use and stopped when the binary's tests end.
//
// A test binary that uses it has
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// and each test asks for a database of its own with pgtest.Database(t).
//
// The server binaries are found by pg_config --bindir, else in
// /usr/lib/postgresql/*/bin (the newest), else in $PGTEST_BINDIR when set.
// Where they are missing the tests skip, with one line saying how to run
// them; with $PGTEST_REQUIRED=1 (set by .ci/run) they fail instead, so that
// CI cannot pass by skipping. initdb refuses to run as root, and the tests
// here run as root: then initdb, pg_ctl and the server run as the
// postgres system user (runuser -u postgres), in a data folder that user
// owns. The server runs with fsync on, as in production, so timings taken
// on it mean something.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a running throwaway cluster.
type Cluster struct {
	BinDir string // the server binaries used
	Dir    string // the temp folder holding everything; removed by Stop
	Data   string // the data folder, which also holds the socket
	Port   int    // names the socket (.s.PGSQL.PORT); no TCP listener

	asUser   string    // "postgres" when the binaries run through runuser
	watchdog *exec.Cmd // stops the cluster if the test binary dies first
	dbs      atomic.Int64
}

var (
	mu      sync.Mutex
	current *Cluster
	failed  error // the first start that failed, reported to every later test
)

// Main runs the tests and then stops the cluster, if one was started.
func Main(m *testing.M) int { return Finish(m.Run()) }

// Finish stops the cluster, if one was started, and returns code, or 1
// when code was 0 and the cluster did not stop cleanly: for a TestMain
// that runs the tests more than once.
func Finish(code int) int {
	mu.Lock()
	c := current
	current = nil
	mu.Unlock()
	if c != nil {
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Start returns the binary's cluster, starting it on first use. It skips
// the test when the server binaries are missing (fails it under
// $PGTEST_REQUIRED=1), and fails it when the cluster cannot start.
func Start(t testing.TB) *Cluster {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if current != nil {
		return current
	}
	if failed != nil {
		t.Fatalf("pgtest: %v", failed)
	}
	bin := binDirOrSkip(t)
	c, err := start(bin)
	if err != nil {
		failed = err
		t.Fatalf("pgtest: %v", err)
	}
	current = c
	return c
}

// StartPrivate starts a cluster for this test alone, stopped (and its
// folder removed) when the test ends: for a test that restarts or stops
// the server, which on the shared cluster of Start would cut the
// connections of every other test running meanwhile. It skips or fails
// as Start does when the server binaries are missing.
func StartPrivate(t testing.TB) *Cluster {
	t.Helper()
	c, err := start(binDirOrSkip(t))
	if err != nil {
		t.Fatalf("pgtest: private cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("pgtest: private cluster: %v", err)
		}
	})
	return c
}

// binDirOrSkip is BinDir, skipping the test where the server binaries are
// missing (failing it under $PGTEST_REQUIRED=1).
func binDirOrSkip(t testing.TB) string {
	t.Helper()
	bin, err := BinDir()
	if err != nil {
		msg := fmt.Sprintf("PostgreSQL tests skipped: %v; to run them, install the server (apt-get install postgresql) or set $PGTEST_BINDIR, or run .ci/run", err)
		if os.Getenv("PGTEST_REQUIRED") == "1" {
			t.Fatal(msg + " ($PGTEST_REQUIRED=1: not skipping)")
		}
		t.Skip(msg)
	}
	return bin
}

// BinDir finds the folder holding initdb, pg_ctl and postgres.
func BinDir() (string, error) {
	var tried []string
	var candidates []string
	if d := os.Getenv("PGTEST_BINDIR"); d != "" {
		candidates = append(candidates, d)
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	} else {
		tried = append(tried, "pg_config --bindir")
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(found, func(a, b int) bool { return version(found[a]) > version(found[b]) })
	candidates = append(candidates, found...)
	for _, d := range candidates {
		if hasServer(d) {
			return d, nil
		}
		tried = append(tried, d)
	}
	if len(found) == 0 {
		tried = append(tried, "/usr/lib/postgresql/*/bin")
	}
	return "", fmt.Errorf("no PostgreSQL server binaries (initdb, pg_ctl, postgres) in %s", strings.Join(tried, ", "))
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func hasServer(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// start makes and starts a cluster with the binaries of bin.
func start(bin string) (_ *Cluster, err error) {
	// A short folder: a socket's path may not pass 107 bytes.
	base := os.TempDir()
	if len(base) > 60 {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "pgtest-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{BinDir: bin, Dir: dir, Data: filepath.Join(dir, "data"), Port: 5432}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if err := os.Mkdir(c.Data, 0o700); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, initdb needs the postgres system user (made by the postgresql package): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		// The postgres user must reach the data folder through dir.
		if err := os.Chmod(dir, 0o711); err != nil {
			return nil, err
		}
		if err := os.Chown(c.Data, uid, gid); err != nil {
			return nil, err
		}
		c.asUser = "postgres"
	}
	if out, err := c.run("initdb", "-D", c.Data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	conf := fmt.Sprintf("\n# pgtest\nlisten_addresses = ''\nunix_socket_directories = '%s'\nport = %d\nmax_connections = 200\n", c.Data, c.Port)
	f, err := os.OpenFile(filepath.Join(c.Data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString(conf)
	if err := errors.Join(err, f.Close()); err != nil {
		return nil, err
	}
	if err := c.startWatchdog(); err != nil {
		return nil, err
	}
	if out, err := c.run("pg_ctl", "-D", c.Data, "-l", filepath.Join(c.Data, "server.log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.Data, "server.log"))
		return nil, fmt.Errorf("pg_ctl start: %w\n%s\n%s", err, out, log)
	}
	return c, nil
}

// run runs one of the server binaries, as the postgres user when needed.
func (c *Cluster) run(name string, args ...string) ([]byte, error) {
	cmd := c.command(name, args...)
	return cmd.CombinedOutput()
}

func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	path := filepath.Join(c.BinDir, name)
	var cmd *exec.Cmd
	if c.asUser != "" {
		cmd = exec.Command(runuser(), append([]string{"-u", c.asUser, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = c.Dir // a folder the postgres user can enter
	cmd.Env = serverEnv()
	return cmd
}

// serverEnv is the environment without PG* variables, which would point
// the binaries elsewhere.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return env
}

// startWatchdog starts a shell, in a session of its own, that stops the
// cluster and removes its folder once this process is gone: a test binary
// killed by go test's -timeout runs no TestMain epilogue, and a cluster
// left running would hold memory on a shared machine until reboot.
func (c *Cluster) startWatchdog() error {
	stop := shellQuote(filepath.Join(c.BinDir, "pg_ctl")) + " -D " + shellQuote(c.Data) + " -m immediate -w stop"
	if c.asUser != "" {
		stop = shellQuote(runuser()) + " -u " + c.asUser + " -- " + stop
	}
	script := fmt.Sprintf("while kill -0 %d 2>/dev/null; do sleep 1; done; %s >/dev/null 2>&1; rm -rf %s",
		os.Getpid(), stop, shellQuote(c.Dir))
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = serverEnv()
	cmd.SysProcAttr = detached()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the cluster's watchdog: %w", err)
	}
	c.watchdog = cmd
	return nil
}

// runuser is util-linux's runuser, found on $PATH or where Debian puts
// it (a PATH without the sbin folders is common under CI).
func runuser() string {
	if p, err := exec.LookPath("runuser"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "runuser"
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Stop stops the server and removes the cluster's folder.
func (c *Cluster) Stop() error {
	var errs []error
	if _, err := os.Stat(filepath.Join(c.Data, "postmaster.pid")); err == nil {
		if out, err := c.run("pg_ctl", "-D", c.Data, "-m", "fast", "-w", "-t", "60", "stop"); err != nil {
			errs = append(errs, fmt.Errorf("pg_ctl stop: %w\n%s", err, out))
		}
	}
	if c.watchdog != nil {
		_ = c.watchdog.Process.Kill() // the watchdog this cluster started, by its pid
		_ = c.watchdog.Wait()
	}
	errs = append(errs, os.RemoveAll(c.Dir))
	return errors.Join(errs...)
}

// Restart restarts the server (pg_ctl restart, fast mode): connections
// are cut, committed data stays.
func (c *Cluster) Restart(t testing.TB) {
	t.Helper()
	if out, err := c.run("pg_ctl", "-D", c.Data, "-l", filepath.Join(c.Data, "server.log"), "-m", "fast", "-w", "-t", "60", "restart"); err != nil {
		t.Fatalf("pg_ctl restart: %v\n%s", err, out)
	}
}

// ConnString is a libpq key/value connection string for database db as
// the superuser postgres, through the cluster's socket.
func (c *Cluster) ConnString(db string) string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable", c.Data, c.Port, db)
}

// Database starts the cluster if needed, makes a new empty database for
// this test, and drops it when the test ends. It returns its connection
// string.
func Database(t testing.TB) string {
	t.Helper()
	return Start(t).Database(t)
}

// Database makes a new empty database on c for this test, and drops it
// when the test ends. It returns its connection string.
func (c *Cluster) Database(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), c.dbs.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := c.ConnString("postgres")
	if err := exec1(ctx, admin, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := exec1(ctx, admin, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return c.ConnString(name)
}

func exec1(ctx context.Context, conn, sql string) error {
	pc, err := pgx.Connect(ctx, conn)
	if err != nil {
		return err
	}
	defer pc.Close(context.Background())
	_, err = pc.Exec(ctx, sql)
	return err
}
