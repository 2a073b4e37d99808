package deduperedis_test

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
)

// benchTTL is the TTL and lease of the benchmarks' keys: long enough for the
// run, short enough that Redis drops them soon after.
const benchTTL = 10 * time.Second

// benchCallers are the numbers of concurrent callers the benchmarks compare:
// a quiet gateway, a busy one, and one with as many webhook handlers as a
// busy gateway's pool.
var benchCallers = []int{1, 8, 64}

// callers runs op b.N times from n goroutines, each call on a key number of
// its own, and reports the throughput in keys/s.
func callers(b *testing.B, n int, op func(ctx context.Context, i uint64) error) {
	b.Helper()
	b.ReportAllocs()
	var next atomic.Uint64
	var wg sync.WaitGroup
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for range n {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > uint64(b.N) {
					return
				}
				if err := op(ctx, i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "keys/s")
}

// warmUp runs op 256 times from 8 goroutines, untimed, so that no contender
// pays for a cold start (dialling, loading scripts, growing the heap) because
// it runs first.
func warmUp(b *testing.B, op func(ctx context.Context, i uint64) error) {
	b.Helper()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range 32 {
				if err := op(context.Background(), uint64(i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// benchClient returns a client of the test server with a pool large enough
// for the callers, filled, so that the first contender does not pay for
// dialling.
func benchClient(b *testing.B) *redis.Client {
	client := newClient(b, redisAddr(b), func(o *redis.Options) { o.PoolSize = 64 })
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 4 {
				client.Ping(ctx)
			}
		})
	}
	wg.Wait()
	return client
}

// rawClaim is the store's claim script run by the client alone, one round
// trip per call: the same commands as the store's, without its batching.
var rawClaim = redis.NewScript(deduperedis.ClaimScriptSource)

// BenchmarkClaimMark measures Claim then Mark of new keys, the work of
// Deduper.Do around a successful dispatch, for 1, 8 and 64 concurrent
// callers, beside the same client doing the same commands one round trip per
// call (impl=raw: EVALSHA of the store's claim script, then SET PX), the
// minimal commands for it (impl=setnx: SET NX PX, then SET PX), and the same
// commands as the store's gathered by hand with 64 keys in flight, 2
// goroutines pipelining 32 keys per round trip (impl=ceiling, the same at
// every caller count), and the least batching that answers each call can do
// (impl=handoff, see handoff).
func BenchmarkClaimMark(b *testing.B) {
	client := benchClient(b)
	w := &claimMark{client: client, prefix: "dedupe-bench:" + randomID(b) + ":"}
	w.st = newStore(b, client, deduperedis.Config{Prefix: w.prefix, TTL: benchTTL, Lease: benchTTL})
	if err := rawClaim.Load(context.Background(), client).Err(); err != nil { // for the EVALSHAs of handoff and ceiling
		b.Fatal(err)
	}
	contenders := []struct {
		name string
		op   func(ctx context.Context, _ uint64) error
	}{{"store", w.store}, {"raw", w.raw}, {"setnx", w.setnx}, {"handoff", newHandoff(b, w).claimMark}}
	for _, ct := range contenders {
		warmUp(b, ct.op)
	}
	for _, c := range benchCallers {
		for _, ct := range contenders {
			b.Run(fmt.Sprintf("callers=%d/impl=%s", c, ct.name), func(b *testing.B) {
				callers(b, c, ct.op)
			})
		}
	}
	b.Run("impl=ceiling", func(b *testing.B) { gathered(b, w.ceiling) })
}

// claimMark is the work of BenchmarkClaimMark, done by each contender on keys
// never used before.
type claimMark struct {
	client redis.UniversalClient
	st     *deduperedis.Store
	prefix string
	n      atomic.Uint64
}

const benchToken = "0123456789abcdef0123456789abcdef"

func (w *claimMark) key() dedupe.Key {
	return dedupe.Key{Channel: "bench", MessageID: strconv.FormatUint(w.n.Add(1), 10)}
}

func (w *claimMark) store(ctx context.Context, _ uint64) error {
	k := w.key()
	status, err := w.st.Claim(ctx, dedupe.NewClaim(k), 0)
	if err != nil || status != dedupe.Claimed {
		return fmt.Errorf("Claim(%s) = %v, %v", k, status, err)
	}
	return w.st.Mark(ctx, k, 0)
}

func (w *claimMark) raw(ctx context.Context, _ uint64) error {
	rk := w.prefix + w.key().String()
	v, err := rawClaim.Run(ctx, w.client, []string{rk}, benchToken, benchTTL.Milliseconds()).Int64()
	if err != nil || v != 1 {
		return fmt.Errorf("claim script on %s = %v, %v", rk, v, err)
	}
	return w.client.Set(ctx, rk, "m", benchTTL).Err()
}

func (w *claimMark) setnx(ctx context.Context, _ uint64) error {
	rk := w.prefix + w.key().String()
	ok, err := w.client.SetNX(ctx, rk, "c:"+benchToken, benchTTL).Result()
	if err != nil || !ok {
		return fmt.Errorf("SET %s NX = %v, %v", rk, ok, err)
	}
	return w.client.Set(ctx, rk, "m", benchTTL).Err()
}

// Ceiling shape: 64 keys in flight, as 2 goroutines each sending 32 keys per
// round trip (issue 22, item 7).
const (
	ceilingSenders = 2
	ceilingKeys    = 32
)

// gathered runs round, ceilingSenders goroutines at a time, on the b.N keys
// handed out ceilingKeys at a time, and reports the throughput in keys/s:
// the work of the callers gathered by hand, the ceiling of a store's batching.
func gathered(b *testing.B, round func(ctx context.Context, n int) error) {
	b.Helper()
	b.ReportAllocs()
	var next atomic.Int64
	var wg sync.WaitGroup
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for range ceilingSenders {
		wg.Go(func() {
			for {
				end := next.Add(ceilingKeys)
				n := min(int64(ceilingKeys), int64(b.N)-(end-ceilingKeys))
				if n <= 0 {
					return
				}
				if err := round(ctx, int(n)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "keys/s")
}

// ceiling claims and marks n keys as the store sends them, gathered by hand:
// one pipeline of the store's claim script by EVALSHA, then one of SET PX.
func (w *claimMark) ceiling(ctx context.Context, n int) error {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = w.prefix + w.key().String()
	}
	claims := make([]*redis.Cmd, n)
	if _, err := w.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			claims[i] = rawClaim.EvalSha(ctx, p, []string{k}, benchToken, benchTTL.Milliseconds())
		}
		return nil
	}); err != nil {
		return err
	}
	for _, c := range claims {
		if v, err := c.Int64(); err != nil || v != 1 {
			return fmt.Errorf("pipelined claim = %v, %v", v, err)
		}
	}
	_, err := w.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Set(ctx, k, "m", benchTTL)
		}
		return nil
	})
	return err
}

