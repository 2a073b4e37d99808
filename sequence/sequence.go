package sequence

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Defaults of [Config], used for fields left zero.
const (
	// DefaultMaxGap is the default [Config].MaxGap.
	DefaultMaxGap = 10
	// DefaultTimeout is the default [Config].Timeout.
	DefaultTimeout = 500 * time.Millisecond
	// DefaultMaxBuffered is the default [Config].MaxBuffered.
	DefaultMaxBuffered = 100
	// DefaultMaxKeys is the default [Config].MaxKeys.
	DefaultMaxKeys = 10000
)

// Config configures a [Sequencer]. The zero value means the defaults.
type Config struct {
	// MaxGap is how many missing sequence numbers a key waits for. A value
	// that would leave more missing numbers between the last one handed on and
	// itself is handed on at once, with everything buffered before it, and the
	// missing numbers are given up: the sequence jumped (a sender restarted, or
	// too much was lost to wait for). Zero or less: [DefaultMaxGap], 10.
	MaxGap int

	// Timeout is the longest a value waits in the buffer for the numbers
	// before it. When it has passed, the missing numbers before that value are
	// given up. Zero or less: [DefaultTimeout], 500 ms.
	Timeout time.Duration

	// MaxBuffered is how many values a key may hold waiting. When one more
	// arrives, the oldest gap is given up early to make room. Zero or less:
	// [DefaultMaxBuffered], 100.
	MaxBuffered int

	// MaxKeys bounds the number of keys tracked. When a new key comes and the
	// bound is reached, the least recently used key with nothing buffered is
	// forgotten; if every tracked key holds buffered values, the new key's
	// value is handed on untracked, as a first value is. Zero or less:
	// [DefaultMaxKeys], 10,000.
	MaxKeys int

	// FirstSeq, when not zero, is the number every key's sequence starts at:
	// a new key waits for FirstSeq (within MaxGap and Timeout, like any gap)
	// and drops values below it as stale. Zero: the first value seen for a key
	// is handed on and starts its sequence, whatever its number, so a value
	// numbered below it that arrives later is stale.
	FirstSeq uint64

	// Now is the clock, read only while a key has buffered values. It is
	// called with the Sequencer's lock held, so it must not call the
	// Sequencer. Nil: [time.Now].
	Now func() time.Time
}

// Verdict is what [Sequencer.Push] did with a value.
type Verdict int

// Verdicts of [Sequencer.Push].
const (
	// Ready means the value is handed on: it is among the values Push
	// returned.
	Ready Verdict = iota + 1
	// Buffered means the value waits for the numbers before it; a later
	// Push, [Sequencer.Expire] or [Sequencer.Flush] hands it on.
	Buffered
	// Stale means the value's number is below the last one handed on for
	// its key: it was dropped.
	Stale
	// Duplicate means the value's number was handed on last or is already
	// buffered: it was dropped.
	Duplicate
)

// String returns the verdict in lower case ("ready", "buffered", "stale",
// "duplicate").
func (v Verdict) String() string {
	switch v {
	case Ready:
		return "ready"
	case Buffered:
		return "buffered"
	case Stale:
		return "stale"
	case Duplicate:
		return "duplicate"
	}
	return "unknown"
}

// Item is a value a [Sequencer] hands on, with its key and sequence
// number.
type Item[T any] struct {
	// Key is the key the value was pushed with.
	Key string
	// Seq is the value's sequence number.
	Seq uint64
	// Value is the value pushed.
	Value T
	// Skipped reports a gap given up just before this value: the numbers
	// Seq-Skipped through Seq-1 never arrived (in time), and processing went
	// on past them. It is zero when the value follows the previous one.
	Skipped uint64
}

