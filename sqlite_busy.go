package dedupe

import (
	"context"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe/internal/wait"
)

// sqliteBusySlice is how long SQLite's own busy handler waits in one try of
// [SQLiteStore.retryBusy]: short, so that the store's loop, not SQLite, decides
// when to give up.
const sqliteBusySlice = 100 * time.Millisecond

// isSQLiteBusy reports whether err means that another connection holds a lock
// the statement needs.
func isSQLiteBusy(err error) bool {
	switch sqliteCode(err) {
	case sqliteBusy, sqliteLocked:
		return true
	case 0:
		msg := err.Error()
		return strings.Contains(msg, "database is locked") || strings.Contains(msg, "database table is locked")
	}
	return false
}

// retryBusy calls try until it returns nil or an error other than a busy
// database, the store's busy timeout has passed since the first try, ctx is
// done, or stop (if not nil) reports that nobody waits for the result any
// more. It returns try's last error, or ctx's. Between tries it sleeps 1 ms
// more each time, up to 10 ms; within each try SQLite's busy handler has
// already waited up to [sqliteBusySlice].
//
// Every read and write of the store that may find the database busy goes
// through retryBusy.
func (s *SQLiteStore) retryBusy(ctx context.Context, stop func() bool, try func() error) error {
	deadline := time.Now().Add(s.busy)
	for attempt := 1; ; attempt++ {
		err := try()
		if err == nil || !isSQLiteBusy(err) || !time.Now().Before(deadline) || stop != nil && stop() {
			return err
		}
		if err := wait.Sleep(ctx, time.Duration(min(attempt, 10))*time.Millisecond); err != nil {
			return err
		}
	}
}