// handoff is the least a store that answers each call can do to batch them:
// callers hand each command to ceilingSenders goroutines by channel, and wait
// for its answer on a channel of their own; each goroutine takes the first
// command waiting, and every other one queued meanwhile, up to ceilingKeys,
// and sends them in one pipeline (the store's claim script by EVALSHA, and
// SET PX). No context per round, no deadline, no abandoned calls, no error
// wrapping, no NOSCRIPT fallback: what is left is the hand-off, the cost that
// the ceiling, whose goroutines make up the keys they send, never pays.
type handoff struct {
	w    *claimMark
	reqs chan *handoffReq
}

type handoffReq struct {
	key   string
	claim bool
	done  chan error
}

// newHandoff starts the senders; they stop when b ends.
func newHandoff(b *testing.B, w *claimMark) *handoff {
	h := &handoff{w: w, reqs: make(chan *handoffReq, 256)}
	var wg sync.WaitGroup
	for range ceilingSenders {
		wg.Go(h.send)
	}
	b.Cleanup(func() { close(h.reqs); wg.Wait() })
	return h
}

func (h *handoff) send() {
	ctx := context.Background()
	batch := make([]*handoffReq, 0, ceilingKeys)
	cmds := make([]redis.Cmder, 0, ceilingKeys)
	for r := range h.reqs {
		batch = append(batch[:0], r)
	gather:
		for len(batch) < ceilingKeys {
			select {
			case r, ok := <-h.reqs:
				if !ok {
					break gather
				}
				batch = append(batch, r)
			default:
				break gather
			}
		}
		pl := h.w.client.Pipeline()
		cmds = cmds[:0]
		for _, r := range batch {
			if r.claim {
				cmds = append(cmds, rawClaim.EvalSha(ctx, pl, []string{r.key}, benchToken, benchTTL.Milliseconds()))
			} else {
				cmds = append(cmds, pl.Set(ctx, r.key, "m", benchTTL))
			}
		}
		_, _ = pl.Exec(ctx)
		for i, r := range batch {
			err := cmds[i].Err()
			if r.claim && err == nil {
				if v, _ := cmds[i].(*redis.Cmd).Int64(); v != 1 {
					err = fmt.Errorf("claim script on %s = %v", r.key, v)
				}
			}
			r.done <- err
		}
	}
}

// do hands one command to the senders and waits for its answer.
func (h *handoff) do(key string, claim bool) error {
	r := &handoffReq{key: key, claim: claim, done: make(chan error, 1)}
	h.reqs <- r
	return <-r.done
}

func (h *handoff) claimMark(_ context.Context, _ uint64) error {
	rk := h.w.prefix + h.w.key().String()
	if err := h.do(rk, true); err != nil {
		return err
	}
	return h.do(rk, false)
}

