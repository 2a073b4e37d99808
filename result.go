package dedupe

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// MaxResultSize is the longest result, in bytes, that a [ResultStore] keeps
// with a mark: 64 KiB, room for a chat reply or a webhook's answer.
const MaxResultSize = 64 << 10

// ResultStore is a [Store] that keeps a small result with a mark, so that
// [Deduper.DoResult] hands the first run's result to its copies. Every store
// of this module and its nested modules is one. A result expires with its
// mark; a store may keep it for less (the memory store bounds the bytes it
// holds), after which Result reports the key marked without one.
type ResultStore interface {
	Store

	// MarkResult is Mark, also keeping result with the mark; an empty result
	// is kept as none. A result longer than [MaxResultSize] is refused with
	// [ErrTooLarge] and nothing is written. A later Mark of key drops the
	// result with the old mark.
	MarkResult(ctx context.Context, key Key, result []byte, ttl time.Duration) error

	// Result returns the result kept with key's mark. marked is false if key
	// is not marked (a claim is not a mark); result is nil if it is marked
	// without one. The caller may keep result: it is not the store's.
	Result(ctx context.Context, key Key) (result []byte, marked bool, err error)
}

// DoResult is [Deduper.Do] for a function with a result, which is kept with
// the key's mark when the store is a [ResultStore] (every store of this module
// is) and given to every copy, with [ErrDuplicate]: to copies that arrive
// later and to copies that waited for the first run ([WithWait]). So a
// platform that shows a handler's answer, or a client that retries a request,
// gets the first run's answer again without running fn twice.
//
// A copy's result is nil if the first run's result was empty, longer than
// [MaxResultSize] (the key is marked without it and a warning logged; fn is
// not run again), gone from the store before its mark, or unreadable (a store
// error, logged). When fn runs, DoResult returns what fn returned, with Do's
// error.
func (d *Deduper) DoResult(ctx context.Context, key Key, fn func(context.Context) ([]byte, error)) ([]byte, error) {
	return d.do(ctx, key, nil, fn)
}

// keptResult returns the part of fn's result res that the mark keeps: res,
// or nil if it is longer than MaxResultSize.
func (d *Deduper) keptResult(ctx context.Context, key Key, res []byte) []byte {
	if len(res) > MaxResultSize {
		d.log(ctx, slog.LevelWarn, "dedupe: result not kept: longer than MaxResultSize", key, phaseMark,
			fmt.Errorf("%w: %d bytes, over %d", ErrTooLarge, len(res), MaxResultSize))
		return nil
	}
	if len(res) == 0 {
		return nil
	}
	return res
}

// storedResult returns the result kept with key's mark on the Deduper's
// store, or nil.
func (d *Deduper) storedResult(ctx context.Context, key Key) []byte {
	rs, ok := d.st.(ResultStore)
	if !ok {
		return nil
	}
	var res []byte
	err := d.timed(ctx, phaseClaim, func(ctx context.Context) (err error) {
		res, _, err = rs.Result(ctx, key)
		return err
	})
	if err != nil {
		d.storeError(ctx, key, d.st, phaseClaim, err)
		return nil
	}
	return res
}

// markWith marks key on st, keeping res with the mark if there is one and
// st can keep it.
func markWith(ctx context.Context, st Store, key Key, res []byte, ttl time.Duration) error {
	if rs, ok := st.(ResultStore); ok && len(res) > 0 {
		return rs.MarkResult(ctx, key, res, ttl)
	}
	return st.Mark(ctx, key, ttl)
}

// checkResult returns the error MarkResult refuses res with, or nil.
func checkResult(backend string, key Key, res []byte) error {
	if len(res) > MaxResultSize {
		return fmt.Errorf("dedupe: %s: mark %s: result of %d bytes, over %d: %w", backend, key, len(res), MaxResultSize, ErrTooLarge)
	}
	return nil
}

// resultOf is st's Result, or its Exists if st keeps no results.
func resultOf(ctx context.Context, st Store, key Key) ([]byte, bool, error) {
	if rs, ok := st.(ResultStore); ok {
		return rs.Result(ctx, key)
	}
	ok, err := st.Exists(ctx, key)
	return nil, ok, err
}
