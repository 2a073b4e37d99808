package sequence_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe/dedupetest"
	"github.com/gatewaykit/dedupe/sequence"
)

// newClock returns the injected clock the tests move by hand.
func newClock() *dedupetest.Clock {
	return dedupetest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
}

// out is a compact form of what a Sequencer hands on: "3" for a value that
// follows the previous one, "3(-2)" for one after two skipped numbers, with
// the key when it is not "k".
func out(items []sequence.Item[string]) []string {
	var s []string
	for _, it := range items {
		v := strconv.FormatUint(it.Seq, 10)
		if it.Skipped > 0 {
			v += fmt.Sprintf("(-%d)", it.Skipped)
		}
		if it.Key != "k" {
			v = it.Key + ":" + v
		}
		if it.Value != "v"+strconv.FormatUint(it.Seq, 10) {
			v += "=" + it.Value
		}
		s = append(s, v)
	}
	return s
}

// keyOf returns the key of an entry of out.
func keyOf(s string) string {
	if k, _, ok := strings.Cut(s, ":"); ok {
		return k
	}
	return "k"
}

// byKey orders entries of out by key, keeping the order within each key.
func byKey(s []string) []string {
	s = slices.Clone(s)
	slices.SortStableFunc(s, func(a, b string) int { return strings.Compare(keyOf(a), keyOf(b)) })
	return s
}

// step is one Push (or, with expire set, one Expire) and what it must give.
type step struct {
	advance time.Duration // move the clock first
	key     string        // "" means "k"
	seq     uint64
	expire  bool // call Expire instead of Push
	flush   bool // call Flush instead of Push
	verdict sequence.Verdict
	want    []string
}

func runSteps(t *testing.T, cfg sequence.Config, steps []step) {
	t.Helper()
	clock := newClock()
	cfg.Now = clock.Now
	s := sequence.New[string](cfg)
	for i, st := range steps {
		clock.Advance(st.advance)
		var got []sequence.Item[string]
		var verdict sequence.Verdict
		var what string
		switch {
		case st.expire:
			got, what = s.Expire(), "Expire()"
		case st.flush:
			got, what = s.Flush(), "Flush()"
		default:
			key := st.key
			if key == "" {
				key = "k"
			}
			got, verdict = s.Push(key, st.seq, "v"+strconv.FormatUint(st.seq, 10))
			what = fmt.Sprintf("Push(%s, %d)", key, st.seq)
			assert.Equal(t, st.verdict, verdict, "step %d: %s verdict", i, what)
		}
		g, w := out(got), st.want
		if st.expire || st.flush {
			// Keys come in no particular order: compare each key's values in order.
			g, w = byKey(g), byKey(w)
		}
		assert.Equal(t, w, g, "step %d: %s handed on %v", i, what, out(got))
	}
}

// Short names for the verdicts and the clock's unit in sequencerCases.
const (
	ready    = sequence.Ready
	buffered = sequence.Buffered
	stale    = sequence.Stale
	dup      = sequence.Duplicate
	ms       = time.Millisecond
)

