package pending

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The fingerprint secret (SPEC §9 "Secrets"). A call's fingerprint names
// its business operation so that the resend hold and key-reuse checks can
// find an identical call; made of the unredacted arguments, an unkeyed hash
// would let anyone holding the journal guess a redacted CVV by trying all
// thousand. So the journal never stores the fingerprint its caller made:
// it stores Seal(fp), an HMAC-SHA-256 under a random secret kept in a file
// beside the journal (journal.secret, 0600), outside the journal's own
// file, its WAL and every export. Every process that opens the journal for
// writing uses the same secret, so the hold still works across processes.
//
// The journal records a check value of its secret (meta.secret_check): a
// journal whose secret file went missing or was replaced is refused,
// rather than silently starting a new secret under which no earlier call
// would ever hold a resend back.

var (
	// ErrSecretMissing: the journal was sealed with a secret whose file is gone.
	ErrSecretMissing = errors.New("the journal's fingerprint secret is missing")
	// ErrSecretMismatch: the secret file is not the one the journal was sealed with.
	ErrSecretMismatch = errors.New("the journal's fingerprint secret does not match the journal")
)

// sealPrefix marks a sealed fingerprint; what it seals keeps its own form
// ("c1:…" or the legacy bare hex), so two forms never seal to one value.
const sealPrefix = "h1:"

const secretCheckInput = "mcp-confirm fingerprint secret check v1"

// Seal is the fingerprint as the journal stores and compares it: keyed by
// this journal's secret. RecordIntent seals the intent's fingerprints
// itself; callers comparing a stored fingerprint (a key reuse, a retry's
// rebuilt arguments) seal theirs with this. A read-only journal has no
// secret and returns fp unchanged.
func (j *Journal) Seal(fp string) string {
	if j.secret == nil || fp == "" || strings.HasPrefix(fp, sealPrefix) {
		return fp
	}
	return seal(j.secret, fp)
}

// valueDomain keeps a redacted value's seal apart from any fingerprint's.
const valueDomain = "redacted value\x00"

