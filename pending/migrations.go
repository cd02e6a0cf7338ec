package pending

import (
	"context"
	"database/sql"
)

// The journal's schema, in one place, as numbered migrations run on open
// (PRAGMA user_version is the number applied). A person can read the journal
// with sqlite3: times are RFC 3339 UTC text with nanoseconds, JSON is text.
//
// The SQL is kept portable where it matters (SPEC §8): plain tables, no
// SQLite-only types; triggers and PRAGMAs are the SQLite driver's own part.

// applicationID marks a file as an mcp-confirm journal ("MCPC").
const applicationID = 0x4d435043

var migrations = []string{
	// 1: calls, attempts, decisions, events.
	`
CREATE TABLE calls (
	id            INTEGER PRIMARY KEY,
	server        TEXT    NOT NULL,               -- name the server declares (serverInfo.name)
	server_alias  TEXT    NOT NULL DEFAULT '',    -- config name, when one was used
	tool          TEXT    NOT NULL,
	kind          TEXT    NOT NULL CHECK (kind IN ('read', 'write')),
	kind_source   TEXT    NOT NULL CHECK (kind_source IN ('policy', 'annotation', 'default')),
	key           TEXT    NOT NULL,               -- idempotency key, fixed for the call's life
	args          TEXT    NOT NULL,               -- JSON object, redacted fields masked
	fingerprint   TEXT    NOT NULL,               -- of the unredacted arguments; from schema 4 keyed (h1:, pending/secret.go)
	state         TEXT    NOT NULL CHECK (state IN ('in_flight', 'succeeded', 'failed', 'unknown', 'applied', 'abandoned')),
	reason        TEXT    NOT NULL DEFAULT '',    -- why it is unknown / failed
	owner         TEXT    NOT NULL DEFAULT '',    -- process holding it in flight (see owners.go)
	conflict      INTEGER NOT NULL DEFAULT 0,     -- a late result contradicts the operator's decision
	conflict_note TEXT    NOT NULL DEFAULT '',
	proposal      TEXT    NOT NULL DEFAULT '',    -- proposed resolution from the automatic query
	created_at    TEXT    NOT NULL,
	updated_at    TEXT    NOT NULL,
	UNIQUE (server, tool, key)
);
-- "unknown, oldest first" and every per-state list.
CREATE INDEX calls_by_state ON calls (state, created_at, id);
-- the resend hold: same server, tool and arguments.
CREATE INDEX calls_by_fingerprint ON calls (server, tool, fingerprint);
-- list (newest first) and export --since.
CREATE INDEX calls_by_created ON calls (created_at, id);

-- A terminal state never changes, whatever code runs against the file.
CREATE TRIGGER calls_terminal_stays BEFORE UPDATE OF state ON calls
WHEN OLD.state IN ('succeeded', 'applied', 'abandoned') AND NEW.state <> OLD.state
BEGIN SELECT RAISE(ABORT, 'terminal state cannot change'); END;
CREATE TRIGGER calls_never_deleted BEFORE DELETE ON calls
BEGIN SELECT RAISE(ABORT, 'calls are never deleted'); END;

CREATE TABLE attempts (
	call_id  INTEGER NOT NULL REFERENCES calls (id),
	n        INTEGER NOT NULL,                    -- 1, 2, ... without gaps
	session  INTEGER NOT NULL,                    -- mcpclient session number
	owner    TEXT    NOT NULL,
	rpc_id   TEXT    NOT NULL DEFAULT '',         -- JSON-RPC id of the first wire request
	sent_at  TEXT    NOT NULL,
	ended_at TEXT,
	outcome  TEXT    NOT NULL DEFAULT 'pending' CHECK (outcome IN ('pending', 'succeeded', 'failed', 'unknown')),
	reason   TEXT    NOT NULL DEFAULT '',
	clock    TEXT    NOT NULL DEFAULT '',         -- 'idle' or 'absolute' when a deadline fired
	result   TEXT,                                -- CallToolResult as MCP JSON
	error    TEXT,                                -- JSON-RPC error as JSON
	late     INTEGER NOT NULL DEFAULT 0,          -- the answer came after the attempt ended unknown
	PRIMARY KEY (call_id, n)
);

CREATE TABLE decisions (
	id       INTEGER PRIMARY KEY,
	call_id  INTEGER NOT NULL REFERENCES calls (id),
	action   TEXT    NOT NULL CHECK (action IN ('query', 'retry', 'abandon', 'mark', 'note')),
	operator TEXT    NOT NULL,
	at       TEXT    NOT NULL,
	note     TEXT    NOT NULL DEFAULT '',
	evidence TEXT,                                -- query result, late result, override notes
	attempt  INTEGER                              -- the attempt a retry started
);
CREATE INDEX decisions_by_call ON decisions (call_id, id);
CREATE TRIGGER decisions_append_only BEFORE UPDATE ON decisions
BEGIN SELECT RAISE(ABORT, 'decisions are append-only'); END;
CREATE TRIGGER decisions_never_deleted BEFORE DELETE ON decisions
BEGIN SELECT RAISE(ABORT, 'decisions are append-only'); END;

CREATE TABLE events (
	id      INTEGER PRIMARY KEY,
	at      TEXT    NOT NULL,
	kind    TEXT    NOT NULL,                     -- dedupe_hit, session_started, recovery, late_result, conflict (types.go has all)
	call_id INTEGER,
	detail  TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX events_by_kind ON events (kind);

-- Per-state counts kept by triggers, so the console's tabs cost O(1) on a
-- journal of millions of calls.
CREATE TABLE state_counts (state TEXT PRIMARY KEY, n INTEGER NOT NULL);
INSERT INTO state_counts (state, n) VALUES
	('in_flight', 0), ('succeeded', 0), ('failed', 0), ('unknown', 0), ('applied', 0), ('abandoned', 0);
CREATE TRIGGER state_counts_insert AFTER INSERT ON calls
BEGIN UPDATE state_counts SET n = n + 1 WHERE state = NEW.state; END;
CREATE TRIGGER state_counts_update AFTER UPDATE OF state ON calls WHEN NEW.state <> OLD.state
BEGIN
	UPDATE state_counts SET n = n - 1 WHERE state = OLD.state;
	UPDATE state_counts SET n = n + 1 WHERE state = NEW.state;
END;
`,
	// 2: the resend hold looks only at open calls. Through the full index it
	// read every settled call with the same arguments (20,000 identical
	// settled calls made an intent 8× slower); the partial index holds open
	// calls only. Its WHERE is written exactly as the hold's query says it.
	`
DROP INDEX calls_by_fingerprint;
CREATE INDEX calls_open_by_fingerprint ON calls (server, tool, fingerprint) WHERE state IN ('in_flight', 'unknown');
`,
	// 3: a call knows the server it was made on; a call settled by a late
	// answer after its caller was told "unknown" keeps holding identical
	// calls until an operator acknowledges it (SPEC §9). SQLite cannot
	// change a CHECK constraint, so decisions is rebuilt to allow 'ack'.
	`
ALTER TABLE calls ADD COLUMN server_identity TEXT NOT NULL DEFAULT '';  -- how the server was reached (JSON, see guard.ServerIdentity)
ALTER TABLE calls ADD COLUMN late_settled_at TEXT NOT NULL DEFAULT '';  -- when a late answer settled the call after it was reported unknown
ALTER TABLE calls ADD COLUMN acked_at        TEXT NOT NULL DEFAULT '';  -- when an operator acknowledged that late settle
-- the late-settle hold: same server, tool and arguments, settled late, not acknowledged.
CREATE INDEX calls_late_by_fingerprint ON calls (server, tool, fingerprint) WHERE late_settled_at <> '' AND acked_at = '';

DROP TRIGGER decisions_append_only;
DROP TRIGGER decisions_never_deleted;
DROP INDEX decisions_by_call;
CREATE TABLE decisions_v3 (
	id       INTEGER PRIMARY KEY,
	call_id  INTEGER NOT NULL REFERENCES calls (id),
	action   TEXT    NOT NULL CHECK (action IN ('query', 'retry', 'abandon', 'mark', 'note', 'ack')),
	operator TEXT    NOT NULL,
	at       TEXT    NOT NULL,
	note     TEXT    NOT NULL DEFAULT '',
	evidence TEXT,                                -- query result, late result, override notes
	attempt  INTEGER                              -- the attempt a retry started
);
INSERT INTO decisions_v3 (id, call_id, action, operator, at, note, evidence, attempt)
	SELECT id, call_id, action, operator, at, note, evidence, attempt FROM decisions;
DROP TABLE decisions;
ALTER TABLE decisions_v3 RENAME TO decisions;
CREATE INDEX decisions_by_call ON decisions (call_id, id);
CREATE TRIGGER decisions_append_only BEFORE UPDATE ON decisions
BEGIN SELECT RAISE(ABORT, 'decisions are append-only'); END;
CREATE TRIGGER decisions_never_deleted BEFORE DELETE ON decisions
BEGIN SELECT RAISE(ABORT, 'decisions are append-only'); END;
`,
	// 4: the fingerprint is keyed (pending/secret.go). meta holds the check
	// value of the journal's secret; the first writing open after this
	// migration seals the fingerprints stored before it. A call keeps the
	// seals of the values redaction took out of its arguments, so that any
	// process can mask them in what the server says later.
	`
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
ALTER TABLE calls ADD COLUMN redacted_seals TEXT NOT NULL DEFAULT '';  -- space-separated seals (Journal.SealValue) of the redacted values
`,
	// 5: the decision log as evidence (chain.go says why and documents the
	// hash's encoding exactly). Each decision carries the hash of the one
	// before it and its own; meta keeps the head. The append-only trigger
	// is dropped here so that migrationCode[5] can fill in the chain over
	// the decisions already there, and is made again right after it, in
	// the same transaction.
	`
ALTER TABLE decisions ADD COLUMN prev_hash TEXT NOT NULL DEFAULT '';  -- hash of the decision before it (id order); 64 zeros for the first
ALTER TABLE decisions ADD COLUMN hash      TEXT NOT NULL DEFAULT '';  -- SHA-256 of this row's canonical encoding, prev_hash included
DROP TRIGGER decisions_append_only;
`,
	// 6: a decision records the machine it was made on, so that a team's
	// journal says who decided what, and where (chain.go hashes it).
	`
ALTER TABLE decisions ADD COLUMN host TEXT NOT NULL DEFAULT '';  -- os.Hostname of the deciding process; '' before migration 6
`,
	// 7: compensation (issue 21). A call may be made to undo another (the
	// policy's cancel_tool, mcp-confirm compensate): calls.compensates
	// links it to the call it undoes, and the operator's decision to
	// compensate is a sixth action. SQLite cannot change a CHECK, so
	// decisions is rebuilt, every column and row as they are (the chain's
	// hashes do not cover the table's shape, only its rows).
	`
ALTER TABLE calls ADD COLUMN compensates INTEGER REFERENCES calls (id);  -- the call this one was made to undo, if any
CREATE INDEX calls_compensating ON calls (compensates) WHERE compensates IS NOT NULL;

DROP TRIGGER decisions_append_only;
DROP TRIGGER decisions_never_deleted;
DROP INDEX decisions_by_call;
CREATE TABLE decisions_v7 (
	id        INTEGER PRIMARY KEY,
	call_id   INTEGER NOT NULL REFERENCES calls (id),
	action    TEXT    NOT NULL CHECK (action IN ('query', 'retry', 'abandon', 'mark', 'note', 'ack', 'compensate')),
	operator  TEXT    NOT NULL,
	at        TEXT    NOT NULL,
	note      TEXT    NOT NULL DEFAULT '',
	evidence  TEXT,                                -- query result, late result, override notes
	attempt   INTEGER,                             -- the attempt a retry started
	prev_hash TEXT    NOT NULL DEFAULT '',         -- hash of the decision before it (id order); 64 zeros for the first
	hash      TEXT    NOT NULL DEFAULT '',         -- SHA-256 of this row's canonical encoding, prev_hash included
	host      TEXT    NOT NULL DEFAULT ''          -- os.Hostname of the deciding process; '' before migration 6
);
INSERT INTO decisions_v7 (id, call_id, action, operator, at, note, evidence, attempt, prev_hash, hash, host)
	SELECT id, call_id, action, operator, at, note, evidence, attempt, prev_hash, hash, host FROM decisions;
DROP TABLE decisions;
ALTER TABLE decisions_v7 RENAME TO decisions;
CREATE INDEX decisions_by_call ON decisions (call_id, id);
CREATE TRIGGER decisions_append_only BEFORE UPDATE ON decisions
BEGIN SELECT RAISE(ABORT, 'decisions are append-only'); END;
CREATE TRIGGER decisions_never_deleted BEFORE DELETE ON decisions
BEGIN SELECT RAISE(ABORT, 'decisions are append-only'); END;
`,
	// 8: each call's own chain (callchain.go documents it): a link per
	// intent, attempt's end and state-moving decision, so that verify sees
	// a call's state, arguments or outcome rewritten by hand. Calls
	// recorded before this migration have no intent link; meta says from
	// which id on every call has one.
	`
CREATE TABLE links (
	call_id   INTEGER NOT NULL,                   -- no REFERENCES: a link outlives a call deleted by hand, and verify names it
	seq       INTEGER NOT NULL,                   -- 1, 2, ... per call
	kind      TEXT    NOT NULL,                   -- intent, outcome, lost, resend, late, decision, copied
	n         INTEGER NOT NULL,                   -- the attempt it ends (or a retry starts); 0 for none
	event     TEXT    NOT NULL,                   -- the state machine's event (state.go); '' for none
	state     TEXT    NOT NULL,                   -- the call's state after it
	content   TEXT    NOT NULL,                   -- SHA-256 of what it covers
	call_key  TEXT    NOT NULL DEFAULT '',        -- on an intent link: the call's key, to name it if the call is deleted
	prev_hash TEXT    NOT NULL,                   -- hash of the call's link before it; 64 zeros for the first
	hash      TEXT    NOT NULL,
	PRIMARY KEY (call_id, seq)
);
CREATE TRIGGER links_append_only BEFORE UPDATE ON links
BEGIN SELECT RAISE(ABORT, 'links are append-only'); END;
CREATE TRIGGER links_never_deleted BEFORE DELETE ON links
BEGIN SELECT RAISE(ABORT, 'links are append-only'); END;
INSERT INTO meta (name, value) SELECT 'call_chain_from', coalesce(max(id), 0) + 1 FROM calls;
`,
}

// migrationCode is the Go part of a migration (by number), run after its
// SQL in the same transaction, then its SQL of then.
var migrationCode = map[int]struct {
	run  func(ctx context.Context, c *sql.Conn) error
	then string
}{
	5: {run: chainExistingDecisions, then: `
CREATE TRIGGER decisions_append_only BEFORE UPDATE ON decisions
BEGIN SELECT RAISE(ABORT, 'decisions are append-only'); END;
`},
}
