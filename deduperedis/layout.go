package deduperedis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/redis/go-redis/v9"
)

// The layout record (docs/internals-redis.md, "Layout record"):
//
// A prefix records the layout of its marks in one string key, Prefix +
// "layout", that never expires: "format=1 layout=plain" or "format=1
// layout=compact shards=16384". No message key can be that key: a plain
// key has a ':' after its channel, a compact key starts with '{' after the
// prefix. Its value starts with neither "m" nor "c:", so the walks of the
// plain layout (ListMarks, CountLive) take it for no mark and no claim.
//
// A store checks the record before its first call reaches the server
// (Ping, or any operation), and again at most every layoutRecheck, in the
// call that finds the time passed. The first check reads the record
// (GET); a prefix without one (written by a version before the record, or
// emptied by FLUSHALL) has one page of its keys sampled (SCAN, layoutSample
// keys per master) for keys of the other layout, and is then recorded with
// SET NX, whose winner every later store of the prefix must agree with. A
// check finding another layout refuses the store for good; a check that
// fails otherwise (the server does not answer) fails the call that ran it
// and is tried again by the next, or, for a recheck, at the next recheck.

// ErrLayoutMismatch reports a store whose [Config.Compact] or
// [Config.Shards] differs from the layout its prefix records, or, on a
// prefix without a record, from the layout of the keys found under it. Such
// a store would look for marks where the other stores of its prefix do not
// put them, and process every message again: its calls fail with an error
// wrapping ErrLayoutMismatch that names both layouts, and change nothing.
var ErrLayoutMismatch = errors.New("dedupe: redis: layout mismatch")

// layoutKey is the suffix of the record's key, after the prefix.
const layoutKey = "layout"

// layoutFormat is the version of the record and of the layouts it names: a
// record of another format is refused, so that a layout changed in a later
// version (another fingerprint, another bucket name) is never read as this
// one.
const layoutFormat = 1

// layoutRecheck is how often a running store checks its prefix's record
// again: after a FLUSHALL or the loss of the record in a failover it writes
// the record back, and a store of another layout that recorded it
// meanwhile is refused from then on.
const layoutRecheck = time.Minute

// layoutSample is the COUNT of the one SCAN page per master that a check
// reads of a prefix without a record.
const layoutSample = 1000

// layout is a layout of marks: plain, or compact with its shard count.
type layout struct {
	compact bool
	shards  int // 0 on the plain layout
}

// String names l for an error message.
func (l layout) String() string {
	if !l.compact {
		return "the plain layout"
	}
	return fmt.Sprintf("the compact layout with %d shards", l.shards)
}

// record returns the value of l's record.
func (l layout) record() string {
	if !l.compact {
		return "format=" + strconv.Itoa(layoutFormat) + " layout=plain"
	}
	return fmt.Sprintf("format=%d layout=compact shards=%d", layoutFormat, l.shards)
}

// parseLayout parses the value of a record.
func parseLayout(v string) (layout, error) {
	fields := map[string]string{}
	for _, f := range strings.Fields(v) {
		k, val, ok := strings.Cut(f, "=")
		if !ok {
			return layout{}, fmt.Errorf("%q is not name=value", f)
		}
		fields[k] = val
	}
	if f := fields["format"]; f != strconv.Itoa(layoutFormat) {
		return layout{}, fmt.Errorf("format %q, not %d: written by another version of deduperedis", f, layoutFormat)
	}
	switch fields["layout"] {
	case "plain":
		return layout{}, nil
	case "compact":
		n, err := strconv.Atoi(fields["shards"])
		if err != nil || n <= 0 {
			return layout{}, fmt.Errorf("shards %q is not a positive number", fields["shards"])
		}
		return layout{compact: true, shards: n}, nil
	}
	return layout{}, fmt.Errorf("layout %q is neither plain nor compact", fields["layout"])
}

// layoutGate is the state of a store's checks of its record.
type layoutGate struct {
	adopt   bool                  // Config.AdoptLayout: take the recorded layout, write none
	every   time.Duration         // layoutRecheck; tests shorten it
	sem     chan struct{}         // one slot, held by the first check in flight
	next    atomic.Int64          // Unix ns of the next recheck; 0 before the first check passed
	refused atomic.Pointer[error] // the mismatch found, for every later call
}