// Sequencer hands on values in the order of their per-key sequence numbers,
// for flows where order matters (a cancel must not overtake the payment it
// cancels). Push a value with its key and number, and process what Push
// returns, in order:
//
//   - the number after the last one handed on: handed on, with any buffered
//     values that now follow;
//   - the last one handed on, or one already buffered: dropped as
//     [Duplicate]; a lower one: dropped as [Stale];
//   - a higher one: buffered ([Buffered]) until the gap fills, or until it
//     has waited Timeout, or the key holds more than MaxBuffered values; then
//     the missing numbers are given up, reported in [Item.Skipped], and
//     processing resumes past the gap;
//   - one that would leave more than MaxGap numbers missing: handed on at once
//     after the buffered values, the gap given up and reported the same way.
//
// Nothing is lost silently: every value pushed is handed on once or dropped
// with a verdict saying why.
//
// A Sequencer starts no goroutine and needs no Close. Timeouts are checked when
// a key is pushed and when [Sequencer.Expire] is called, so a buffered value
// whose key receives nothing more waits until the next Expire: call Expire
// periodically (every Timeout/5, say). [Sequencer.Flush] hands on everything
// buffered, at shutdown.
//
// A Sequencer is safe for concurrent use, but order is a promise per consumer:
// values of one key come out in order only if one goroutine at a time pushes
// that key and processes what comes out before pushing it again. Route keys to
// workers with [Shard] and give each worker its own Sequencer, calling Push and
// Expire from that worker.
//
// Memory is bounded by MaxKeys keys of at most MaxBuffered values each.
type Sequencer[T any] struct {
	maxGap      uint64
	timeout     time.Duration
	maxBuffered int
	maxKeys     int
	firstSeq    uint64
	now         func() time.Time

	mu      sync.Mutex
	keys    map[string]*seqKey[T]
	idle    seqKey[T] // sentinel of the ring of keys with nothing buffered, most recently used first
	pending map[*seqKey[T]]struct{}
}

// seqKey is the state of one key.
type seqKey[T any] struct {
	key        string
	last       uint64        // the last number handed on
	buf        []seqEntry[T] // waiting values, by number, all above last
	prev, next *seqKey[T]    // in the idle ring, else nil
	pending    bool          // in Sequencer.pending: buf is not empty
}

type seqEntry[T any] struct {
	seq uint64
	v   T
	at  time.Time // when it was buffered
}

