package dedupe

import (
	"context"
	"errors"
	"time"
)

// The small rules that the stores, the fallback, the backlog and the Deduper
// share, each written once.

// orDefault returns d if it is positive, and def otherwise: the rule that a
// TTL or lease of zero or less means the store's default.
func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// ambiguous reports whether a failed store call may have been carried out
// all the same (a lost reply, a deadline passed mid-call), and so whether a
// retry may cure it. Invalid keys, a full store and a closed store are
// refused before anything is written.
func ambiguous(err error) bool {
	return !errors.Is(err, ErrInvalidKey) && !errors.Is(err, ErrStoreFull) && !errors.Is(err, ErrClosed)
}

// isContextErr reports whether err is a context's cancellation or deadline.
func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// isOutage reports whether err from a store call means the store is failing,
// rather than the call being invalid or abandoned by its caller.
func isOutage(ctx context.Context, err error) bool {
	return ctx.Err() == nil && ambiguous(err) && !errors.Is(err, context.Canceled)
}
