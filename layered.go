package dedupe

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
)

// Names of the layers of a [LayeredStore], as its [LayeredStore.Answered],
// [Stats].Layers and the Deduper's log records ("layer") call them.
const (
	// transportLayer names the front layer of a store with two layers: the
	// fast, local one, such as a [MemoryStore] with a window of two or three
	// times the platform's retry interval. With more layers the front ones are
	// "transport1", "transport2", and so on.
	transportLayer = "transport"
	// businessLayer names the last layer: the authoritative, shared store,
	// such as PostgreSQL with a TTL of 72 h.
	businessLayer = "business"
)

// LayeredStore is a [Store] made of layers checked in order: fast local layers
// in front (a [MemoryStore] with a window of two or three times the platform's
// retry interval), the authoritative store shared by every gateway instance at
// the back. A platform's retry of a message this instance processed moments
// ago is answered by a front layer, without a round trip to the shared store:
//
//   - Claim answers [Duplicate] from the first front layer holding a mark, and
//     otherwise claims on the last layer, which decides; a duplicate found there
//     is copied to the front.
//   - Mark marks the last layer with ttl, then each front layer for its own
//     default TTL, or ttl if shorter. A front layer's failure is ignored: the
//     authoritative mark was written.
//   - Exists asks front to back and copies a mark found behind to the front.
//   - Extend and Release go to the last layer, which alone holds claims.
//
// A mark copied to the front gets the front's window, since a Store does not
// tell how long a mark has left: keep front windows short (minutes) beside TTLs
// of hours. The layers are named as ClawBridge names its dedupe phases, the last
// "business" and the front "transport" ("transport1", "transport2", … with more
// than two); [LayeredStore.Answered], [Stats].Layers and the Deduper's log
// records ("layer") say which answered. Close closes every layer.
type LayeredStore struct {
	layers   []Store
	names    []string
	answered []atomic.Uint64
}

var (
	_ decider = (*LayeredStore)(nil)
	_ fronted = (*LayeredStore)(nil)
)

// NewLayered returns a store over two or more non-nil layers, front first, the
// last authoritative.
func NewLayered(layers ...Store) (*LayeredStore, error) {
	if len(layers) < 2 {
		return nil, fmt.Errorf("dedupe: layered: %d layers, want at least two (a front layer and the authoritative one)", len(layers))
	}
	l := &LayeredStore{
		layers:   append([]Store(nil), layers...),
		names:    make([]string, len(layers)),
		answered: make([]atomic.Uint64, len(layers)),
	}
	for i, st := range layers {
		if st == nil {
			return nil, fmt.Errorf("dedupe: layered: layer %d is nil", i)
		}
		switch {
		case i == len(layers)-1:
			l.names[i] = businessLayer
		case len(layers) == 2:
			l.names[i] = transportLayer
		default:
			l.names[i] = transportLayer + strconv.Itoa(i+1)
		}
	}
	return l, nil
}

func (l *LayeredStore) back() Store { return l.layers[len(l.layers)-1] }

// Exists asks the layers front to back, copying a mark found behind to the
// layers in front of it.
func (l *LayeredStore) Exists(ctx context.Context, key Key) (bool, error) {
	for i, st := range l.layers {
		ok, err := st.Exists(ctx, key)
		if err != nil {
			if i < len(l.layers)-1 && ambiguous(err) && ctx.Err() == nil {
				continue // a failing front layer only costs the round trip it saves
			}
			return false, err
		}
		if ok {
			l.answered[i].Add(1)
			l.backfill(ctx, key, i)
			return true, nil
		}
	}
	return false, nil
}

// Mark marks key on the last layer for ttl, then on each front layer for its
// own default TTL, or ttl if that is shorter.
func (l *LayeredStore) Mark(ctx context.Context, key Key, ttl time.Duration) error {
	return l.MarkResult(ctx, key, nil, ttl)
}

// MarkResult is Mark, keeping res with the mark on each layer that can.
func (l *LayeredStore) MarkResult(ctx context.Context, key Key, res []byte, ttl time.Duration) error {
	if err := checkResult(l.Backend(), key, res); err != nil {
		return err
	}
	if err := markWith(ctx, l.back(), key, res, ttl); err != nil {
		return err
	}
	l.mark(ctx, key, res, ttl, len(l.layers)-1)
	return nil
}

