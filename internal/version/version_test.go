package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

// What each kind of build says: a stamped clean one, a dirty one, a tagged
// module download without VCS data, and a build with nothing stamped,
// which says "unknown" rather than invent a commit or a date.
func TestFromBuildInfo(t *testing.T) {
	vcs := func(rev, modified, when string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: when}, {Key: "vcs.modified", Value: modified},
			{Key: "GOOS", Value: "darwin"}, {Key: "GOARCH", Value: "arm64"}}
	}
	const rev = "ad9885e2e47e234244a061ecf37ebeb51be28650"
	for _, tc := range []struct {
		name  string
		bi    *debug.BuildInfo
		short string
		long  []string
	}{
		{"clone, clean", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261208000351-ad9885e2e47e"},
			Settings: vcs(rev, "false", "2026-12-08T00:03:51Z")},
			"v0.0.0-20261208000351-ad9885e2e47e",
			[]string{"mcp-confirm v0.0.0-20261208000351-ad9885e2e47e\n", "commit:  " + rev + " (clean)\n",
				"date:    2026-12-08T00:03:51Z (commit time)\n", "go:      go1.26.8 darwin/arm64\n"}},
		{"clone, dirty", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261208000351-ad9885e2e47e+dirty"},
			Settings: vcs(rev, "true", "2026-12-08T00:03:51Z")},
			"v0.0.0-20261208000351-ad9885e2e47e+dirty",
			[]string{"commit:  " + rev + " (dirty: built with uncommitted changes)\n"}},
		{"go install module@v1.2.3", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}},
			"v1.2.3", []string{"mcp-confirm v1.2.3\n", "commit:  unknown (", "date:    unknown\n"}},
		{"devel with a commit", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: Devel}, Settings: vcs(rev, "true", "2026-12-08T00:03:51Z")},
			"(devel)-ad9885e2e47e+dirty", []string{"mcp-confirm (devel)-ad9885e2e47e+dirty\n"}},
		{"go test, go run", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: Devel}},
			"(devel)", []string{"mcp-confirm (devel)\n", "commit:  unknown (not stamped", "date:    unknown\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := From(tc.bi, true)
			if got := in.Short(); got != tc.short {
				t.Errorf("Short() = %q, want %q", got, tc.short)
			}
			long := in.Long()
			for _, want := range tc.long {
				if !strings.Contains(long, want) {
					t.Errorf("Long() lacks %q:\n%s", want, long)
				}
			}
		})
	}
	if in := From(nil, false); in.Short() != Devel || in.Commit != "" || !in.Time.IsZero() {
		t.Errorf("no build info: %+v", in)
	}
}
