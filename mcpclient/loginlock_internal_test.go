//go:build linux || darwin

package mcpclient

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
)

// holdLockEnv makes this test binary, started again by a test, a process
// that holds the flock on the file the variable names until it is killed
// or its stdin closes: another process, as another mcp-confirm would be.
const holdLockEnv = "MCPCLIENT_TEST_HOLD_LOCK"

func init() {
	path := os.Getenv(holdLockEnv)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err == nil {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// holdLock starts a process holding the flock on path, and returns it
// once it holds it.
func holdLock(t *testing.T, path string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdLockEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "locked\n" {
		t.Fatalf("the lock holder said %q", line)
	}
	return cmd
}

const lockTestURL = "https://orders.example.com/mcp"

// A login's lock held by another process: a second taker waits for it,
// up to LockWait, then gets ErrLoginBusy naming the lock file, and nothing
// is written; its context ends the wait at once; a lock released while it
// waits is taken. A refresh that cannot have the lock says so, and does
// not say to log in again.
func TestLoginLockWaitIsBounded(t *testing.T) {
	l := Logins{Dir: t.TempDir(), LockWait: 300 * time.Millisecond}
	ctx := context.Background()
	holder := holdLock(t, l.LockPath(lockTestURL))

	began := time.Now()
	_, err := l.lock(ctx, lockTestURL)
	waited := time.Since(began)
	if !errors.Is(err, ErrLoginBusy) || !strings.Contains(err.Error(), l.LockPath(lockTestURL)) || !strings.Contains(err.Error(), "300ms") {
		t.Fatalf("lock held by another process: %v, want ErrLoginBusy naming %s and the wait", err, l.LockPath(lockTestURL))
	}
	if waited < 300*time.Millisecond || waited > 5*time.Second {
		t.Errorf("gave up after %s, want the LockWait of 300ms", waited)
	}

	login := Login{URL: lockTestURL, ClientID: "c1"}
	login.Token = transport.Token{AccessToken: "at", RefreshToken: "rt", ExpiresIn: 3600, ExpiresAt: time.Now().Add(-time.Minute)}
	if err := l.Save(login); !errors.Is(err, ErrLoginBusy) {
		t.Fatalf("save while locked: %v, want ErrLoginBusy", err)
	}
	if _, err := os.Stat(l.Path(lockTestURL)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a login file was written without the lock: %v", err)
	}

	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	patient := Logins{Dir: l.Dir, LockWait: time.Minute}
	began = time.Now()
	if _, err := patient.lock(cctx, lockTestURL); !errors.Is(err, context.DeadlineExceeded) || time.Since(began) > 5*time.Second {
		t.Fatalf("wait whose context ends: %v after %s, want the context's error at once", err, time.Since(began))
	}

	// The login is written (the holder let go for a moment, say), and is
	// due: its refresh waits for the lock and gives up, with no refresh
	// sent and the login not taken for refused.
	holder.Process.Kill()
	holder.Wait()
	if err := l.Save(login); err != nil {
		t.Fatal(err)
	}
	holdLock(t, l.LockPath(lockTestURL))
	tokens := &loginTokens{logins: l, url: lockTestURL, handler: transport.NewOAuthHandler(transport.OAuthConfig{})}
	_, err = tokens.GetToken(ctx)
	if !errors.Is(err, ErrLoginBusy) || errors.Is(err, transport.ErrNoToken) || !strings.Contains(err.Error(), l.LockPath(lockTestURL)) {
		t.Fatalf("refresh while another process holds the lock: %v, want ErrLoginBusy naming the lock file, not ErrNoToken", err)
	}
	if l.expireToken(lockTestURL) {
		t.Error("expireToken wrote the login without its lock")
	}
	// Through mcp-go, at a session's handshake: the same error, before
	// anything is sent (the URL is never reached).
	r, err := NewRemote(ServerSpec{URL: lockTestURL}, Options{OAuth: &l, StartTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Start(ctx); !errors.Is(err, ErrLoginBusy) || errors.Is(err, ErrAuthorization) {
		t.Fatalf("handshake while another process holds the lock: %v, want ErrLoginBusy, not authorization needed", err)
	}

	// Released while a taker waits: the taker has it.
	other := Logins{Dir: t.TempDir(), LockWait: 10 * time.Second}
	unlock, err := other.lock(ctx, lockTestURL)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(100*time.Millisecond, unlock)
	began = time.Now()
	unlock2, err := other.lock(ctx, lockTestURL)
	if err != nil {
		t.Fatalf("lock released while waiting: %v", err)
	}
	unlock2()
	if d := time.Since(began); d < 100*time.Millisecond {
		t.Errorf("took the lock after %s, while it was still held", d)
	}
}

// The lock file needs no care: missing (the folder too), it is made, mode
// 0600; what is in it is not read; one left by a process that was killed
// holding the lock is free at once (the system drops a dead process's
// flock). Something at its path that cannot be opened is an error naming
// it, at once, not a wait.
func TestLoginLockFile(t *testing.T) {
	ctx := context.Background()
	l := Logins{Dir: filepath.Join(t.TempDir(), "state", "oauth"), LockWait: 200 * time.Millisecond}
	path := l.LockPath(lockTestURL)
	if filepath.Dir(path) != l.Dir || path != l.Path(lockTestURL)+".lock" {
		t.Fatalf("lock file %s, want beside the login file %s", path, l.Path(lockTestURL))
	}

	unlock, err := l.lock(ctx, lockTestURL)
	if err != nil {
		t.Fatalf("missing lock file and folder: %v", err)
	}
	unlock()
	for p, want := range map[string]os.FileMode{path: 0o600, l.Dir: 0o700} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != want {
			t.Fatalf("%s: %v, mode %v, want %04o", p, err, st.Mode().Perm(), want)
		}
	}

	junk := []byte("not a lock \x00\xff{\n")
	if err := os.WriteFile(path, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	if unlock, err = l.lock(ctx, lockTestURL); err != nil {
		t.Fatalf("lock file with junk in it: %v", err)
	}
	unlock()
	if b, _ := os.ReadFile(path); string(b) != string(junk) {
		t.Errorf("the lock file's content was changed to %q", b)
	}

	holder := holdLock(t, path)
	if _, err := l.lock(ctx, lockTestURL); !errors.Is(err, ErrLoginBusy) {
		t.Fatalf("lock held by another process: %v, want ErrLoginBusy", err)
	}
	if err := holder.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = holder.Wait()
	if unlock, err = l.lock(ctx, lockTestURL); err != nil { // within the LockWait of 200ms
		t.Fatalf("lock file of a killed holder: %v", err)
	}
	unlock()

	dirAt := Logins{Dir: t.TempDir(), LockWait: time.Minute}
	if err := os.Mkdir(dirAt.LockPath(lockTestURL), 0o700); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err = dirAt.lock(ctx, lockTestURL)
	if err == nil || errors.Is(err, ErrLoginBusy) || !strings.Contains(err.Error(), dirAt.LockPath(lockTestURL)) || time.Since(began) > 5*time.Second {
		t.Fatalf("a folder at the lock file's path: %v after %s, want an error naming it at once", err, time.Since(began))
	}
	if os.Geteuid() != 0 { // root opens any file
		closed := Logins{Dir: t.TempDir()}
		if err := os.WriteFile(closed.LockPath(lockTestURL), nil, 0o000); err != nil {
			t.Fatal(err)
		}
		if _, err := closed.lock(ctx, lockTestURL); !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), closed.LockPath(lockTestURL)) {
			t.Fatalf("a lock file that cannot be opened: %v, want a permission error naming it", err)
		}
	}
}
