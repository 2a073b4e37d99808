package sequence

// Shard returns the worker, in [0, n), that key is routed to, so that all
// values of a key reach one worker and keep their order (see [Sequencer]). It
// panics if n <= 0.
//
// The mapping is fixed, the same in every process, on every platform and in
// every release of this module: the key's bytes are hashed with 64-bit FNV-1a,
// and the hash is mapped to a shard by Lamping and Veach's jump consistent hash
// ("A Fast, Minimal Memory, Consistent Hash Algorithm", 2014), as written in
// the paper. Any implementation of those two steps routes keys the same way.
// Jump hashing moves few keys when n changes: going from n to n+1 workers,
// only about 1/(n+1) of the keys move, all to the new worker. (A [hash/maphash]
// seed differs per process, so it could not route keys across processes.)
// Shard does not allocate.
func Shard(key string, n int) int {
	if n <= 0 {
		panic("dedupe: sequence: Shard with n <= 0")
	}
	// FNV-1a, 64-bit.
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	// Jump consistent hash.
	b, j := int64(-1), int64(0)
	for j < int64(n) {
		b = j
		h = h*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((h>>33)+1)))
	}
	return int(b)
}