// Result asks the layers front to back for key's result; a front layer that
// holds the mark without a result (one copied from behind) passes the
// question on.
func (l *LayeredStore) Result(ctx context.Context, key Key) ([]byte, bool, error) {
	marked := false
	for i, st := range l.layers {
		res, ok, err := st.Result(ctx, key)
		if err != nil {
			if i < len(l.layers)-1 && ambiguous(err) && ctx.Err() == nil {
				continue
			}
			return nil, false, err
		}
		if res != nil {
			return res, true, nil
		}
		marked = marked || ok
	}
	return nil, marked, nil
}

// Claim answers Duplicate from the first front layer holding a mark of c.Key,
// or else claims on the last layer.
func (l *LayeredStore) Claim(ctx context.Context, c Claim, lease time.Duration) (Status, error) {
	st, _, err := l.claimBy(ctx, c, lease)
	return st, err
}

// claimBy is Claim, and also names the layer that decided.
func (l *LayeredStore) claimBy(ctx context.Context, c Claim, lease time.Duration) (Status, string, error) {
	if err := c.Validate(); err != nil {
		return 0, "", err
	}
	if i, dup, err := l.frontMark(ctx, c.Key); err != nil {
		return 0, l.names[i], err
	} else if dup {
		return Duplicate, l.names[i], nil
	}
	last := len(l.layers) - 1
	status, err := l.back().Claim(ctx, c, lease)
	if err != nil {
		return 0, l.names[last], err
	}
	l.answered[last].Add(1)
	if status == Duplicate {
		l.backfill(ctx, c.Key, last)
	}
	return status, l.names[last], nil
}

// frontMarked reports whether a front layer holds key's mark, and names it.
func (l *LayeredStore) frontMarked(ctx context.Context, key Key) (string, bool) {
	i, dup, err := l.frontMark(ctx, key)
	return l.names[i], dup && err == nil
}

// markFront marks key on the front layers only, while the last layer's mark
// is queued, so that they answer copies meanwhile.
func (l *LayeredStore) markFront(ctx context.Context, key Key, res []byte, ttl time.Duration) {
	l.mark(ctx, key, res, ttl, len(l.layers)-1)
}

// frontMark reports whether a front layer holds key's mark, and which one
// (counted as the layer that answered). A front layer that fails is passed
// over, unless the failure is for good or ctx is done.
func (l *LayeredStore) frontMark(ctx context.Context, key Key) (i int, marked bool, err error) {
	for i, st := range l.layers[:len(l.layers)-1] {
		if ok, err := st.Exists(ctx, key); err == nil && ok {
			l.answered[i].Add(1)
			return i, true, nil
		} else if err != nil && (!ambiguous(err) || ctx.Err() != nil) {
			return i, false, err
		}
	}
	return 0, false, nil
}

// backfill marks key, for their own default TTL, on the layers in front of
// layer i.
func (l *LayeredStore) backfill(ctx context.Context, key Key, i int) { l.mark(ctx, key, nil, 0, i) }

// mark marks key on the layers in front of layer i, each for its own default
// TTL or ttl if that is positive and shorter. Their failures are ignored: the
// mark is held behind them.
func (l *LayeredStore) mark(ctx context.Context, key Key, res []byte, ttl time.Duration, i int) {
	for _, st := range l.layers[:i] {
		front := time.Duration(0)
		if w, ok := st.(interface{ defaultTTL() time.Duration }); ok && ttl > 0 && ttl < w.defaultTTL() {
			front = ttl
		}
		_ = markWith(ctx, st, key, res, front)
	}
}

// Extend renews c's lease on the last layer.
func (l *LayeredStore) Extend(ctx context.Context, c Claim, lease time.Duration) error {
	return l.back().Extend(ctx, c, lease)
}

// Release drops c's claim on the last layer.
func (l *LayeredStore) Release(ctx context.Context, c Claim) error {
	return l.back().Release(ctx, c)
}

// Backend returns "layered".
func (l *LayeredStore) Backend() string { return "layered" }

// Close closes every layer, back to front, and returns their errors joined.
func (l *LayeredStore) Close() error {
	var errs []error
	for i := len(l.layers) - 1; i >= 0; i-- {
		errs = append(errs, l.layers[i].Close())
	}
	return errors.Join(errs...)
}

