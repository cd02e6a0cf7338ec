// Package scripts holds the tests of the scripts beside them: here,
// scripts/release, run as a maintainer runs it.
package scripts

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// A release build compiles everything a second time (CGO_ENABLED=0 and
// -trimpath share nothing with the tests' builds): minutes on a small
// machine. `go test ./...` leaves it out; .ci/run sets the switch.
const releaseSwitch = "MCP_CONFIRM_RELEASE"

// built is one release of HEAD, made twice: once for this machine's
// platform (first) and once for it and a cross target (second).
type built struct {
	first, second string // output folders of scripts/release
	host, cross   string // os_arch
	commit        string // git rev-parse HEAD
	commitTime    time.Time
	version       string // as in the archives' names
	err           error
}

var (
	releaseOnce sync.Once
	release     built
)

// TestMain removes the release's folders after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if release.first != "" {
		os.RemoveAll(filepath.Dir(release.first))
	}
	os.Exit(code)
}

func git(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// buildRelease runs scripts/release twice into two folders of its own,
// once per test binary.
func buildRelease(t *testing.T) *built {
	t.Helper()
	if os.Getenv(releaseSwitch) == "" {
		t.Skipf("the release build takes minutes (everything compiled again, CGO_ENABLED=0 -trimpath); %s=1 runs it (.ci/run does)", releaseSwitch)
	}
	releaseOnce.Do(func() {
		r := &release
		out, err := exec.Command("git", "log", "-1", "--format=%H %cI", "HEAD").Output()
		if err != nil {
			r.err = err
			return
		}
		commit, when, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
		ct, err := time.Parse(time.RFC3339, when)
		if err != nil {
			r.err = err
			return
		}
		r.commit = commit
		r.commitTime = ct.UTC()
		r.host = runtime.GOOS + "_" + runtime.GOARCH
		r.cross = "darwin_arm64"
		if r.host == r.cross {
			r.cross = "linux_arm64"
		}
		dir, err := os.MkdirTemp("", "mcp-confirm-release-")
		if err != nil {
			r.err = err
			return
		}
		r.first, r.second = filepath.Join(dir, "first"), filepath.Join(dir, "second")
		for _, run := range []struct {
			out     string
			targets []string
		}{{r.first, []string{r.host}}, {r.second, []string{r.host, r.cross}}} {
			args := []string{"-o", run.out}
			for _, tg := range run.targets {
				args = append(args, strings.Replace(tg, "_", "/", 1))
			}
			if out, err := exec.Command("./release", args...).CombinedOutput(); err != nil {
				r.err = &exec.Error{Name: "scripts/release " + strings.Join(args, " ") + ": " + string(out), Err: err}
				return
			}
		}
		names, _ := filepath.Glob(filepath.Join(r.first, "mcp-confirm_*_"+r.host+".tar.gz"))
		if len(names) != 1 {
			r.err = os.ErrNotExist
			return
		}
		r.version = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(names[0]), "mcp-confirm_"), "_"+r.host+".tar.gz")
	})
	if release.err != nil {
		t.Fatal(release.err)
	}
	return &release
}

func (r *built) archive(dir, target string) string {
	return filepath.Join(dir, "mcp-confirm_"+r.version+"_"+target+".tar.gz")
}

