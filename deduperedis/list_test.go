package deduperedis_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
)

// walk returns every mark ListMarks yields, page by page from cursor, and
// the cursors it passed.
func walk(t *testing.T, s *deduperedis.Store, cursor string, limit int) (map[dedupe.Key]time.Time, []string) {
	t.Helper()
	got := map[dedupe.Key]time.Time{}
	var cursors []string
	for {
		next, err := s.ListMarks(context.Background(), cursor, limit, func(k dedupe.Key, exp time.Time) { got[k] = exp })
		if err != nil {
			t.Fatal(err)
		}
		if next == "" {
			return got, cursors
		}
		cursors = append(cursors, next)
		cursor = next
	}
}

// checkListing writes n marks with MarkUntil, a claim and a released key,
// and checks that a walk yields every mark once with its expiry (to the
// millisecond PTTL keeps, and the round trip), and nothing else; that a walk
// resumed from a cursor half way yields every mark not yet yielded; that a
// second MarkUntil finds them present and never shortens them; and CountLive.
func checkListing(t *testing.T, client redis.UniversalClient, n int) {
	ctx := context.Background()
	s := newStore(t, client, deduperedis.Config{})
	keys := make([]dedupe.Key, n)
	exps := make([]time.Time, n)
	for i := range keys {
		keys[i] = dedupe.Key{Channel: "web", MessageID: fmt.Sprintf("room:%d", i)}
		exps[i] = time.Now().Add(time.Hour + time.Duration(i)*time.Second)
	}
	present, err := s.MarkUntil(ctx, keys, exps)
	if err != nil || present != 0 {
		t.Fatalf("MarkUntil: %d present, %v", present, err)
	}
	c := dedupe.NewClaim(dedupe.Key{Channel: "web", MessageID: "claimed"})
	if _, err := s.Claim(ctx, c, time.Hour); err != nil {
		t.Fatal(err)
	}
	r := dedupe.NewClaim(dedupe.Key{Channel: "web", MessageID: "released"})
	if _, err := s.Claim(ctx, r, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, cursors := walk(t, s, "", 100)
	if len(got) != n {
		t.Fatalf("walk found %d marks, want %d", len(got), n)
	}
	for i, k := range keys {
		if d := got[k].Sub(exps[i]); math.Abs(d.Seconds()) > 0.5 {
			t.Fatalf("%s: expiry off by %v", k, d)
		}
	}
	// Resumed half way: the rest, which with the first half makes them all.
	first := map[dedupe.Key]time.Time{}
	cursor := ""
	for range len(cursors) / 2 {
		cursor, err = s.ListMarks(ctx, cursor, 100, func(k dedupe.Key, exp time.Time) { first[k] = exp })
		if err != nil {
			t.Fatal(err)
		}
	}
	rest, _ := walk(t, s, cursor, 100)
	for k := range rest {
		first[k] = rest[k]
	}
	if len(first) != n {
		t.Fatalf("a walk resumed from %q found %d marks in all, want %d", cursor, len(first), n)
	}
	// Again, with the first key shorter: all present, none shortened.
	short := append([]time.Time(nil), exps...)
	short[0] = time.Now().Add(time.Minute)
	if present, err := s.MarkUntil(ctx, keys, short); err != nil || present != n {
		t.Fatalf("MarkUntil again: %d present, %v", present, err)
	}
	marks, claims, oldest, newest, err := s.CountLive(ctx)
	if err != nil || marks != int64(n) || claims != 1 {
		t.Fatalf("CountLive: %d marks, %d claims, %v", marks, claims, err)
	}
	if math.Abs(oldest.Sub(exps[0]).Seconds()) > 0.5 || math.Abs(newest.Sub(exps[n-1]).Seconds()) > 0.5 {
		t.Fatalf("CountLive: oldest %v newest %v, want %v and %v", oldest, newest, exps[0], exps[n-1])
	}
	// A mark kept with a result is listed, counted present and keeps its result.
	rk := dedupe.Key{Channel: "web", MessageID: "with-result"}
	if err := s.MarkResult(ctx, rk, []byte("reply"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if present, err := s.MarkUntil(ctx, []dedupe.Key{rk}, []time.Time{time.Now().Add(time.Hour)}); err != nil || present != 1 {
		t.Fatalf("MarkUntil over a mark with a result: %d present, %v", present, err)
	}
	if res, ok, err := s.Result(ctx, rk); err != nil || !ok || string(res) != "reply" {
		t.Fatalf("Result after MarkUntil: %q %v %v", res, ok, err)
	}
	if got, _ := walk(t, s, "", 1000); got[rk].Before(time.Now().Add(59 * time.Minute)) {
		t.Fatalf("the mark with a result is listed with expiry %v", got[rk])
	}
	// MarkUntil replaces a claim.
	if present, err := s.MarkUntil(ctx, []dedupe.Key{c.Key}, []time.Time{time.Now().Add(time.Hour)}); err != nil || present != 0 {
		t.Fatalf("MarkUntil over a claim: %d present, %v", present, err)
	}
	if ok, err := s.Exists(ctx, c.Key); err != nil || !ok {
		t.Fatalf("the claim was not replaced by a mark: %v %v", ok, err)
	}
}

// The walk and the bulk writes of package migrate on one server.
func TestListMarks(t *testing.T) {
	t.Parallel()
	checkListing(t, newClient(t, redisAddr(t), nil), 1500)
}

// The same on a private cluster of three masters: the walk scans each in
// turn, and its cursors name them.
func TestClusterListMarks(t *testing.T) {
	t.Parallel()
	redisAddr(t)
	nodes := startCluster(t, 3)
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	checkListing(t, client, 1500)
}
