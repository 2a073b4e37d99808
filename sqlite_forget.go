package dedupe

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Forget drops key's mark and its result unless a live claim holds key; see
// [Forgetter]. It is one write of the store's writer, in a savepoint: the
// claim is read, and the mark deleted, in the writer's transaction, which
// holds the file's write lock, so no Claim of this process or another can
// come between. A mark written by NekoBot is forgotten as one written by the
// store.
func (s *SQLiteStore) Forget(ctx context.Context, key Key) (bool, error) {
	if err := checkCall(ctx, s.closed.Load(), key); err != nil {
		return false, err
	}
	dkey := key.String()
	var forgotten, held bool
	err := s.submit(ctx, "forget", dkey, func(ctx context.Context, now time.Time) error {
		return s.inSavepoint(ctx, func() (err error) {
			forgotten, held, err = s.forgetRow(ctx, dkey, now)
			return err
		})
	})
	switch {
	case err != nil:
		return false, err
	case held:
		return false, fmt.Errorf("dedupe: sqlite: forget %s: %w", key, ErrInFlight)
	}
	return forgotten, nil
}

// forgetRow is the write of Forget of dkey, in the writer's transaction:
// held reports a live claim, which it leaves alone; otherwise it deletes
// the key's mark, result and expired claim, and forgotten reports whether
// the mark was live.
func (s *SQLiteStore) forgetRow(ctx context.Context, dkey string, now time.Time) (forgotten, held bool, err error) {
	var one int
	err = s.stmt.claimLive.QueryRowContext(ctx, dkey, now.UnixNano()).Scan(&one)
	switch {
	case err == nil:
		return false, true, nil
	case !errors.Is(err, sql.ErrNoRows):
		return false, false, err
	}
	if forgotten, err = s.marked(ctx, dkey, now); err != nil {
		return false, false, err
	}
	for _, st := range []*sql.Stmt{s.stmt.markDelete, s.stmt.resultDelete, s.stmt.claimDelete} {
		if _, err := st.ExecContext(ctx, dkey); err != nil {
			return false, false, err
		}
	}
	return forgotten, false, nil
}
