package migrate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gatewaykit/dedupe"
)

// snapshotter is a destination that holds marks in memory until it saves
// them: [dedupe.MemoryStore].
type snapshotter interface {
	SaveSnapshot() error
}

// Defaults of [Options].
const (
	DefaultBatch       = 1000
	DefaultNoExpiryTTL = dedupe.DefaultTTL
	// snapshotEvery is how many batches a snapshotter destination takes
	// between two snapshots, and so between two checkpoints.
	snapshotEvery = 100
)

// ErrNotSupported reports a store that lacks an interface the call needs.
var ErrNotSupported = errors.New("dedupe: migrate: store does not support this")

// Options configures [Copy]. The zero value gives the defaults.
type Options struct {
	// Batch is the number of marks read and written at a time. Default
	// [DefaultBatch] (1000).
	Batch int
	// DryRun reads the source and counts, writing nothing: Present is
	// counted by asking the destination's Exists, which may be nil then.
	DryRun bool
	// Resume, if not nil, is the checkpoint of an interrupted run with the
	// same source and destination: the copy goes on after it, and its counts
	// start from the checkpoint's.
	Resume *Checkpoint
	// Checkpoint, if not nil, is called after each batch the destination
	// has committed, and after the last. An error from it stops the copy.
	Checkpoint func(Checkpoint) error
	// Progress, if not nil, is called with the counts after each batch.
	Progress func(Summary)
	// NoExpiryTTL is the TTL given to marks that never expire at the source.
	// Default [DefaultNoExpiryTTL] (24 h).
	NoExpiryTTL time.Duration
	// Now is the local clock. Default time.Now.
	Now func() time.Time
}

// Summary counts what a copy did with the marks it read. Listed is the sum
// of the other four.
type Summary struct {
	Listed  int64 // marks read from the source
	Copied  int64 // written to the destination, where they were absent
	Present int64 // live at the destination already (kept, never shortened), or listed again
	Expired int64 // expired at the source: skipped
	Invalid int64 // keys the destination cannot hold: skipped
}

// Checkpoint is where a copy stands after a committed batch: the source's
// cursor (see [dedupe.Lister]) and the counts so far. Done is set in the last one.
type Checkpoint struct {
	Cursor  string  `json:"cursor"`
	Summary Summary `json:"summary"`
	Done    bool    `json:"done"`
}

// Copy copies the marks of from to to, a batch at a time, as the package
// documentation describes, and returns the counts. from must implement
// [dedupe.Lister] and to [dedupe.BulkMarker] (to may be nil for a dry run); otherwise Copy
// fails with [ErrNotSupported]. On an error the counts returned are those of
// the batches committed.
func Copy(ctx context.Context, from, to dedupe.Store, opts Options) (Summary, error) {
	l, ok := from.(dedupe.Lister)
	if !ok {
		return Summary{}, fmt.Errorf("%w: %s store cannot list its marks", ErrNotSupported, from.Backend())
	}
	c := &copier{from: l, to: to, opts: opts}
	if !opts.DryRun {
		if c.bulk, ok = to.(dedupe.BulkMarker); !ok || to == nil {
			return Summary{}, fmt.Errorf("%w: destination cannot write marks in bulk", ErrNotSupported)
		}
		c.snap, _ = to.(snapshotter)
	}
	c.fill()
	return c.run(ctx)
}

// copier is one run of Copy.
type copier struct {
	from dedupe.Lister
	to   dedupe.Store
	bulk dedupe.BulkMarker
	snap snapshotter
	opts Options

	cursor  string
	sum     Summary // committed
	pending int     // batches written since the last snapshot
	keys    []dedupe.Key
	expires []time.Time
}

// fill sets the defaults of c.opts and the starting point.
func (c *copier) fill() {
	if c.opts.Batch <= 0 {
		c.opts.Batch = DefaultBatch
	}
	if c.opts.NoExpiryTTL <= 0 {
		c.opts.NoExpiryTTL = DefaultNoExpiryTTL
	}
	if c.opts.Now == nil {
		c.opts.Now = time.Now
	}
	if r := c.opts.Resume; r != nil {
		c.cursor, c.sum = r.Cursor, r.Summary
	}
}