// The same commit built twice gives byte-identical archives; each holds
// the binary (static, trimmed), the README (and LICENSE, when the commit
// has one), all owned by 0 and dated at the commit; SHA256SUMS verifies;
// the formula carries each sum; the binary names its commit.
func TestReleaseIsReproducible(t *testing.T) {
	r := buildRelease(t)
	a, err := os.ReadFile(r.archive(r.first, r.host))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(r.archive(r.second, r.host))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("two builds of %s differ: %d and %d bytes", r.commit, len(a), len(b))
	}

	// Contents, read with archive/tar.
	top := "mcp-confirm_" + r.version + "_" + r.host + "/"
	want := []string{top, top + "README.md", top + "mcp-confirm"}
	if _, err := exec.Command("git", "cat-file", "-e", "HEAD:LICENSE").Output(); err == nil {
		want = []string{top, top + "LICENSE", top + "README.md", top + "mcp-confirm"}
	} else {
		t.Logf("the commit has no LICENSE: the archive carries none")
	}
	files := map[string][]byte{}
	var names []string
	zr, err := gzip.NewReader(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(r.commitTime) {
			t.Errorf("%s: uid %d gid %d mtime %v; want 0, 0, the commit's time %v", h.Name, h.Uid, h.Gid, h.ModTime, r.commitTime)
		}
		body, _ := io.ReadAll(tr)
		files[h.Name] = body
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("archive holds %v, want %v", names, want)
	}
	if readme := git(t, "show", r.commit+":README.md"); strings.TrimSpace(string(files[top+"README.md"])) != readme {
		t.Errorf("the archive's README.md is not the commit's")
	}

	// SHA256SUMS verifies, with the tool the README gives.
	cmd := exec.Command("sha256sum", "-c", "SHA256SUMS")
	cmd.Dir = r.second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("sha256sum -c SHA256SUMS: %v\n%s", err, out)
	}
	sums, err := os.ReadFile(filepath.Join(r.second, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	formula, err := os.ReadFile(filepath.Join(r.second, "Formula", "mcp-confirm.rb"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		sum, name, _ := strings.Cut(line, "  ")
		if !bytes.Contains(formula, []byte(`sha256 "`+sum+`"`)) || !bytes.Contains(formula, []byte("/"+name+`"`)) {
			t.Errorf("the formula lacks %s or its sum %s:\n%s", name, sum, formula)
		}
	}
	if n := len(strings.Split(strings.TrimSpace(string(sums)), "\n")); n != 2 {
		t.Errorf("SHA256SUMS has %d lines, want 2 (%s, %s):\n%s", n, r.host, r.cross, sums)
	}

	// The cross target's binary: built for it, static, trimmed.
	bin := filepath.Join(t.TempDir(), "cross")
	extract(t, r.archive(r.second, r.cross), "mcp-confirm_"+r.version+"_"+r.cross+"/mcp-confirm", bin)
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	goos, goarch, _ := strings.Cut(r.cross, "_")
	for _, w := range []string{"GOOS=" + goos, "GOARCH=" + goarch, "CGO_ENABLED=0", "-trimpath=true", "vcs.revision=" + r.commit, "vcs.modified=false"} {
		if !bytes.Contains(out, []byte(w)) {
			t.Errorf("go version -m of the %s binary lacks %s:\n%s", r.cross, w, out)
		}
	}

	// This platform's binary runs and names its commit.
	bin = filepath.Join(t.TempDir(), "mcp-confirm")
	extract(t, r.archive(r.first, r.host), top+"mcp-confirm", bin)
	out, err = exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	for _, w := range []string{"mcp-confirm v" + r.version + "\n", "commit:  " + r.commit + " (clean)\n",
		"date:    " + r.commitTime.Format(time.RFC3339) + " (commit time)\n"} {
		if !bytes.Contains(out, []byte(w)) {
			t.Errorf("version lacks %q:\n%s", w, out)
		}
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: archive %d bytes, binary %d bytes", r.host, len(a), fi.Size())
}

// extract writes the archive's file name to out, executable.
func extract(t *testing.T, archive, name, out string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s has no %s: %v", archive, name, err)
		}
		if h.Name == name {
			body, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(out, body, 0o755); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
}

var versionLine = regexp.MustCompile(`(?m)^V=\S+`)

// The README's release-binary block, run as written in an empty HOME and
// folder, with two changes: V is the version just built, and curl copies
// the file its URL names from the release folder (there is no GitHub
// release of an unreleased commit).
func TestReleaseInstallsAsTheREADMESays(t *testing.T) {
	r := buildRelease(t)
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	i := strings.Index(s, "**1. A release binary**")
	if i < 0 {
		t.Fatal(`README.md has no "**1. A release binary**" in its install section`)
	}
	s = s[i:]
	s = s[strings.Index(s, "```sh\n")+len("```sh\n"):]
	block := s[:strings.Index(s, "```")]
	if !versionLine.MatchString(block) {
		t.Fatalf("the README's block sets no V=:\n%s", block)
	}
	block = versionLine.ReplaceAllLiteralString(block, "V="+r.version)
	goos, goarch, _ := strings.Cut(r.host, "_")
	block = strings.Replace(block, "OS=linux ARCH=amd64", "OS="+goos+" ARCH="+goarch, 1)
	script := "set -e\ncurl() { local u=${!#}; cp \"$RELEASE_DIR/${u##*/}\" .; }\n" + block

	home, work := t.TempDir(), t.TempDir()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = work
	// A PATH without Go's or the tests' binaries: only the system's tools.
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin", "RELEASE_DIR=" + r.second, "LC_ALL=C"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's install block: %v\n%s\n--- block:\n%s", err, out, block)
	}
	for _, w := range []string{": OK\n", "mcp-confirm v" + r.version + "\n", "commit:  " + r.commit + " (clean)\n"} {
		if !bytes.Contains(out, []byte(w)) {
			t.Errorf("the install block's output lacks %q:\n%s", w, out)
		}
	}
	if _, err := os.Stat(filepath.Join(home, ".local", "bin", "mcp-confirm")); err != nil {
		t.Errorf("not installed in ~/.local/bin: %v", err)
	}
}

// The version a binary prints when it was built from a tree with changes
// (the commit, and "dirty") and when the go command stamped nothing
// ("(devel)", commit unknown): built from a clone of HEAD as the release
// is, so the build shares its cache.
func TestReleaseVersionOfDirtyAndUnstampedBuilds(t *testing.T) {
	r := buildRelease(t)
	src := filepath.Join(t.TempDir(), "src")
	if out, err := exec.Command("git", "clone", "-q", "--shared", "--no-checkout", "..", src).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	if out, err := exec.Command("git", "-C", src, "checkout", "-q", "--detach", r.commit).CombinedOutput(); err != nil {
		t.Fatalf("git checkout: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(src, "README.md"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		buildvcs string
		want     []string
	}{
		{"true", []string{"mcp-confirm v0.", "+dirty\n", "commit:  " + r.commit + " (dirty: built with uncommitted changes)\n",
			"date:    " + r.commitTime.Format(time.RFC3339) + " (commit time)\n"}},
		{"false", []string{"mcp-confirm (devel)\n", "commit:  unknown (not stamped", "date:    unknown\n"}},
	} {
		bin := filepath.Join(t.TempDir(), "mcp-confirm")
		build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", bin, "./cmd/mcp-confirm")
		build.Dir = src
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs="+tc.buildvcs)
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build -buildvcs=%s: %v\n%s", tc.buildvcs, err, out)
		}
		out, err := exec.Command(bin, "version").Output()
		if err != nil {
			t.Fatalf("version: %v", err)
		}
		for _, w := range tc.want {
			if !bytes.Contains(out, []byte(w)) {
				t.Errorf("-buildvcs=%s: version lacks %q:\n%s", tc.buildvcs, w, out)
			}
		}
	}
}
