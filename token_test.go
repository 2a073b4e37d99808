package dedupe_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
)

// tokenMakers are the ways of making a claim token that
// BenchmarkToken and BenchmarkMemoryClaimMarkToken compare: NewClaim's, and
// the simpler forms it must beat to be kept.
var tokenMakers = []struct {
	name string
	make func() string
}{
	{"newclaim", func() string { return dedupe.NewClaim(key1).Token }},
	{"randread", func() string { // one crypto/rand read a token
		var b [16]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}},
	{"text", rand.Text},
	{"pooled", pooledToken}, // 4 KiB of crypto/rand bytes per read, a token copied out
}

// pooledBytes is random bytes not yet used, for pooledToken.
type pooledBytes struct{ b []byte }

var pooledRandom = sync.Pool{New: func() any { return new(pooledBytes) }}

func pooledToken() string {
	p := pooledRandom.Get().(*pooledBytes)
	if len(p.b) < 16 {
		p.b = make([]byte, 4096)
		_, _ = rand.Read(p.b)
	}
	var dst [32]byte
	hex.Encode(dst[:], p.b[:16])
	p.b = p.b[16:]
	pooledRandom.Put(p)
	return string(dst[:])
}

// BenchmarkToken makes tokens from every core (run it with -cpu 1,2).
func BenchmarkToken(b *testing.B) {
	for _, tm := range tokenMakers {
		b.Run("impl="+tm.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuTime()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if len(tm.make()) < 26 {
						b.Error("short token")
					}
				}
			})
			reportCPU(b, cpu)
		})
	}
}

// BenchmarkMemoryClaimMarkToken is BenchmarkMemoryClaimMarkParallel's dedupe
// store with each way of making the token.
func BenchmarkMemoryClaimMarkToken(b *testing.B) {
	var impls []contender
	for _, tm := range tokenMakers {
		impls = append(impls, contender{tm.name, func(bk benchKeys) (func(int), func()) {
			ctx := context.Background()
			st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: benchSize})
			for _, k := range bk.keys[:benchSize] {
				_ = st.Mark(ctx, k, time.Hour)
			}
			return func(i int) {
				c := dedupe.Claim{Key: bk.keys[i], Token: tm.make()}
				if status, _ := st.Claim(ctx, c, time.Minute); status == dedupe.Claimed {
					_ = st.Mark(ctx, c.Key, time.Hour)
				}
			}, func() { _ = st.Close() }
		}})
	}
	runParallel(b, impls)
}
