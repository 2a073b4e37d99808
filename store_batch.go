package dedupe

import (
	"context"
	"fmt"
)

// The checks that the [BatchStore] methods of the memory and SQLite stores
// share, as their one-key peers share checkCall.

// checkBatch returns the error every item of a batch fails with before any
// is done: [ErrClosed] once closed is true, or the context's error.
func checkBatch(ctx context.Context, closed bool) error {
	if closed {
		return ErrClosed
	}
	return ctx.Err()
}

// checkResults returns the error every item of MarkEach fails with when
// results is neither nil nor one per key: [ErrInvalidKey].
func checkResults(backend string, keys []Key, results [][]byte) error {
	if results != nil && len(results) != len(keys) {
		return fmt.Errorf("dedupe: %s: mark: %d results for %d keys: %w", backend, len(results), len(keys), ErrInvalidKey)
	}
	return nil
}

// fillErrs sets every item of errs to err, and returns errs.
func fillErrs(errs []error, err error) []error {
	for i := range errs {
		errs[i] = err
	}
	return errs
}
