package migrate

import (
	"context"
	"fmt"
	"time"

	"github.com/gatewaykit/dedupe"
)

// StoreStats is what [Stats] reports of a store.
type StoreStats struct {
	Backend string // [dedupe.Store.Backend]
	Marks   int64  // live marks
	// Claims is the number of live claims, or -1 if the store cannot count
	// them (it implements [dedupe.Lister] but not [dedupe.Counter]).
	Claims int64
	// Oldest and Newest are the earliest and latest expiry of the live marks
	// that expire, on the local clock; zero without any.
	Oldest, Newest time.Time
	// Sizes are the bytes of the store's tables, partitions or files, by name;
	// nil for a store without them (not a [dedupe.Sizer]).
	Sizes map[string]int64
}

// Stats counts what store holds: with its [dedupe.Counter] if it has one, and
// otherwise by walking its marks with its [dedupe.Lister] (claims then unknown), and
// the sizes from its [dedupe.Sizer]. A store with neither dedupe.Counter nor dedupe.Lister fails
// with [ErrNotSupported].
func Stats(ctx context.Context, store dedupe.Store) (StoreStats, error) {
	st := StoreStats{Backend: store.Backend(), Claims: -1}
	var err error
	switch s := store.(type) {
	case dedupe.Counter:
		st.Marks, st.Claims, st.Oldest, st.Newest, err = s.CountLive(ctx)
	case dedupe.Lister:
		err = walkStats(ctx, s, &st)
	default:
		return st, fmt.Errorf("%w: %s store can neither count nor list its marks", ErrNotSupported, st.Backend)
	}
	if err != nil {
		return st, fmt.Errorf("dedupe: migrate: stats: %w", err)
	}
	if s, ok := store.(dedupe.Sizer); ok {
		if st.Sizes, err = s.Sizes(ctx); err != nil {
			return st, fmt.Errorf("dedupe: migrate: sizes: %w", err)
		}
	}
	return st, nil
}

// walkStats counts the live marks of l, and their expiries, page by page.
func walkStats(ctx context.Context, l dedupe.Lister, st *StoreStats) error {
	now := time.Now()
	cursor := ""
	for {
		next, err := l.ListMarks(ctx, cursor, DefaultBatch, func(_ dedupe.Key, exp time.Time) {
			if !exp.IsZero() && !exp.After(now) {
				return
			}
			st.Marks++
			if exp.IsZero() {
				return
			}
			if st.Oldest.IsZero() || exp.Before(st.Oldest) {
				st.Oldest = exp
			}
			if exp.After(st.Newest) {
				st.Newest = exp
			}
		})
		if err != nil || next == "" {
			return err
		}
		cursor = next
	}
}
