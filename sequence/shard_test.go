package sequence_test

import (
	"hash/fnv"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe/sequence"
)

// jumpReference is the jump consistent hash as printed in Lamping and
// Veach's paper.
func jumpReference(key uint64, n int32) int32 {
	b, j := int64(-1), int64(0)
	for j < int64(n) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int32(b)
}

func TestShard(t *testing.T) {
	// Vectors of the reference jump hash, as other implementations test it.
	for _, v := range []struct {
		key  uint64
		n    int32
		want int32
	}{{1, 1, 0}, {42, 57, 43}, {0xDEAD10CC, 1, 0}, {0xDEAD10CC, 666, 361}, {256, 1024, 520}} {
		require.Equal(t, v.want, jumpReference(v.key, v.n), "jumpReference(%d, %d)", v.key, v.n)
	}
	// Shard is FNV-1a then the reference jump hash.
	for i := range 2000 {
		key := "chat-" + strconv.Itoa(i*7919)
		h := fnv.New64a()
		h.Write([]byte(key))
		for _, n := range []int{1, 2, 3, 8, 100, 1 << 20} {
			require.Equal(t, int(jumpReference(h.Sum64(), int32(n))), sequence.Shard(key, n), "Shard(%q, %d)", key, n)
		}
	}
	// Pinned: these must never change, or keys move between processes of
	// different releases.
	for _, v := range []struct {
		key  string
		n    int
		want int
	}{
		{"", 16, 13}, {"telegram:912345678", 4, 2}, {"chat-1", 8, 0}, {"oc_5ce6d572455d361153b7xx51da133945", 10, 7},
	} {
		assert.Equal(t, v.want, sequence.Shard(v.key, v.n), "Shard(%q, %d) is pinned", v.key, v.n)
	}
}

func TestShardSpreadAndMoves(t *testing.T) {
	const keys = 20000
	for _, n := range []int{2, 7, 16} {
		counts := make([]int, n)
		moved := 0
		for i := range keys {
			key := "conversation/" + strconv.Itoa(i)
			sh := sequence.Shard(key, n)
			require.True(t, 0 <= sh && sh < n, "Shard(%q, %d) = %d, out of range", key, n, sh)
			counts[sh]++
			if grown := sequence.Shard(key, n+1); grown != sh {
				require.Equal(t, n, grown, "Shard(%q): from %d to %d workers, moved from %d, not to the new worker", key, n, n+1, sh)
				moved++
			}
		}
		for i, c := range counts {
			assert.InDelta(t, keys/n, c, float64(keys/n)*0.2, "n=%d: keys in shard %d", n, i)
		}
		want := keys / (n + 1)
		assert.InDelta(t, want, moved, float64(want)*0.2, "n=%d: keys moved to the new worker", n)
	}
}

func TestShardPanicsOnNoWorkers(t *testing.T) {
	for _, n := range []int{0, -1} {
		assert.PanicsWithValue(t, "dedupe: sequence: Shard with n <= 0", func() { sequence.Shard("key", n) }, "n = %d", n)
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() { sequence.Shard("telegram:912345678", 8) }), "Shard: allocs")
}