// sealValues seals each distinct value (none without a secret).
func (j *Journal) sealValues(values []string) []string {
	if j.secret == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, v := range values {
		if s := seal(j.secret, valueDomain+v); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// RedactedValue returns a test of whether a text was one of the values
// redaction took out of c's arguments, by their seals: any process with
// the journal's secret can mask them in what a server says later (a query
// that echoes the order), though none of them is stored. Nil when c has
// none, or the journal was opened read-only (no secret).
func (j *Journal) RedactedValue(c Call) func(string) bool {
	if j.secret == nil || len(c.RedactedSeals) == 0 {
		return nil
	}
	set := make(map[string]bool, len(c.RedactedSeals))
	for _, s := range c.RedactedSeals {
		set[s] = true
	}
	return func(v string) bool { return set[seal(j.secret, valueDomain+v)] }
}

func seal(secret []byte, fp string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(fp))
	return sealPrefix + hex.EncodeToString(m.Sum(nil))
}

// bindSecret loads the journal's secret (creating it for a journal that has
// none) and, the first time, seals every fingerprint stored before there
// was one. Run by a writing Open after migrate.
func (j *Journal) bindSecret(ctx context.Context) error {
	path := secretPath(j.path)
	check, err := j.secretCheck(ctx, j.wconn)
	if err != nil {
		return err
	}
	if check != "" {
		secret, err := readSecret(path)
		if errors.Is(err, fs.ErrNotExist) {
			return &typedError{kind: ErrSecretMissing, msg: fmt.Sprintf(
				"the journal's fingerprint secret %s is missing: without it no new call can be matched with the calls already recorded", path)}
		}
		if err != nil {
			return err
		}
		return j.useSecret(secret, check)
	}
	secret, err := loadOrCreateSecret(path)
	if err != nil {
		return err
	}
	return j.sealJournal(ctx, secret)
}

// useSecret accepts secret if it is the one check was made with.
func (j *Journal) useSecret(secret []byte, check string) error {
	if !hmac.Equal([]byte(seal(secret, secretCheckInput)), []byte(check)) {
		where := pgSecretWhere
		if j.pg == nil {
			where = secretPath(j.path)
		}
		return &typedError{kind: ErrSecretMismatch, msg: fmt.Sprintf(
			"the journal's fingerprint secret %s is not the one the journal was sealed with (replaced or restored from another journal)",
			where)}
	}
	j.secret = secret
	return nil
}

func (j *Journal) secretCheck(ctx context.Context, c *sql.Conn) (string, error) {
	var v string
	err := c.QueryRowContext(ctx, "SELECT value FROM meta WHERE name = 'secret_check'").Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

// sealJournal records secret's check and seals the stored fingerprints,
// in one immediate transaction; another process that got there first has
// used the same file (loadOrCreateSecret never replaces one), which is
// checked.
func (j *Journal) sealJournal(ctx context.Context, secret []byte) error {
	c := j.wconn
	if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("seal fingerprints: %w", err)
	}
	err := func() error {
		check, err := j.secretCheck(ctx, c)
		if err != nil || check != "" {
			if err == nil {
				err = j.useSecret(secret, check)
			}
			return err
		}
		rows, err := c.QueryContext(ctx, "SELECT id, fingerprint FROM calls WHERE fingerprint NOT LIKE 'h1:%'")
		if err != nil {
			return err
		}
		old := map[int64]string{}
		for rows.Next() {
			var id int64
			var fp string
			if err := rows.Scan(&id, &fp); err != nil {
				rows.Close()
				return err
			}
			old[id] = fp
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		for id, fp := range old {
			if _, err := c.ExecContext(ctx, "UPDATE calls SET fingerprint = ? WHERE id = ?", seal(secret, fp), id); err != nil {
				return err
			}
		}
		_, err = c.ExecContext(ctx, "INSERT INTO meta (name, value) VALUES ('secret_check', ?)", seal(secret, secretCheckInput))
		return err
	}()
	if err != nil {
		j.rollback()
		return err
	}
	if _, err := c.ExecContext(ctx, "COMMIT"); err != nil {
		j.rollback()
		return err
	}
	if j.secret == nil {
		j.secret = secret
	}
	return nil
}

// loadOrCreateSecret reads the secret file, or creates it without a window
// in which another process could see it half-written or make a second
// one: the bytes go to a private temporary file, synced, then linked to
// the final name, which fails if the name exists (then that one is read).
func loadOrCreateSecret(path string) ([]byte, error) {
	if s, err := readSecret(path); !errors.Is(err, fs.ErrNotExist) {
		return s, err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".new-*")
	if err != nil {
		return nil, fmt.Errorf("create the fingerprint secret: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(hex.EncodeToString(secret) + "\n")
	if err == nil {
		err = tmp.Sync() // CreateTemp made it 0600
	}
	if err = errors.Join(err, tmp.Close()); err != nil {
		return nil, fmt.Errorf("write the fingerprint secret: %w", err)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		return readSecret(path)
	} else if err != nil {
		return nil, fmt.Errorf("create the fingerprint secret %s: %w", path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	return secret, nil
}

// readSecret reads a secret file, refusing one that another user owns or
// can read (checked on the open file, not only by name before it).
func readSecret(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && (int(sys.Uid) != os.Geteuid() || st.Mode().Perm()&0o077 != 0) {
		return nil, &typedError{kind: ErrNotOwned, msg: fmt.Sprintf(
			"the fingerprint secret %s belongs to another user or is open to others (mode %04o); remove it only if the journal is new",
			path, uint32(st.Mode().Perm()))}
	}
	buf := make([]byte, 200)
	n, _ := f.Read(buf)
	secret, err := hex.DecodeString(strings.TrimSpace(string(buf[:n])))
	if err != nil || len(secret) != 32 {
		return nil, fmt.Errorf("the fingerprint secret %s is damaged (not 64 hex digits); restore it from a backup", path)
	}
	return secret, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
