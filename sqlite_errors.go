package dedupe

import (
	"errors"
	"fmt"
	"time"

	"modernc.org/sqlite"
)

// SQLite result codes (https://www.sqlite.org/rescode.html), primary part.
const (
	sqliteBusy     = 5
	sqliteLocked   = 6
	sqliteReadonly = 8
	sqliteIOErr    = 10
	sqliteCorrupt  = 11
	sqliteFull     = 13
	sqliteCantOpen = 14
	sqliteNotADB   = 26
)

// sqliteCode returns the primary SQLite result code of err, or 0 if err is
// not an error of the driver.
func sqliteCode(err error) int {
	var e *sqlite.Error
	if errors.As(err, &e) {
		return e.Code() & 0xff
	}
	return 0
}

// sqliteHint explains the common SQLite failures in words, or returns "".
// busy is the store's busy timeout.
func sqliteHint(err error, busy time.Duration) string {
	switch sqliteCode(err) {
	case sqliteBusy, sqliteLocked:
		return fmt.Sprintf("database is locked by another connection for longer than the busy timeout (%v)", busy)
	case sqliteReadonly:
		return "database is read-only (check the permissions of the file and its directory)"
	case sqliteCantOpen:
		return "cannot open the database file or its journal (check that the directory exists and is writable)"
	case sqliteNotADB:
		return "file is not a SQLite database"
	case sqliteCorrupt:
		return "database file is corrupt"
	case sqliteFull:
		return "disk is full"
	case sqliteIOErr:
		return "I/O error"
	}
	return ""
}

// sqliteFail wraps err, the failure of op on subject (a key, a path, a table;
// "" for none), as "dedupe: sqlite: <op> <subject>: <hint>: <err>", with the
// hint of [sqliteHint] when there is one.
func sqliteFail(op, subject string, err error, busy time.Duration) error {
	prefix := "dedupe: sqlite: " + op
	if subject != "" {
		prefix += " " + subject
	}
	if hint := sqliteHint(err, busy); hint != "" {
		return fmt.Errorf("%s: %s: %w", prefix, hint, err)
	}
	return fmt.Errorf("%s: %w", prefix, err)
}

// fail is [sqliteFail] with the store's busy timeout.
func (s *SQLiteStore) fail(op, subject string, err error) error {
	return sqliteFail(op, subject, err, s.busy)
}