// New returns a [Sequencer] of values of type T, configured by cfg, whose
// zero fields mean the defaults.
func New[T any](cfg Config) *Sequencer[T] {
	s := &Sequencer[T]{
		maxGap:      uint64(orDefault(cfg.MaxGap, DefaultMaxGap)),
		timeout:     orDefault(cfg.Timeout, DefaultTimeout),
		maxBuffered: orDefault(cfg.MaxBuffered, DefaultMaxBuffered),
		maxKeys:     orDefault(cfg.MaxKeys, DefaultMaxKeys),
		firstSeq:    cfg.FirstSeq,
		now:         cfg.Now,
		keys:        make(map[string]*seqKey[T]),
		pending:     make(map[*seqKey[T]]struct{}),
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.idle.prev, s.idle.next = &s.idle, &s.idle
	return s
}

// orDefault returns v, or def when v is zero or less: the rule of every
// numeric field of [Config].
func orDefault[N int | time.Duration](v, def N) N {
	if v <= 0 {
		return def
	}
	return v
}

// Push takes value v numbered seq for key and returns the values of key that
// are ready, in order (v among them when the verdict is [Ready]), and what
// became of v. Before placing v, Push gives up the gaps of key whose
// Timeout has passed, so the result may hold values buffered earlier, and v may
// then be stale.
func (s *Sequencer[T]) Push(key string, seq uint64, v T) ([]Item[T], Verdict) {
	s.mu.Lock()
	defer s.mu.Unlock()

	k := s.keys[key]
	if k == nil && s.firstSeq != 0 && seq < s.firstSeq {
		return nil, Stale
	}
	if k == nil {
		k = s.track(key)
		if k == nil || s.firstSeq == 0 {
			// Untracked, or the first value of the key: it starts the sequence.
			if k != nil {
				k.last = seq
				s.settle(k)
			}
			return []Item[T]{{Key: key, Seq: seq, Value: v}}, Ready
		}
		k.last = s.firstSeq - 1
	}

	// The clock is read only when a gap is open or may open: in-order
	// values do not pay for it.
	var (
		out []Item[T]
		now time.Time
	)
	if len(k.buf) > 0 {
		now = s.now()
		out = s.expireKey(k, now, out)
	}
	var verdict Verdict
	switch {
	case seq == k.last:
		verdict = Duplicate
	case seq < k.last:
		verdict = Stale
	case seq == k.last+1:
		out = append(out, Item[T]{Key: key, Seq: seq, Value: v})
		k.last = seq
		out = k.release(k.ready(), out)
		verdict = Ready
	default:
		out, verdict = s.place(k, seq, v, now, out)
	}
	s.settle(k)
	return out, verdict
}

// place takes value v numbered seq for k, above the number k expects next: a
// copy of a buffered value is a [Duplicate]; a value past MaxGap missing
// numbers is handed on with everything buffered; any other is buffered, and
// may then be handed on if the buffer overflows. now is the time Push read,
// or zero if Push has not read the clock.
func (s *Sequencer[T]) place(k *seqKey[T], seq uint64, v T, now time.Time, out []Item[T]) ([]Item[T], Verdict) {
	i, found := slices.BinarySearchFunc(k.buf, seq, func(e seqEntry[T], seq uint64) int {
		return cmp.Compare(e.seq, seq)
	})
	if found {
		return out, Duplicate
	}
	// The numbers between last and seq that are not buffered.
	if missing := seq - k.last - 1 - uint64(i); missing > s.maxGap {
		out = k.release(len(k.buf), out)
		out = append(out, Item[T]{Key: k.key, Seq: seq, Value: v, Skipped: seq - k.last - 1})
		k.last = seq
		return out, Ready
	}
	if now.IsZero() {
		now = s.now()
	}
	k.buf = slices.Insert(k.buf, i, seqEntry[T]{seq: seq, v: v, at: now})
	for len(k.buf) > s.maxBuffered {
		// Give up the first gap: release the run that follows it.
		out = k.release(k.run(), out)
	}
	if seq <= k.last {
		return out, Ready
	}
	return out, Buffered
}

// Expire gives up the gaps whose Timeout has passed, in every key, and returns
// the values that are then ready: in order within each key, keys in no
// particular order. It returns nil when nothing is due.
func (s *Sequencer[T]) Expire() []Item[T] {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 {
		return nil
	}
	now := s.now()
	var out []Item[T]
	for k := range s.pending {
		out = s.expireKey(k, now, out)
		s.settle(k)
	}
	return out
}

// Flush gives up every gap and returns all buffered values, in order within
// each key, keys in no particular order. Call it at shutdown, after the last
// Push, so that nothing buffered is left behind. The keys' last numbers are
// kept.
func (s *Sequencer[T]) Flush() []Item[T] {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Item[T]
	for k := range s.pending {
		out = k.release(len(k.buf), out)
		s.settle(k)
	}
	return out
}

// track starts tracking key, forgetting the least recently used idle key if
// MaxKeys are tracked. It returns nil if every tracked key is pending.
func (s *Sequencer[T]) track(key string) *seqKey[T] {
	if len(s.keys) >= s.maxKeys {
		old := s.idle.prev
		if old == &s.idle {
			return nil
		}
		old.unlink()
		delete(s.keys, old.key)
	}
	k := &seqKey[T]{key: key}
	s.keys[key] = k
	return k
}

// settle files k as pending if it holds values, else as the most recently
// used idle key.
func (s *Sequencer[T]) settle(k *seqKey[T]) {
	if len(k.buf) > 0 {
		if !k.pending {
			if k.next != nil {
				k.unlink()
			}
			k.pending = true
			s.pending[k] = struct{}{}
		}
		return
	}
	if k.pending {
		k.pending = false
		delete(s.pending, k)
	} else if k.next != nil {
		k.unlink()
	}
	if cap(k.buf) > 8 {
		k.buf = nil // an idle key keeps no large buffer
	}
	k.prev, k.next = &s.idle, s.idle.next
	k.next.prev, s.idle.next = k, k
}

// expireKey releases, in k, every value that has waited Timeout, the values
// before it and the run that follows.
func (s *Sequencer[T]) expireKey(k *seqKey[T], now time.Time, out []Item[T]) []Item[T] {
	due := -1
	for i, e := range k.buf {
		if now.Sub(e.at) >= s.timeout {
			due = i
		}
	}
	if due < 0 {
		return out
	}
	out = k.release(due+1, out)
	return k.release(k.ready(), out)
}

// run returns the length of the run of consecutive numbers at the head of
// the buffer, whether or not a gap precedes it.
func (k *seqKey[T]) run() int {
	n := 0
	for n < len(k.buf) && (n == 0 || k.buf[n].seq == k.buf[n-1].seq+1) {
		n++
	}
	return n
}

// ready returns how many buffered values follow last without a gap.
func (k *seqKey[T]) ready() int {
	if len(k.buf) == 0 || k.buf[0].seq != k.last+1 {
		return 0
	}
	return k.run()
}

// release hands on the first n buffered values, reporting the gap before
// each, and removes them from the buffer.
func (k *seqKey[T]) release(n int, out []Item[T]) []Item[T] {
	for _, e := range k.buf[:n] {
		out = append(out, Item[T]{Key: k.key, Seq: e.seq, Value: e.v, Skipped: e.seq - k.last - 1})
		k.last = e.seq
	}
	k.buf = slices.Delete(k.buf, 0, n)
	return out
}

func (k *seqKey[T]) unlink() {
	k.prev.next, k.next.prev = k.next, k.prev
	k.prev, k.next = nil, nil
}