// BenchmarkExists measures Exists of a marked key by 64 callers beside a raw
// GET of it per call.
func BenchmarkExists(b *testing.B) {
	client := benchClient(b)
	ctx := context.Background()
	st := newStore(b, client, deduperedis.Config{Prefix: "dedupe-bench:" + randomID(b) + ":", TTL: benchTTL})
	k := dedupe.Key{Channel: "bench", MessageID: "present"}
	if err := st.Mark(ctx, k, 0); err != nil {
		b.Fatal(err)
	}
	rawKey := "dedupe-bench:" + randomID(b) + ":raw:bench:present"
	if err := client.Set(ctx, rawKey, "m", benchTTL).Err(); err != nil {
		b.Fatal(err)
	}
	contenders := []struct {
		name string
		op   func(ctx context.Context, _ uint64) error
	}{
		{"store", func(ctx context.Context, _ uint64) error {
			if ok, err := st.Exists(ctx, k); !ok || err != nil {
				return fmt.Errorf("Exists = %v, %v", ok, err)
			}
			return nil
		}},
		{"raw", func(ctx context.Context, _ uint64) error {
			if v, err := client.Get(ctx, rawKey).Result(); v != "m" || err != nil {
				return fmt.Errorf("GET = %q, %v", v, err)
			}
			return nil
		}},
	}
	for _, ct := range contenders {
		warmUp(b, ct.op)
	}
	for _, ct := range contenders {
		b.Run("impl="+ct.name, func(b *testing.B) { callers(b, 64, ct.op) })
	}
}

// BenchmarkClusterClaimMark measures Claim then Mark of new keys on the test
// cluster (DEDUPE_REDIS_CLUSTER_ADDRS) for 1, 8 and 64 concurrent callers:
// the store (impl=store), the store waiting for one replica's
// acknowledgement of each Mark and Claim (impl=replicas1, Config.Replicas 1),
// and the ClusterClient sending the same commands one round trip per call
// (impl=raw).
func BenchmarkClusterClaimMark(b *testing.B) {
	client := newClusterClient(b, clusterAddrs(b))
	w := &claimMark{client: client, prefix: "dedupe-bench:" + randomID(b) + ":"}
	w.st = newStore(b, client, deduperedis.Config{Prefix: w.prefix, TTL: benchTTL, Lease: benchTTL})
	durable := &claimMark{client: client, prefix: w.prefix + "r:"}
	durable.st = newStore(b, client, deduperedis.Config{Prefix: durable.prefix, TTL: benchTTL, Lease: benchTTL, Replicas: 1})
	contenders := []struct {
		name string
		op   func(ctx context.Context, _ uint64) error
	}{{"store", w.store}, {"replicas1", durable.store}, {"raw", w.raw}}
	for _, ct := range contenders {
		warmUp(b, ct.op)
	}
	for _, c := range benchCallers {
		for _, ct := range contenders {
			b.Run(fmt.Sprintf("callers=%d/impl=%s", c, ct.name), func(b *testing.B) {
				callers(b, c, ct.op)
			})
		}
	}
}

// BenchmarkMarkResult measures MarkResult of new keys with a result of 256
// bytes (a chat reply) and of 4 KiB (a webhook's answer), beside Mark of new
// keys (impl=mark), the work of the mark a successful DoResult and Do write,
// for 1, 8 and 64 concurrent callers; and the client alone setting the value
// of a 4 KiB result, one round trip per call (impl=raw4k).
func BenchmarkMarkResult(b *testing.B) {
	client := benchClient(b)
	w := &claimMark{client: client, prefix: "dedupe-bench:" + randomID(b) + ":"}
	w.st = newStore(b, client, deduperedis.Config{Prefix: w.prefix, TTL: benchTTL, Lease: benchTTL})
	raw4k := append([]byte("m:"), bytes.Repeat([]byte{0xa5}, 4<<10)...)
	withResult := func(size int) func(ctx context.Context, _ uint64) error {
		res := bytes.Repeat([]byte{0xa5}, size)
		return func(ctx context.Context, _ uint64) error { return w.st.MarkResult(ctx, w.key(), res, 0) }
	}
	contenders := []struct {
		name string
		op   func(ctx context.Context, _ uint64) error
	}{
		{"mark", func(ctx context.Context, _ uint64) error { return w.st.Mark(ctx, w.key(), 0) }},
		{"result256", withResult(256)},
		{"result4k", withResult(4 << 10)},
		{"raw4k", func(ctx context.Context, _ uint64) error {
			return client.Set(ctx, w.prefix+w.key().String(), raw4k, benchTTL).Err()
		}},
	}
	for _, ct := range contenders {
		warmUp(b, ct.op)
	}
	for _, c := range benchCallers {
		for _, ct := range contenders {
			b.Run(fmt.Sprintf("callers=%d/impl=%s", c, ct.name), func(b *testing.B) {
				callers(b, c, ct.op)
			})
		}
	}
}