// init readies the gate of a new store; adopt is Config.AdoptLayout.
func (g *layoutGate) init(adopt bool) {
	g.adopt, g.every, g.sem = adopt, layoutRecheck, make(chan struct{}, 1)
}

// layoutChecked returns nil if the store's layout agrees with its prefix's
// record, checking it first if it was not checked yet or checked more than
// layoutRecheck ago, and otherwise the error of the check. It is the first
// step of every call that reaches the server (after the checks that need no
// I/O), so it costs an atomic load and a clock read when nothing is due.
func (s *Store) layoutChecked(ctx context.Context) error {
	if p := s.layout.refused.Load(); p != nil {
		return *p
	}
	next := s.layout.next.Load()
	if next != 0 && time.Now().UnixNano() < next {
		return nil
	}
	if next != 0 {
		return s.recheckLayout(ctx, next)
	}
	select {
	case s.layout.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("layout record: %w", ctx.Err())
	}
	defer func() { <-s.layout.sem }()
	if p := s.layout.refused.Load(); p != nil {
		return *p
	}
	if s.layout.next.Load() != 0 {
		return nil // checked by the call this one waited for
	}
	if err := s.verifyLayout(ctx, true); err != nil {
		return s.refuseIf(err)
	}
	s.layout.next.Store(time.Now().Add(s.layout.every).UnixNano())
	return nil
}

// layoutEach is layoutChecked for a batch call op on keys: unless the store
// is closed or ctx ended (which the batch reports per item), it sets every
// errs[i] still nil to the error of the check, and reports whether there
// was one.
func (s *Store) layoutEach(ctx context.Context, op string, keys []dedupe.Key, errs []error) bool {
	if s.closed.Load() || ctx.Err() != nil {
		return false
	}
	err := s.layoutChecked(ctx)
	if err == nil {
		return false
	}
	for i := range errs {
		if errs[i] == nil {
			errs[i] = s.fail(ctx, op, keys[i], err)
		}
	}
	return true
}

// recheckLayout checks the record again, in the one call that moves the
// time of the next recheck from seen; the others go on meanwhile. Only a
// mismatch fails the call: any other error is left to the next recheck.
func (s *Store) recheckLayout(ctx context.Context, seen int64) error {
	if !s.layout.next.CompareAndSwap(seen, time.Now().Add(s.layout.every).UnixNano()) {
		return nil
	}
	if err := s.verifyLayout(ctx, false); errors.Is(err, ErrLayoutMismatch) {
		return s.refuseIf(err)
	}
	return nil
}

// refuseIf keeps err for every later call if it is a mismatch, and returns
// it.
func (s *Store) refuseIf(err error) error {
	if errors.Is(err, ErrLayoutMismatch) {
		s.layout.refused.CompareAndSwap(nil, &err)
	}
	return err
}

// configured returns the layout the store works in.
func (s *Store) configured() layout {
	if !s.compact {
		return layout{}
	}
	return layout{compact: true, shards: s.shards}
}

// verifyLayout reads the prefix's record and compares it with the store's
// layout; see the comment at the top of the file. first is set for the
// first check, which samples a prefix without a record and, with
// [Config.AdoptLayout], takes the recorded layout.
func (s *Store) verifyLayout(ctx context.Context, first bool) error {
	key := s.prefix + layoutKey
	v, found, err := s.readRecord(ctx, key)
	if err != nil {
		return err
	}
	if !found && first {
		if err := s.sampleLayout(ctx); err != nil {
			return err
		}
	}
	if !found && !s.layout.adopt {
		if v, found, err = s.writeRecord(ctx, key, s.configured().record()); err != nil {
			return err
		}
	}
	if !found {
		return nil // adopting, and nothing recorded: the configured layout, unrecorded
	}
	have, err := parseLayout(v)
	if err != nil {
		return fmt.Errorf("%w: prefix %q has a layout record this store cannot read (key %q = %q): %v",
			ErrLayoutMismatch, s.prefix, key, v, err)
	}
	if first && s.layout.adopt {
		// Only the first check writes these, before any call reads them:
		// the calls wait for it (layoutChecked).
		s.compact = have.compact
		if have.compact {
			s.shards = have.shards
		}
		return nil
	}
	if want := s.configured(); have != want {
		return fmt.Errorf("%w: prefix %q holds %v (its record, key %q); this store is configured for %v",
			ErrLayoutMismatch, s.prefix, have, key, want)
	}
	return nil
}

