package pending

import "testing"

func TestIsPostgresAndHidePassword(t *testing.T) {
	firstRunOnly(t)
	for _, tc := range []struct {
		db, hidden string
		pg         bool
	}{
		{"postgres://alice:s3cret@db.example:5432/team?sslmode=require", "postgres://alice:xxxxx@db.example:5432/team?sslmode=require", true},
		{"postgresql://alice@db/team", "postgresql://alice@db/team", true},
		{"host=/run/postgresql dbname=team password=s3cret user=alice", "host=/run/postgresql dbname=team password=xxxxx user=alice", true},
		{"host=db password='two words' dbname=team", "host=db password=xxxxx dbname=team", true},
		{"dbname=team", "dbname=team", true},
		{"/home/alice/.local/state/mcp-confirm/journal.db", "/home/alice/.local/state/mcp-confirm/journal.db", false},
		{"journal=1.db", "journal=1.db", false},
		{"password.db", "password.db", false},
	} {
		if got := IsPostgres(tc.db); got != tc.pg {
			t.Errorf("IsPostgres(%q) = %v", tc.db, got)
		}
		if got := HidePassword(tc.db); got != tc.hidden {
			t.Errorf("HidePassword(%q) = %q, want %q", tc.db, got, tc.hidden)
		}
		if got, want := HasPassword(tc.db), tc.hidden != tc.db; got != want {
			t.Errorf("HasPassword(%q) = %v", tc.db, got)
		}
	}
}
