package dedupe

import (
	"testing"
	"unsafe"
)

// A shard is 128 bytes, so that the mutexes of adjacent shards never share a
// cache line.
func TestMemShardSize(t *testing.T) {
	if got := unsafe.Sizeof(memShard{}); got != 128 {
		t.Fatalf("memShard is %d bytes, want 128: fix its padding", got)
	}
}