// readRecord reads the record at key, with one GET.
func (s *Store) readRecord(ctx context.Context, key string) (v string, found bool, err error) {
	err = s.do(ctx, key, func(p pipe) func() error {
		cmd := p.Get(p.ctx, key)
		return func() error {
			v, err = cmd.Result()
			if err == redis.Nil {
				return nil
			}
			found = err == nil
			return err
		}
	})
	if err != nil {
		return "", false, fmt.Errorf("layout record %s: %w", key, err)
	}
	return v, found, nil
}

// writeRecord writes value at key unless a record is there, and returns
// the record there then: SET NX and GET in one round trip. A record deleted
// between the two (FLUSHALL) is written again.
func (s *Store) writeRecord(ctx context.Context, key, value string) (v string, found bool, err error) {
	for range 3 {
		err = s.do(ctx, key, func(p pipe) func() error {
			q, send := p.pipelined()
			set, get := q.SetNX(p.ctx, key, value, 0), q.Get(p.ctx, key)
			send()
			return func() error {
				if err := set.Err(); err != nil {
					return err
				}
				v, err = get.Result()
				if err == redis.Nil {
					return nil
				}
				found = err == nil
				return err
			}
		})
		if err != nil || found {
			break
		}
	}
	if err != nil {
		return "", false, fmt.Errorf("layout record %s: %w", key, err)
	}
	if !found {
		return "", false, fmt.Errorf("layout record %s: deleted as soon as written, three times", key)
	}
	return v, true, nil
}

// sampleLayout reads one page of the prefix's keys on the server, or on
// each master of a cluster (SCAN, layoutSample), and fails with
// [ErrLayoutMismatch] if it found keys of the other layout and none of the
// store's, or, for a compact store, a bucket of a shard beyond its Shards.
// It is the check of a prefix without a record: it catches the mismatch of
// an older version's data in all but small prefixes of busy databases,
// where a page may hold none of its keys.
func (s *Store) sampleLayout(ctx context.Context) error {
	var mu sync.Mutex
	found := keySample{shard: -1}
	sample := func(ctx context.Context, c redis.Cmdable) error {
		keys, _, err := c.Scan(ctx, 0, escapeGlob(s.prefix)+"*", layoutSample).Result()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			found.add(k[len(s.prefix):], k)
		}
		return nil
	}
	var err error
	if s.cluster != nil {
		err = s.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return sample(ctx, c) })
	} else {
		err = sample(ctx, s.client)
	}
	if err != nil {
		return fmt.Errorf("layout: sample of prefix %q: %w", s.prefix, err)
	}
	want := s.configured()
	switch {
	case want.compact && found.plain != "" && found.compact == "":
		return fmt.Errorf("%w: prefix %q has no layout record and holds keys of the plain layout (%q); this store is configured for %v",
			ErrLayoutMismatch, s.prefix, found.plain, want)
	case !want.compact && found.compact != "" && found.plain == "":
		return fmt.Errorf("%w: prefix %q has no layout record and holds keys of the compact layout (%q); this store is configured for %v",
			ErrLayoutMismatch, s.prefix, found.compact, want)
	case want.compact && found.shard >= int64(want.shards):
		return fmt.Errorf("%w: prefix %q has no layout record and holds the bucket of shard %d (%q); this store is configured for %v",
			ErrLayoutMismatch, s.prefix, found.shard, found.bucket, want)
	}
	return nil
}

// keySample is what sampleLayout found under a prefix: a key of each
// layout, and the bucket of the highest shard.
type keySample struct {
	plain, compact string // a key of each layout found
	bucket         string // the bucket of the highest shard
	shard          int64  // its shard; -1 for none
}

// add classifies the key k, rest after the prefix: a bucket is "{" + shard
// in hex + "}m", a compact claim "{" + shard + "}c:…", and a plain key
// has a ':' after its channel.
func (f *keySample) add(rest, k string) {
	if tag, tail, ok := strings.Cut(strings.TrimPrefix(rest, "{"), "}"); ok && strings.HasPrefix(rest, "{") {
		shard, err := strconv.ParseUint(tag, 16, 32)
		if err == nil && (tail == "m" || strings.HasPrefix(tail, "c:")) {
			f.compact = k
			if tail == "m" && int64(shard) > f.shard {
				f.shard, f.bucket = int64(shard), k
			}
			return
		}
	}
	if strings.Contains(rest, ":") {
		f.plain = k
	}
}
