package pending

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// One-trip writes on PostgreSQL (issue 22). A guarded write is an intent,
// then, after the send, its outcome. Each was two round trips: one to read
// what the write decides on (the intent's checks, the attempt's state),
// one for its changes and COMMIT. Each round trip costs about as much as a
// bare insert's flush on this machine kind, so the write cost four bare
// inserts' worth.
//
// The common case is decided by the server in one statement instead, sent
// with BEGIN and COMMIT in one pipeline: the intent's call is inserted only
// where checkIntent's own query finds nothing and this process's owner
// lock is held; the outcome's updates apply only to the open attempt of an
// in-flight call. When the statement changes nothing, its empty
// transaction commits and the two-trip write runs as before: it reads
// again, under the same locks, and its Go code (checkIntent, Transition)
// says what is refused and why. So the rules stay in one place; the
// statement only knows when none of them can apply.

// recordIntentAtOnce commits in's call and first attempt in one round
// trip, and returns the call's id: 0 (and nothing recorded) when a check of
// checkIntent's finds a row, or the owner lock is not held by the
// connection this process holds it on. row is the call's values in
// intentColumns' order, less state.
//
// The call's intent link (callchain.go) is a third insert of the same
// statement: its content is known here, its hash computed by the server.
func (p *pgBackend) recordIntentAtOnce(ctx context.Context, j *Journal, in Intent, row []any, content string, now time.Time) (id int64, err error) {
	if p.owner == nil { // read-only: the two-trip write says so
		return 0, nil
	}
	checks, checkArgs := intentChecks(in, now)
	link, linkArgs := j.linkInsert("SELECT id, state FROM c", linkIntent, 0, "", content, in.Key)
	query := `WITH c AS (INSERT INTO calls (` + intentColumns + `)
			SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'in_flight', ?, ?, ?, ?::bigint
			WHERE NOT EXISTS (` + checks + `) AND EXISTS (` + pgOwnerHeld + `)
			RETURNING id, state),
		a AS (INSERT INTO attempts (call_id, n, session, owner, sent_at) SELECT id, 1, ?, ?, ? FROM c),
		l AS (` + link + `)
		SELECT coalesce((SELECT id FROM c), 0)`
	args := slices.Concat(row, checkArgs,
		[]any{p.owner.heldBy.Load(), pgOwnerKey(p.owner.id), in.Session, p.owner.id, formatTime(now)}, linkArgs)
	// durableSelfChecked: the statement checks the owner lock itself, so
	// the transaction waits on no check beside it.
	err = j.write(ctx, durableSelfChecked, func(ctx context.Context, c *sql.Conn) error {
		if err := j.lockIntents(ctx, c, in.Server, in.Tool); err != nil {
			return err
		}
		return j.queryRowAtCommit(ctx, c, []any{&id}, query, args...)
	})
	return id, err
}

// recordOutcomeAtOnce ends attempt n of an in-flight call, whose open
// attempt it is, and moves the call to `to`, in one round trip; done is
// false (and nothing changed) when the call or the attempt is anything
// else. It locks the call's row as attemptState does.
func (p *pgBackend) recordOutcomeAtOnce(ctx context.Context, j *Journal, callID int64, n int, outcome AttemptOutcome, to State, o Outcome, ts string) (done bool, err error) {
	var moved int64
	// The attempt's link (callchain.go) goes in the same statement.
	link, linkArgs := j.linkInsert("SELECT id, state FROM u", linkOutcome, int64(n), o.Event, outcomeContent(n, outcome, o, ts), "")
	query := `WITH c AS (SELECT id FROM calls WHERE id = ? AND state = 'in_flight' FOR UPDATE),
		a AS (UPDATE attempts SET ` + attemptEnd + `
			WHERE call_id = (SELECT id FROM c) AND n = ? AND outcome = 'pending'
			AND n = (SELECT max(n) FROM attempts WHERE call_id = ?) RETURNING call_id),
		u AS (UPDATE calls SET state = ?, reason = ?, updated_at = ? WHERE id = (SELECT call_id FROM a) RETURNING id, state),
		l AS (` + link + `)
		SELECT count(*) FROM u`
	args := slices.Concat([]any{callID}, attemptEndArgs(outcome, o, ts), []any{n, callID, to, o.Reason, ts}, linkArgs)
	err = j.write(ctx, lazy, func(ctx context.Context, c *sql.Conn) error {
		return j.queryRowAtCommit(ctx, c, []any{&moved}, query, args...)
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "links_pkey" {
		// The statement's snapshot missed a link another write added to
		// the call while this one waited for its row (a late answer of an
		// earlier attempt): nothing was written; the two-trip write reads
		// again under the lock.
		return false, nil
	}
	return moved == 1, err
}