// Answered returns, by layer name, the Exists and Claim calls each layer
// answered.
func (l *LayeredStore) Answered() map[string]uint64 {
	m := make(map[string]uint64, len(l.layers))
	for i := range l.layers {
		m[l.names[i]] = l.answered[i].Load()
	}
	return m
}

// ClaimEach is Claim for each claims[i]: the keys a front layer holds a mark
// of are answered Duplicate by it, the others claimed on the last layer in
// one batch ([BatchStore]), or one call per key if it is not one.
func (l *LayeredStore) ClaimEach(ctx context.Context, claims []Claim, lease time.Duration) ([]Status, []error) {
	status, errs := make([]Status, len(claims)), make([]error, len(claims))
	var back []int
	for n, c := range claims {
		if errs[n] = c.Validate(); errs[n] != nil {
			continue
		}
		if _, dup, err := l.frontMark(ctx, c.Key); err != nil {
			errs[n] = err
		} else if dup {
			status[n] = Duplicate
		} else {
			back = append(back, n)
		}
	}
	if len(back) == 0 {
		return status, errs
	}
	last := len(l.layers) - 1
	s2, e2 := eachStore(l.back()).ClaimEach(ctx, pick(claims, back), lease)
	for m, n := range back {
		status[n], errs[n] = s2[m], e2[m]
		if e2[m] == nil {
			l.answered[last].Add(1)
			if s2[m] == Duplicate {
				l.backfill(ctx, claims[n].Key, last)
			}
		}
	}
	return status, errs
}

// ExtendEach renews the claims' leases on the last layer.
func (l *LayeredStore) ExtendEach(ctx context.Context, claims []Claim, lease time.Duration) []error {
	return eachStore(l.back()).ExtendEach(ctx, claims, lease)
}

// ReleaseEach drops the claims on the last layer.
func (l *LayeredStore) ReleaseEach(ctx context.Context, claims []Claim) []error {
	return eachStore(l.back()).ReleaseEach(ctx, claims)
}

// MarkEach marks the keys on the last layer in one batch, then each one it
// took on the front layers, as MarkResult does.
func (l *LayeredStore) MarkEach(ctx context.Context, keys []Key, results [][]byte, ttl time.Duration) []error {
	errs := eachStore(l.back()).MarkEach(ctx, keys, results, ttl)
	for n, key := range keys {
		if errs[n] == nil {
			var res []byte
			if results != nil {
				res = results[n]
			}
			l.mark(ctx, key, res, ttl, len(l.layers)-1)
		}
	}
	return errs
}

// Forget drops key's mark on every layer; see [Forgetter]. The last layer,
// which alone holds claims, decides: a live claim there refuses the Forget
// with [ErrInFlight] and leaves every layer as it was. Then each front layer
// forgets its copy of the mark. A front layer that fails leaves its copy,
// which answers the key's copies as duplicates until its window runs out:
// Forget returns that failure (the last layer's mark is gone), and a Forget
// again is safe. forgotten reports whether any layer held a live mark. Every
// layer must be a [Forgetter]: if one is not, Forget changes nothing and
// fails with [errors.ErrUnsupported]. Only this store's layers are reached:
// the front layers of other processes keep their copies for their windows.
func (l *LayeredStore) Forget(ctx context.Context, key Key) (bool, error) {
	fs := make([]Forgetter, len(l.layers))
	for i, st := range l.layers {
		f, ok := st.(Forgetter)
		if !ok {
			return false, fmt.Errorf("dedupe: layered: forget %s: layer %s (%s): %w", key, l.names[i], st.Backend(), errors.ErrUnsupported)
		}
		fs[i] = f
	}
	last := len(fs) - 1
	forgotten, err := fs[last].Forget(ctx, key)
	if err != nil {
		return false, err
	}
	var errs []error
	for i, f := range fs[:last] {
		ok, err := f.Forget(ctx, key)
		if err != nil {
			errs = append(errs, fmt.Errorf("dedupe: layered: forget %s: layer %s kept its mark: %w", key, l.names[i], err))
		}
		forgotten = forgotten || ok
	}
	return forgotten, errors.Join(errs...)
}