// sequencerCases are the scenarios of TestSequencer: each a Config and the
// steps run on a new Sequencer.
var sequencerCases = []struct {
	name  string
	cfg   sequence.Config
	steps []step
}{
	{"in order", sequence.Config{}, []step{
		{seq: 1, verdict: ready, want: []string{"1"}},
		{seq: 2, verdict: ready, want: []string{"2"}},
		{seq: 3, verdict: ready, want: []string{"3"}},
		{key: "other", seq: 70, verdict: ready, want: []string{"other:70"}},
		{key: "other", seq: 71, verdict: ready, want: []string{"other:71"}},
		{seq: 4, verdict: ready, want: []string{"4"}},
	}},
	{"first value starts the sequence", sequence.Config{}, []step{
		{seq: 500, verdict: ready, want: []string{"500"}},
		{seq: 499, verdict: stale},
		{seq: 501, verdict: ready, want: []string{"501"}},
	}},
	{"duplicate", sequence.Config{}, []step{
		{seq: 1, verdict: ready, want: []string{"1"}},
		{seq: 2, verdict: ready, want: []string{"2"}},
		{seq: 2, verdict: dup},
		{seq: 4, verdict: buffered},
		{seq: 4, verdict: dup},
		{seq: 3, verdict: ready, want: []string{"3", "4"}},
		{seq: 4, verdict: dup},
	}},
	{"stale", sequence.Config{}, []step{
		{seq: 5, verdict: ready, want: []string{"5"}},
		{seq: 6, verdict: ready, want: []string{"6"}},
		{seq: 7, verdict: ready, want: []string{"7"}},
		{seq: 5, verdict: stale},
		{seq: 0, verdict: stale},
		{seq: 8, verdict: ready, want: []string{"8"}},
	}},
	{"gap filled", sequence.Config{}, []step{
		{seq: 1, verdict: ready, want: []string{"1"}},
		{seq: 3, verdict: buffered},
		{seq: 5, verdict: buffered},
		{seq: 4, verdict: buffered},
		{advance: 499 * ms, expire: true},
		{seq: 2, verdict: ready, want: []string{"2", "3", "4", "5"}},
		{seq: 6, verdict: ready, want: []string{"6"}},
	}},
	{"gap timed out by Expire", sequence.Config{}, []step{
		{seq: 1, verdict: ready, want: []string{"1"}},
		{seq: 3, verdict: buffered},
		{advance: 100 * ms, seq: 4, verdict: buffered},
		{key: "b", seq: 10, verdict: ready, want: []string{"b:10"}},
		{key: "b", seq: 12, verdict: buffered},
		{advance: 399 * ms, expire: true},
		{advance: 1 * ms, expire: true, want: []string{"3(-1)", "4"}},
		{expire: true},
		{advance: 100 * ms, expire: true, want: []string{"b:12(-1)"}},
		{seq: 2, verdict: stale},
		{key: "b", seq: 11, verdict: stale},
		{seq: 5, verdict: ready, want: []string{"5"}},
	}},
	{"gap timed out on Push", sequence.Config{Timeout: 200 * ms}, []step{
		{seq: 1, verdict: ready, want: []string{"1"}},
		{seq: 3, verdict: buffered},
		{advance: 250 * ms, seq: 5, verdict: buffered, want: []string{"3(-1)"}},
		{advance: 250 * ms, seq: 2, verdict: stale, want: []string{"5(-1)"}},
		{seq: 6, verdict: ready, want: []string{"6"}},
	}},
	{"each value waits at most Timeout", sequence.Config{}, []step{
		{seq: 1, verdict: ready, want: []string{"1"}},
		{seq: 5, verdict: buffered},
		{advance: 400 * ms, seq: 3, verdict: buffered},
		// 5 has waited 500 ms: 2 and 4 are given up, 3 goes with it.
		{advance: 100 * ms, expire: true, want: []string{"3(-1)", "5(-1)"}},
	}},
	{"later gap waits its own timeout", sequence.Config{}, []step{
		{seq: 1, verdict: ready, want: []string{"1"}},
		{seq: 3, verdict: buffered},
		{advance: 300 * ms, seq: 6, verdict: buffered},
		{advance: 200 * ms, expire: true, want: []string{"3(-1)"}},
		{seq: 4, verdict: ready, want: []string{"4"}},
		{advance: 299 * ms, expire: true},
		{advance: 1 * ms, expire: true, want: []string{"6(-1)"}},
	}},
	{"buffer full", sequence.Config{MaxBuffered: 3, MaxGap: 100}, []step{
		{seq: 1, verdict: ready, want: []string{"1"}},
		{seq: 3, verdict: buffered},
		{seq: 4, verdict: buffered},
		{seq: 6, verdict: buffered},
		// A fourth value: the first gap (2) is given up early.
		{seq: 8, verdict: buffered, want: []string{"3(-1)", "4"}},
		{seq: 5, verdict: ready, want: []string{"5", "6"}},
		{seq: 7, verdict: ready, want: []string{"7", "8"}},
	}},
	{"buffer full releases the new value", sequence.Config{MaxBuffered: 2}, []step{
		{seq: 1, verdict: ready, want: []string{"1"}},
		{seq: 5, verdict: buffered},
		{seq: 6, verdict: buffered},
		{seq: 3, verdict: ready, want: []string{"3(-1)"}},
		{seq: 4, verdict: ready, want: []string{"4", "5", "6"}},
	}},
	{"max gap exceeded", sequence.Config{}, []step{
		{seq: 1, verdict: ready, want: []string{"1"}},
		{seq: 3, verdict: buffered},
		{seq: 5, verdict: buffered},
		// 2, 4 and 6-19 missing: 16 > 10, the sequence jumped.
		{seq: 20, verdict: ready, want: []string{"3(-1)", "5(-1)", "20(-14)"}},
		{seq: 4, verdict: stale},
		{seq: 21, verdict: ready, want: []string{"21"}},
		{seq: 33, verdict: ready, want: []string{"33(-11)"}},
	}},
	{"max gap counts missing numbers, not distance", sequence.Config{}, []step{
		{seq: 1, verdict: ready, want: []string{"1"}},
		{seq: 12, verdict: buffered}, // 2-11 missing: 10, the most allowed
		{seq: 13, verdict: buffered}, // still 10 missing
		{seq: 14, verdict: buffered},
		{seq: 16, verdict: ready, want: []string{"12(-10)", "13", "14", "16(-1)"}}, // 11 missing
	}},
	{"max gap 1", sequence.Config{MaxGap: 1}, []step{
		{seq: 1, verdict: ready, want: []string{"1"}},
		{seq: 3, verdict: buffered},
		{seq: 5, verdict: ready, want: []string{"3(-1)", "5(-1)"}},
	}},
	{"first seq", sequence.Config{FirstSeq: 1}, []step{
		{seq: 3, verdict: buffered},
		{seq: 1, verdict: ready, want: []string{"1"}},
		{seq: 2, verdict: ready, want: []string{"2", "3"}},
		{key: "b", seq: 0, verdict: stale},
		{key: "b", seq: 1, verdict: ready, want: []string{"b:1"}},
		{key: "c", seq: 2, verdict: buffered},
		{advance: 500 * ms, expire: true, want: []string{"c:2(-1)"}},
		{key: "d", seq: 40, verdict: ready, want: []string{"d:40(-39)"}},
	}},
	{"flush", sequence.Config{}, []step{
		{seq: 1, verdict: ready, want: []string{"1"}},
		{seq: 3, verdict: buffered},
		{seq: 4, verdict: buffered},
		{seq: 7, verdict: buffered},
		{key: "b", seq: 1, verdict: ready, want: []string{"b:1"}},
		{key: "b", seq: 5, verdict: buffered},
		{flush: true, want: []string{"3(-1)", "4", "7(-2)", "b:5(-3)"}},
		{flush: true},
		{advance: time.Hour, expire: true},
		{seq: 6, verdict: stale},
		{seq: 8, verdict: ready, want: []string{"8"}},
	}},
	{"least recently used key forgotten", sequence.Config{MaxKeys: 2}, []step{
		{key: "a", seq: 1, verdict: ready, want: []string{"a:1"}},
		{key: "b", seq: 1, verdict: ready, want: []string{"b:1"}},
		{key: "c", seq: 1, verdict: ready, want: []string{"c:1"}}, // forgets a
		{key: "b", seq: 1, verdict: dup},                          // b is kept and used
		{key: "a", seq: 1, verdict: ready, want: []string{"a:1"}}, // forgets c
		{key: "b", seq: 1, verdict: dup},
		{key: "c", seq: 1, verdict: ready, want: []string{"c:1"}},
	}},
	{"keys with buffered values are kept", sequence.Config{MaxKeys: 2}, []step{
		{key: "a", seq: 1, verdict: ready, want: []string{"a:1"}},
		{key: "a", seq: 3, verdict: buffered},
		{key: "b", seq: 1, verdict: ready, want: []string{"b:1"}},
		{key: "b", seq: 3, verdict: buffered},
		{key: "c", seq: 1, verdict: ready, want: []string{"c:1"}}, // untracked
		{key: "c", seq: 1, verdict: ready, want: []string{"c:1"}}, // still untracked
		{key: "a", seq: 2, verdict: ready, want: []string{"a:2", "a:3"}},
		{key: "c", seq: 1, verdict: ready, want: []string{"c:1"}}, // forgets a: b is pending, a idle
		{key: "b", seq: 2, verdict: ready, want: []string{"b:2", "b:3"}},
		{key: "c", seq: 1, verdict: dup},
	}},
}

