// Package version says which build of mcp-confirm is running, from what the
// go command stamped into the binary (runtime/debug.ReadBuildInfo), so that
// no hand-kept string can go stale or lie.
//
// What the go command stamps depends on how the binary was built:
//
//   - go install module@v1.2.3: the module version is the tag; there is no
//     commit (a module download carries no VCS data).
//   - go build in a git clone (Go ≥ 1.24): a version derived from the tags
//     (v1.2.3, or a pseudo-version such as v0.0.0-20261208000351-ad9885e2e47e,
//     with +dirty when files were modified), and vcs.revision, vcs.time and
//     vcs.modified.
//   - go run, go test, -buildvcs=false, or a git worktree (whose .git is a
//     file, which the go command does not recognise): "(devel)" and no
//     commit. The version command says so rather than guess.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// Devel is the module version the go command gives a build it could not
// version (go run, go test, or no VCS data).
const Devel = "(devel)"

// Info is one build's identity.
type Info struct {
	Module string    // the module's version: a tag, a pseudo-version, or Devel
	Commit string    // vcs.revision; "" when the build was not stamped
	Dirty  bool      // vcs.modified: built from a tree with uncommitted changes
	Time   time.Time // vcs.time: the commit's time (zero when not stamped)
	Go     string    // the toolchain that built it (go1.26.8)
	OSArch string    // GOOS/GOARCH it runs on
}

// Read is this binary's Info.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	return From(bi, ok)
}

// From is the Info in bi; ok false (a binary without build info) gives
// Devel and the running toolchain's version.
func From(bi *debug.BuildInfo, ok bool) Info {
	in := Info{Module: Devel, Go: runtime.Version(), OSArch: runtime.GOOS + "/" + runtime.GOARCH}
	if !ok || bi == nil {
		return in
	}
	goos, goarch := runtime.GOOS, runtime.GOARCH
	if v := bi.Main.Version; v != "" {
		in.Module = v
	}
	if bi.GoVersion != "" {
		in.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Commit = s.Value
		case "vcs.modified":
			in.Dirty = s.Value == "true"
		case "vcs.time":
			if t, err := time.Parse(time.RFC3339, s.Value); err == nil {
				in.Time = t.UTC()
			}
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	in.OSArch = goos + "/" + goarch
	return in
}

// Short is the version in one word, for serverInfo, clientInfo and the
// log: the module version, and for a Devel build its commit when known,
// with "+dirty" for modified sources (which a pseudo-version already says).
func (in Info) Short() string {
	v := in.Module
	if v == Devel && in.Commit != "" {
		v += "-" + shortCommit(in.Commit)
	}
	if in.Dirty && !strings.HasSuffix(v, "+dirty") {
		v += "+dirty"
	}
	return v
}

// Long is what `mcp-confirm version` prints: one line per fact, each one
// saying plainly when it is not known.
func (in Info) Long() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mcp-confirm %s\n", in.Short())
	switch {
	case in.Commit == "":
		b.WriteString("commit:  unknown (not stamped: go run, go test, go install of a module, -buildvcs=false, or not built in a git clone)\n")
	case in.Dirty:
		fmt.Fprintf(&b, "commit:  %s (dirty: built with uncommitted changes)\n", in.Commit)
	default:
		fmt.Fprintf(&b, "commit:  %s (clean)\n", in.Commit)
	}
	if in.Time.IsZero() {
		b.WriteString("date:    unknown\n")
	} else {
		// A reproducible build has no clock of its own: its date is the commit's.
		fmt.Fprintf(&b, "date:    %s (commit time)\n", in.Time.Format(time.RFC3339))
	}
	fmt.Fprintf(&b, "go:      %s %s\n", in.Go, in.OSArch)
	return b.String()
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// LogArgs are the build's facts as slog key-value pairs, for a log's first
// line; what was not stamped is said to be unknown rather than logged as a
// zero value.
func (in Info) LogArgs() []any {
	commit, date := in.Commit, "unknown"
	if commit == "" {
		commit = "unknown"
	}
	if !in.Time.IsZero() {
		date = in.Time.Format(time.RFC3339)
	}
	return []any{"version", in.Short(), "commit", commit, "dirty", in.Dirty, "commit_time", date, "go", in.Go}
}
