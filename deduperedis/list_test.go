package deduperedis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

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
		require.NoError(t, err)
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
	require.NoError(t, err, "MarkUntil")
	require.Zero(t, present, "MarkUntil: present")
	c := dedupe.NewClaim(dedupe.Key{Channel: "web", MessageID: "claimed"})
	_, err = s.Claim(ctx, c, time.Hour)
	require.NoError(t, err)
	r := dedupe.NewClaim(dedupe.Key{Channel: "web", MessageID: "released"})
	_, err = s.Claim(ctx, r, time.Hour)
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, r))
	got, cursors := walk(t, s, "", 100)
	require.Len(t, got, n, "walk found marks")
	for i, k := range keys {
		require.WithinDuration(t, exps[i], got[k], 500*time.Millisecond, "%s: expiry", k)
	}
	// Resumed half way: the rest, which with the first half makes them all.
	first := map[dedupe.Key]time.Time{}
	cursor := ""
	for range len(cursors) / 2 {
		cursor, err = s.ListMarks(ctx, cursor, 100, func(k dedupe.Key, exp time.Time) { first[k] = exp })
		require.NoError(t, err)
	}
	rest, _ := walk(t, s, cursor, 100)
	for k := range rest {
		first[k] = rest[k]
	}
	require.Len(t, first, n, "a walk resumed from %q found marks in all", cursor)
	// Again, with the first key shorter: all present, none shortened.
	short := append([]time.Time(nil), exps...)
	short[0] = time.Now().Add(time.Minute)
	present, err = s.MarkUntil(ctx, keys, short)
	require.NoError(t, err, "MarkUntil again")
	require.Equal(t, n, present, "MarkUntil again: present")
	marks, claims, oldest, newest, err := s.CountLive(ctx)
	require.NoError(t, err, "CountLive")
	require.Equal(t, int64(n), marks, "CountLive: marks")
	require.Equal(t, int64(1), claims, "CountLive: claims")
	require.WithinDuration(t, exps[0], oldest, 500*time.Millisecond, "CountLive: oldest")
	require.WithinDuration(t, exps[n-1], newest, 500*time.Millisecond, "CountLive: newest")
	// A mark kept with a result is listed, counted present and keeps its result.
	rk := dedupe.Key{Channel: "web", MessageID: "with-result"}
	require.NoError(t, s.MarkResult(ctx, rk, []byte("reply"), time.Minute))
	present, err = s.MarkUntil(ctx, []dedupe.Key{rk}, []time.Time{time.Now().Add(time.Hour)})
	require.NoError(t, err, "MarkUntil over a mark with a result")
	require.Equal(t, 1, present, "MarkUntil over a mark with a result: present")
	res, ok, err := s.Result(ctx, rk)
	require.NoError(t, err, "Result after MarkUntil")
	require.True(t, ok, "Result after MarkUntil")
	require.Equal(t, "reply", string(res), "Result after MarkUntil")
	got, _ = walk(t, s, "", 1000)
	require.False(t, got[rk].Before(time.Now().Add(59*time.Minute)), "the mark with a result is listed with expiry %v", got[rk])
	// MarkUntil replaces a claim.
	present, err = s.MarkUntil(ctx, []dedupe.Key{c.Key}, []time.Time{time.Now().Add(time.Hour)})
	require.NoError(t, err, "MarkUntil over a claim")
	require.Zero(t, present, "MarkUntil over a claim: present")
	ok, err = s.Exists(ctx, c.Key)
	require.NoError(t, err, "the claim was not replaced by a mark")
	require.True(t, ok, "the claim was not replaced by a mark")
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
