package dedupe

import (
	"context"
	"database/sql"
	"fmt"
)

// sqliteStatements are the prepared statements of a store: exists on the
// database, for any number of readers; the others on the writer's connection.
type sqliteStatements struct {
	exists, resultGet                            *sql.Stmt
	resultUpsert, resultDelete, cleanResults     *sql.Stmt
	begin, commit, rollback                      *sql.Stmt
	savepoint, release, rollbackTo               *sql.Stmt
	markGet, markUpsert, claimDelete             *sql.Stmt
	claimTake, claimExtend, claimDrop            *sql.Stmt
	cleanClaims, cleanMarks, cleanScan, cleanRow *sql.Stmt
	claimLive, markDelete                        *sql.Stmt
}

// sqliteStatement is an entry of the statement table: where the prepared
// statement is kept and its SQL text.
type sqliteStatement struct {
	stmt **sql.Stmt
	sql  string
}

// statements returns the statement table of s, which prepare and
// closeConn both walk.
func (s *SQLiteStore) statements() []sqliteStatement {
	st := &s.stmt
	return []sqliteStatement{
		{&st.exists, "SELECT expires_at FROM " + s.marks + " WHERE dedupe_key = ?"},
		// A result belongs to the mark it was written with: same expiry text.
		{&st.resultGet, "SELECT m.expires_at, r.result FROM " + s.marks + " m LEFT JOIN " + s.results +
			" r ON r.dedupe_key = m.dedupe_key AND r.expires_at = m.expires_at WHERE m.dedupe_key = ?"},
		{&st.resultUpsert, "INSERT INTO " + s.results + " (dedupe_key, result, expires_at) VALUES (?1, ?2, ?3) " +
			"ON CONFLICT(dedupe_key) DO UPDATE SET result = excluded.result, expires_at = excluded.expires_at"},
		{&st.resultDelete, "DELETE FROM " + s.results + " WHERE dedupe_key = ?"},
		{&st.cleanResults, "DELETE FROM " + s.results + " WHERE dedupe_key IN (SELECT dedupe_key FROM " + s.results +
			" WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2)"},
		{&st.begin, "BEGIN IMMEDIATE"},
		{&st.commit, "COMMIT"},
		{&st.rollback, "ROLLBACK"},
		{&st.savepoint, "SAVEPOINT dedupe_op"},
		{&st.release, "RELEASE dedupe_op"},
		{&st.rollbackTo, "ROLLBACK TO dedupe_op"},
		{&st.markGet, s.markGetSQL()},
		{&st.markUpsert, s.markUpsertSQL()},
		{&st.claimDelete, "DELETE FROM " + s.claims + " WHERE dedupe_key = ?"},
		// Takes the key unless an unexpired claim with another token holds it:
		// one row changed means Claimed.
		{&st.claimTake, "INSERT INTO " + s.claims + " (dedupe_key, token, expires_at) VALUES (?1, ?2, ?3) " +
			"ON CONFLICT(dedupe_key) DO UPDATE SET token = excluded.token, expires_at = excluded.expires_at WHERE expires_at <= ?4 OR token = ?2"},
		{&st.claimExtend, "UPDATE " + s.claims + " SET expires_at = ?1 WHERE dedupe_key = ?2 AND token = ?3 AND expires_at > ?4"},
		{&st.claimDrop, "DELETE FROM " + s.claims + " WHERE dedupe_key = ?1 AND token = ?2 AND expires_at > ?3"},
		{&st.cleanClaims, "DELETE FROM " + s.claims + " WHERE dedupe_key IN (SELECT dedupe_key FROM " + s.claims + " WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2)"},
		// Marks in the store's own format, whose text sorts as their time.
		{&st.cleanMarks, "DELETE FROM " + s.marks + " WHERE rowid IN (SELECT rowid FROM " + s.marks +
			" WHERE expires_at <= ?1 AND " + sqliteOwnFormat + " ORDER BY expires_at LIMIT ?2)"},
		// Marks in any other format, parsed one by one.
		{&st.cleanScan, "SELECT rowid, expires_at FROM " + s.marks + " WHERE expires_at <= ?1 AND (expires_at, rowid) > (?2, ?3) AND NOT " +
			sqliteOwnFormat + " ORDER BY expires_at, rowid LIMIT ?4"},
		{&st.cleanRow, "DELETE FROM " + s.marks + " WHERE rowid = ?"},
		{&st.claimLive, "SELECT 1 FROM " + s.claims + " WHERE dedupe_key = ?1 AND expires_at > ?2"},
		{&st.markDelete, "DELETE FROM " + s.marks + " WHERE dedupe_key = ?"},
	}
}

// markGetSQL reads a key's mark.
func (s *SQLiteStore) markGetSQL() string {
	return "SELECT expires_at FROM " + s.marks + " WHERE dedupe_key = ?"
}

// markUpsertSQL writes a key's mark: key, channel, message id, created and
// expiry times.
func (s *SQLiteStore) markUpsertSQL() string {
	return "INSERT INTO " + s.marks + " (dedupe_key, channel_id, message_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?) " +
		"ON CONFLICT(dedupe_key) DO UPDATE SET expires_at = excluded.expires_at"
}

// prepare prepares every statement of the table, once the tables exist.
func (s *SQLiteStore) prepare(ctx context.Context) error {
	for _, p := range s.statements() {
		var on interface {
			PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
		} = s.conn
		if p.stmt == &s.stmt.exists || p.stmt == &s.stmt.resultGet {
			on = s.db
		}
		if err := s.retryBusy(ctx, nil, func() (err error) {
			*p.stmt, err = on.PrepareContext(ctx, p.sql)
			return err
		}); err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
	}
	return nil
}

// closeConn closes the prepared statements and releases the writer's
// connection, giving a caller's connection back with the pragmas it had.
func (s *SQLiteStore) closeConn() {
	for _, p := range s.statements() {
		if *p.stmt != nil {
			_ = (*p.stmt).Close()
		}
	}
	for _, q := range s.restore {
		_, _ = s.conn.ExecContext(context.Background(), q)
	}
	_ = s.conn.Close()
}