// run copies page after page until the source's last.
func (c *copier) run(ctx context.Context) (Summary, error) {
	if r := c.opts.Resume; r != nil && r.Done {
		return c.sum, nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return c.sum, err
		}
		var got Summary
		c.keys, c.expires = c.keys[:0], c.expires[:0]
		now := c.opts.Now()
		next, err := c.from.ListMarks(ctx, c.cursor, c.opts.Batch, func(k dedupe.Key, exp time.Time) {
			got.Listed++
			switch {
			case k.Validate() != nil:
				got.Invalid++
			case exp.IsZero():
				c.add(k, now.Add(c.opts.NoExpiryTTL))
			case !exp.After(now):
				got.Expired++
			default:
				c.add(k, exp)
			}
		})
		if err != nil {
			return c.sum, fmt.Errorf("dedupe: migrate: list marks: %w", err)
		}
		repeated := c.dedupeBatch()
		present, err := c.write(ctx)
		if err != nil {
			return c.sum, err
		}
		got.Present, got.Copied = int64(present+repeated), int64(len(c.keys)-present)
		if err := c.commit(got, next); err != nil {
			return c.sum, err
		}
		if next == "" {
			return c.sum, nil
		}
	}
}

// add appends a mark to copy to the batch.
func (c *copier) add(k dedupe.Key, exp time.Time) {
	c.keys = append(c.keys, k)
	c.expires = append(c.expires, exp)
}

// write writes the batch, or in a dry run counts the keys the destination
// holds, and returns how many were present.
func (c *copier) write(ctx context.Context) (int, error) {
	if len(c.keys) == 0 {
		return 0, nil
	}
	if c.opts.DryRun {
		return c.countPresent(ctx)
	}
	present, err := c.bulk.MarkUntil(ctx, c.keys, c.expires)
	if err != nil {
		return 0, fmt.Errorf("dedupe: migrate: write %d marks: %w", len(c.keys), err)
	}
	return present, nil
}

// dedupeBatch drops repeated keys from the batch (a walk may yield a key
// twice, see [dedupe.Lister]), keeping the latest expiry of each, so that a store
// sees each key once, and returns how many it dropped: they count as
// present.
func (c *copier) dedupeBatch() int {
	seen := make(map[dedupe.Key]int, len(c.keys))
	n := 0
	for i, k := range c.keys {
		if j, ok := seen[k]; ok {
			if c.expires[i].After(c.expires[j]) {
				c.expires[j] = c.expires[i]
			}
			continue
		}
		seen[k] = n
		c.keys[n], c.expires[n] = k, c.expires[i]
		n++
	}
	dropped := len(c.keys) - n
	c.keys, c.expires = c.keys[:n], c.expires[:n]
	return dropped
}

// countPresent asks the destination, if any, which keys of the batch exist.
func (c *copier) countPresent(ctx context.Context) (int, error) {
	if c.to == nil {
		return 0, nil
	}
	n := 0
	for _, k := range c.keys {
		ok, err := c.to.Exists(ctx, k)
		if err != nil {
			return 0, fmt.Errorf("dedupe: migrate: dry run: %w", err)
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// commit adds a written batch's counts, and checkpoints when the destination
// holds them durably: at once, or for a snapshotter after its snapshot.
func (c *copier) commit(got Summary, next string) error {
	c.sum.Listed += got.Listed
	c.sum.Copied += got.Copied
	c.sum.Present += got.Present
	c.sum.Expired += got.Expired
	c.sum.Invalid += got.Invalid
	c.cursor = next
	if c.opts.Progress != nil {
		c.opts.Progress(c.sum)
	}
	last := next == ""
	if c.snap != nil {
		if c.pending++; c.pending < snapshotEvery && !last {
			return nil
		}
		if err := c.snap.SaveSnapshot(); err != nil {
			return fmt.Errorf("dedupe: migrate: save the destination's snapshot: %w", err)
		}
		c.pending = 0
	}
	if c.opts.Checkpoint == nil || c.opts.DryRun {
		return nil
	}
	if err := c.opts.Checkpoint(Checkpoint{Cursor: next, Summary: c.sum, Done: last}); err != nil {
		return fmt.Errorf("dedupe: migrate: checkpoint: %w", err)
	}
	return nil
}
