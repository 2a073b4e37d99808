package redis

import (
	"context"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/gatewaykit/dedupe"
)

func TestMs(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{time.Nanosecond, 1},
		{time.Millisecond, 1},
		{time.Millisecond + 1, 2},
		{1500 * time.Microsecond, 2},
		{24 * time.Hour, 86_400_000},
		{time.Duration(1<<63 - 1), (1<<63-1)/1_000_000 + 1},
	} {
		if got := ms(tc.d); got != tc.want {
			t.Errorf("ms(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

func TestClaimValue(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		v := newClaimValue()
		if len(v) != len(claimPrefix)+tokenLen || v[:len(claimPrefix)] != claimPrefix || !validToken(v[len(claimPrefix):]) {
			t.Fatalf("claim value %q", v)
		}
		if seen[v] {
			t.Fatalf("claim value %q made twice", v)
		}
		seen[v] = true
	}
	if validToken(markValue) {
		t.Fatal("the mark value passes as a token")
	}
}

func testAddr(t *testing.T) string {
	addr := os.Getenv("DEDUPE_REDIS_ADDR")
	if addr == "" {
		t.Skip("DEDUPE_REDIS_ADDR is not set; set it to a Redis server's address (for example 127.0.0.1:6379) to run the Redis tests")
	}
	return addr
}

// TestClaimRetried claims twice with the same claim value, as the client does
// when it retries a call whose reply was lost: the retry must still report the
// claim as this caller's, not as in flight.
func TestClaimRetried(t *testing.T) {
	client := goredis.NewClient(&goredis.Options{Addr: testAddr(t)})
	defer client.Close()
	ctx := context.Background()
	s, err := New(client, Config{Prefix: "dedupe-test:retry:"})
	if err != nil {
		t.Fatal(err)
	}
	k := dedupe.Key{Channel: "retry", MessageID: newClaimValue()[2:]}
	defer client.Del(ctx, s.key(k))
	val := newClaimValue()
	for i := range 2 {
		c, err := s.claim(ctx, k, val, time.Minute)
		if err != nil || c.Status != dedupe.Claimed || claimPrefix+c.Token != val {
			t.Fatalf("attempt %d: claim = %+v, %v; want claimed with %q", i, c, err, val)
		}
	}
	if c, err := s.Claim(ctx, k, time.Minute); err != nil || c.Status != dedupe.InFlight {
		t.Fatalf("another Claim = %+v, %v; want in flight", c, err)
	}
	if err := s.Mark(ctx, k, time.Minute); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Claim(ctx, k, time.Minute); err != nil || c.Status != dedupe.Duplicate {
		t.Fatalf("Claim after Mark = %+v, %v; want duplicate", c, err)
	}
}