func TestSequencer(t *testing.T) {
	for _, tt := range sequencerCases {
		t.Run(tt.name, func(t *testing.T) { runSteps(t, tt.cfg, tt.steps) })
	}
}

func TestVerdictString(t *testing.T) {
	for v, want := range map[sequence.Verdict]string{
		sequence.Ready: "ready", sequence.Buffered: "buffered", sequence.Stale: "stale",
		sequence.Duplicate: "duplicate", 0: "unknown",
	} {
		assert.Equal(t, want, v.String(), "Verdict(%d).String()", int(v))
	}
}

func TestSequencerValues(t *testing.T) {
	s := sequence.New[*int](sequence.Config{})
	one, two := 1, 2
	s.Push("k", 1, &one)
	s.Push("k", 3, nil)
	got, _ := s.Push("k", 2, &two)
	require.Len(t, got, 2)
	assert.Same(t, &two, got[0].Value)
	assert.Nil(t, got[1].Value)
	assert.Equal(t, "k", got[0].Key)
}

// TestSequencerWorkers is the intended use: keys routed to workers with Shard,
// each worker owning a Sequencer. Every key's values come out complete and in
// order although each key's values arrive a little shuffled.
func TestSequencerWorkers(t *testing.T) {
	const workers, keys, perKey = 4, 50, 200
	type msg struct {
		key string
		seq uint64
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		handled = map[string][]uint64{}
		ins     [workers]chan msg
	)
	clock := newClock() // never moves: no gap may time out
	for w := range workers {
		ins[w] = make(chan msg, 64)
		wg.Go(func() {
			s := sequence.New[msg](sequence.Config{Now: clock.Now})
			handle := func(items []sequence.Item[msg]) {
				mu.Lock()
				defer mu.Unlock()
				for _, it := range items {
					assert.Equal(t, w, sequence.Shard(it.Key, workers), "worker %d handed on key %s", w, it.Key)
					handled[it.Key] = append(handled[it.Key], it.Value.seq)
				}
			}
			for m := range ins[w] {
				got, _ := s.Push(m.key, m.seq, m)
				handle(got)
				handle(s.Expire())
			}
			handle(s.Flush())
		})
	}
	sendShuffled(keys, perKey, func(key string, seq uint64) {
		ins[sequence.Shard(key, workers)] <- msg{key, seq}
	})
	for _, in := range ins {
		close(in)
	}
	wg.Wait()
	for k := range keys {
		key := "chat-" + strconv.Itoa(k)
		got := handled[key]
		assert.True(t, slices.IsSorted(got), "%s handed on out of order: %v", key, got)
		assert.Len(t, slices.Compact(slices.Clone(got)), len(got), "%s handed on twice: %v", key, got)
		if k%2 == 0 {
			assert.Len(t, got, perKey, "%s: values handed on", key)
		}
	}
}

