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

func sqliteCode(err error) int {
	var e *sqlite.Error
	if errors.As(err, &e) {
		return e.Code() & 0xff
	}
	return 0
}

// sqliteError wraps err, from a step of the store, with an explanation of the
// common failures.
func sqliteError(what string, err error, busy time.Duration) error {
	if err == nil {
		return nil
	}
	var hint string
	switch sqliteCode(err) {
	case sqliteBusy, sqliteLocked:
		hint = fmt.Sprintf("database is locked by another connection for longer than the busy timeout (%v)", busy)
	case sqliteReadonly:
		hint = "database is read-only (check the permissions of the file and its directory)"
	case sqliteCantOpen:
		hint = "cannot open the database file or its journal (check that the directory exists and is writable)"
	case sqliteNotADB:
		hint = "file is not a SQLite database"
	case sqliteCorrupt:
		hint = "database file is corrupt"
	case sqliteFull:
		hint = "disk is full"
	case sqliteIOErr:
		hint = "I/O error"
	}
	if hint != "" {
		return fmt.Errorf("dedupe: sqlite: %s: %s: %w", what, hint, err)
	}
	return fmt.Errorf("dedupe: sqlite: %s: %w", what, err)
}
