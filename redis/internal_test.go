package redis

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	goredis "github.com/redis/go-redis/v9"
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

// TestClaimRetried runs the claim script twice with the same value, as the
// client does when it retries a call whose reply was lost: the retry must
// still report the claim as this caller's, not as in flight.
func TestClaimRetried(t *testing.T) {
	addr := os.Getenv("DEDUPE_REDIS_ADDR")
	if addr == "" {
		t.Skip("DEDUPE_REDIS_ADDR is not set; set it to a Redis server's address (for example 127.0.0.1:6379) to run the Redis tests")
	}
	client := goredis.NewClient(&goredis.Options{Addr: addr})
	defer client.Close()
	ctx := context.Background()
	key := "dedupe-test:retry:" + newClaimValue()
	defer client.Del(ctx, key)
	val := newClaimValue()
	for i := range 2 {
		got, err := claimScript.Run(ctx, client, []string{key}, val, 60_000).Text()
		if err != nil || got != val {
			t.Fatalf("attempt %d: claim script = %q, %v; want %q", i, got, err, val)
		}
	}
	got, err := claimScript.Run(ctx, client, []string{key}, newClaimValue(), 60_000).Text()
	if err != nil || got != val {
		t.Fatalf("another claim = %q, %v; want the held value %q", got, err, val)
	}

	// Through the store: a retried Claim reads as Claimed, another as InFlight.
	s, err := New(client, Config{Prefix: "dedupe-test:retry:"})
	if err != nil {
		t.Fatal(err)
	}
	k := dedupe.Key{Channel: "retry", MessageID: newClaimValue()[2:]}
	defer client.Del(ctx, s.key(k))
	c, err := s.Claim(ctx, k, time.Minute)
	if err != nil || c.Status != dedupe.Claimed {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	if c2, err := s.Claim(ctx, k, time.Minute); err != nil || c2.Status != dedupe.InFlight {
		t.Fatalf("second Claim = %+v, %v", c2, err)
	}
}
