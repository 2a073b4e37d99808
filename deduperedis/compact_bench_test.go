package deduperedis_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
)

// layout is a layout of the store the compact benchmarks compare.
type layout struct {
	name    string
	compact bool
	shards  int // Config.Shards
}

// layouts are the two layouts the compact benchmarks compare, the plain one
// first: the baseline.
var layouts = []layout{{"plain", false, 0}, {"compact", true, 0}}

// sparse is the compact layout with so many shards that nearly every Mark
// of a benchmark makes a bucket of its own and sends its PEXPIREATs: the
// worst case for the bucket expiries a store remembers (compact.go,
// expiries), which in steady traffic spare about seven Marks in eight.
var sparse = layout{"compact-sparse", true, 1 << 22}

// BenchmarkCompact measures, on the shared test server, Claim then Mark of
// new keys and Exists of marked keys by 64 callers, on the plain layout (the
// baseline) and the compact one ([deduperedis.Config.Compact]), one after the
// other in the same run, and Claim then Mark on the sparse compact layout
// (the worst case of its bucket expiries). Compare the layouts' keys/s run
// by run.
func BenchmarkCompact(b *testing.B) {
	client := benchClient(b)
	ctx := context.Background()
	for _, l := range append(layouts, sparse) {
		w := &claimMark{client: client, prefix: "dedupe-bench-credis:" + randomID(b) + ":"}
		w.st = newStore(b, client, deduperedis.Config{Prefix: w.prefix, TTL: benchTTL, Lease: benchTTL,
			Compact: l.compact, Shards: l.shards})
		warmUp(b, w.store)
		b.Run("op=claimmark/layout="+l.name, func(b *testing.B) { callers(b, 64, w.store) })
	}
	const present = 1024
	for _, l := range layouts {
		st := newStore(b, client, deduperedis.Config{Prefix: "dedupe-bench-credis:" + randomID(b) + ":",
			TTL: benchTTL, Compact: l.compact})
		keys := make([]dedupe.Key, present)
		for i := range keys {
			keys[i] = dedupe.Key{Channel: "bench", MessageID: strconv.Itoa(1_000_000_000 + i)}
		}
		for _, err := range st.MarkEach(ctx, keys, nil, 0) {
			if err != nil {
				b.Fatal(err)
			}
		}
		exists := func(ctx context.Context, i uint64) error {
			k := keys[i%present]
			if ok, err := st.Exists(ctx, k); !ok || err != nil {
				return fmt.Errorf("Exists(%s) = %v, %v", k, ok, err)
			}
			return nil
		}
		warmUp(b, exists)
		b.Run("op=exists/layout="+l.name, func(b *testing.B) { callers(b, 64, exists) })
	}
}

// hashtables returns how many hashes of the server Redis keeps as a
// hashtable, not a listpack.
func hashtables(b *testing.B, client *redis.Client) int64 {
	ctx := context.Background()
	var n atomic.Int64
	iter := client.ScanType(ctx, 0, "*", 1000, "hash").Iterator()
	for iter.Next(ctx) {
		if enc, err := client.ObjectEncoding(ctx, iter.Val()).Result(); err == nil && enc == "hashtable" {
			n.Add(1)
		}
	}
	if err := iter.Err(); err != nil {
		b.Fatal(err)
	}
	return n.Load()
}