// sendShuffled sends numbers 1 through perKey of keys "chat-0", "chat-1", …,
// the keys interleaved at random, each key's numbers in batches of three in a
// shuffled order, except that the first value of an even key is sent first
// (the first value starts a sequence).
func sendShuffled(keys, perKey int, send func(key string, seq uint64)) {
	rng := rand.New(rand.NewPCG(1, 2))
	next := make([]uint64, keys)
	for n := 0; n < keys*perKey; {
		k := rng.IntN(keys)
		if next[k] >= uint64(perKey) {
			continue
		}
		batch := []uint64{}
		for i := 0; i < 3 && next[k] < uint64(perKey); i++ {
			next[k]++
			batch = append(batch, next[k])
		}
		if k%2 == 1 || batch[0] != 1 {
			rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
		}
		key := "chat-" + strconv.Itoa(k)
		for _, seq := range batch {
			send(key, seq)
		}
		n += len(batch)
	}
}

// TestSequencerConcurrent shares one Sequencer between goroutines pushing the
// same keys while another expires gaps and the clock moves. Order across
// goroutines is not promised, but no value is handed on twice and none is lost
// without a verdict.
func TestSequencerConcurrent(t *testing.T) {
	const goroutines, pushes = 8, 2000
	clock := newClock()
	s := sequence.New[int](sequence.Config{Now: clock.Now, MaxBuffered: 8, MaxKeys: 16, MaxGap: 4})
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		seen     = map[int]bool{}
		dropped  atomic.Int64
		twice    atomic.Int64
		stop     = make(chan struct{})
		expirers sync.WaitGroup
	)
	record := func(items []sequence.Item[int]) {
		mu.Lock()
		defer mu.Unlock()
		for _, it := range items {
			if seen[it.Value] {
				twice.Add(1)
			}
			seen[it.Value] = true
		}
	}
	expirers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				clock.Advance(time.Millisecond * 50)
				record(s.Expire())
			}
		}
	})
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range pushes {
				key := "k" + strconv.Itoa(rng.IntN(24))
				got, verdict := s.Push(key, uint64(rng.IntN(400)), g*pushes+i)
				record(got)
				switch verdict {
				case sequence.Stale, sequence.Duplicate:
					dropped.Add(1)
				case sequence.Ready, sequence.Buffered:
				default:
					assert.Fail(t, "unknown verdict", "verdict %v", verdict)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	expirers.Wait()
	record(s.Flush())
	assert.Zero(t, twice.Load(), "values handed on twice")
	assert.EqualValues(t, goroutines*pushes, int64(len(seen))+dropped.Load(),
		"handed on %d + dropped %d: every push accounted for", len(seen), dropped.Load())
}

func TestSequencerPushAllocs(t *testing.T) {
	s := sequence.New[int](sequence.Config{})
	seq := uint64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		seq++
		_, v := s.Push("chat-1", seq, 1)
		require.Equal(t, sequence.Ready, v)
	})
	assert.LessOrEqual(t, allocs, 1.0, "in-order Push: allocs, want at most the returned slice")
	assert.Zero(t, testing.AllocsPerRun(100, func() { s.Expire() }), "Expire with nothing buffered: allocs")
}

func BenchmarkSequencerPush(b *testing.B) {
	const keys = 1024
	names := make([]string, keys)
	for i := range names {
		names[i] = "chat-" + strconv.Itoa(i)
	}
	b.Run("in-order/sequencer", func(b *testing.B) {
		b.ReportAllocs()
		s := sequence.New[int](sequence.Config{})
		i := 0
		for b.Loop() {
			if _, v := s.Push(names[i%keys], uint64(i/keys), i); v != sequence.Ready {
				b.Fatal(v)
			}
			i++
		}
	})
	// The naive way: a map of last numbers under a mutex, handing on only the
	// next number and buffering nothing.
	b.Run("in-order/map-baseline", func(b *testing.B) {
		b.ReportAllocs()
		var mu sync.Mutex
		last := map[string]uint64{}
		i := 0
		for b.Loop() {
			key, seq := names[i%keys], uint64(i/keys)
			mu.Lock()
			l, ok := last[key]
			if ok && seq != l+1 {
				mu.Unlock()
				b.Fatal("out of order")
			}
			last[key] = seq
			mu.Unlock()
			i++
		}
	})
}
