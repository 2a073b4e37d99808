package deduperedis_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
)

// resultPayloads are results a handler may return: any bytes, including ones
// that look like the store's own values, and the longest a store keeps.
func resultPayloads(t testing.TB) []struct {
	name string
	data []byte
} {
	every := make([]byte, 256)
	for i := range every {
		every[i] = byte(i)
	}
	longest := make([]byte, dedupe.MaxResultSize)
	_, err := rand.Read(longest)
	require.NoError(t, err)
	longest[0] = 'c' // a claim's first byte, the result's own
	return []struct {
		name string
		data []byte
	}{
		{"one byte", []byte("x")},
		{"NUL and high bytes", []byte{0, 0xff, 0x80, '\r', '\n', 0}},
		{"every byte", every},
		{"like a claim", []byte("c:0123456789abcdef0123456789abcdef tok")},
		{"like a release", []byte("r: tok1 tok2")},
		{"like a mark", []byte("m")},
		{"like a mark with a result", []byte("m:m:")},
		{"exactly MaxResultSize", longest},
	}
}

// TestResultRoundTrip marks keys with results of any bytes, up to exactly
// MaxResultSize: Result returns them, the key holds "m:" and the result, and
// the key is a mark to every other call: Exists finds it, Claim is answered
// Duplicate, and Extend and Release of a claim token find no claim and leave
// the value and its expiry as they were.
func TestResultRoundTrip(t *testing.T) { checkRoundTrip(t, newClient(t, redisAddr(t), nil)) }

func checkRoundTrip(t *testing.T, client redis.UniversalClient) {
	st := newStore(t, client, deduperedis.Config{})
	ctx := context.Background()
	for i, p := range resultPayloads(t) {
		t.Run(p.name, func(t *testing.T) {
			k := dedupe.Key{Channel: "result", MessageID: string(rune('a' + i))}
			raw := deduperedis.Prefix(st) + k.String()
			sent := bytes.Clone(p.data)
			require.NoError(t, st.MarkResult(ctx, k, sent, time.Hour), "MarkResult")
			clear(sent) // the store kept a copy
			checkResult(t, st, k, p.data)
			v, err := client.Get(ctx, raw).Result()
			require.NoError(t, err, "GET %s", raw)
			require.Equal(t, "m:"+string(p.data), v, "GET %s: want \"m:\" and the result", raw)
			ok, err := st.Exists(ctx, k)
			assert.NoError(t, err, "Exists")
			assert.True(t, ok, "Exists")
			c, status, err := claimNew(ctx, st, k, time.Minute)
			assert.NoError(t, err, "Claim")
			assert.Equal(t, dedupe.Duplicate, status, "Claim")
			assert.ErrorIs(t, st.Extend(ctx, c, time.Second), dedupe.ErrNotOwner, "Extend of a marked key")
			assert.ErrorIs(t, st.Release(ctx, c), dedupe.ErrNotOwner, "Release of a marked key")
			checkResult(t, st, k, p.data)
			ttl, err := client.PTTL(ctx, raw).Result()
			assert.NoError(t, err, "PTTL after Extend and Release")
			assert.GreaterOrEqual(t, ttl, 59*time.Minute, "PTTL after Extend and Release; want the mark's hour")
		})
	}
}

// checkResult checks that Result of k on st is marked with want (nil: marked
// without a result).
func checkResult(t *testing.T, st dedupe.Store, k dedupe.Key, want []byte) {
	t.Helper()
	got, marked, err := st.Result(context.Background(), k)
	require.NoError(t, err, "Result(%s)", k)
	require.True(t, marked, "Result(%s): want marked", k)
	require.Equal(t, want, got, "Result(%s)", k)
}

// TestResultStates checks what Result reports for each state of a key:
// absent, claimed, released and holding a value the store did not write are
// not marked; a mark without a result, and a mark written by the previous
// release (the value "m", set directly), are marked without one.
func TestResultStates(t *testing.T) { checkStates(t, newClient(t, redisAddr(t), nil)) }

func checkStates(t *testing.T, client redis.UniversalClient) {
	st := newStore(t, client, deduperedis.Config{})
	ctx := context.Background()
	key := func(id string) dedupe.Key { return dedupe.Key{Channel: "states", MessageID: id} }
	raw := func(k dedupe.Key) string { return deduperedis.Prefix(st) + k.String() }

	claimed := key("claimed")
	_, status, err := claimNew(ctx, st, claimed, time.Minute)
	require.NoError(t, err, "Claim")
	require.Equal(t, dedupe.Claimed, status, "Claim")
	released := key("released")
	c, _, _ := claimNew(ctx, st, released, time.Minute)
	require.NoError(t, st.Release(ctx, c))
	for _, set := range []struct{ key, value string }{
		{raw(key("old")), "m"}, {raw(key("foreign")), "maybe"}, {raw(key("colon only")), "m:"},
	} {
		require.NoError(t, client.Set(ctx, set.key, set.value, time.Minute).Err())
	}
	require.NoError(t, st.Mark(ctx, key("mark"), time.Minute))
	require.NoError(t, st.MarkResult(ctx, key("empty"), []byte{}, time.Minute))
	for _, tc := range []struct {
		id     string
		marked bool
	}{
		{"absent", false}, {"claimed", false}, {"released", false}, {"foreign", false},
		{"old", true}, {"mark", true}, {"empty", true}, {"colon only", true},
	} {
		k := key(tc.id)
		res, marked, err := st.Result(ctx, k)
		assert.NoError(t, err, "Result(%s)", tc.id)
		assert.Equal(t, tc.marked, marked, "Result(%s): marked", tc.id)
		assert.Nil(t, res, "Result(%s)", tc.id)
		ok, err := st.Exists(ctx, k)
		assert.NoError(t, err, "Exists(%s)", tc.id)
		assert.Equal(t, tc.marked, ok, "Exists(%s)", tc.id)
	}
	v, err := client.Get(ctx, raw(key("empty"))).Result()
	assert.NoError(t, err, "GET of a mark with an empty result")
	assert.Equal(t, "m", v, "GET of a mark with an empty result")
	// The previous release's mark is a duplicate, whose copies get no result.
	d := dedupe.New(st)
	defer d.Close()
	res, err := d.DoResult(ctx, key("old"), func(context.Context) ([]byte, error) {
		assert.Fail(t, "fn ran for a key marked by the previous release")
		return nil, nil
	})
	assert.ErrorIs(t, err, dedupe.ErrDuplicate, "DoResult of an old mark")
	assert.Nil(t, res, "DoResult of an old mark")
}

// TestResultTooLarge checks that a result one byte over MaxResultSize is
// refused with ErrTooLarge and writes nothing: not on a free key, and not
// over a claim, which keeps its value and lease.
func TestResultTooLarge(t *testing.T) { checkTooLarge(t, newClient(t, redisAddr(t), nil)) }

func checkTooLarge(t *testing.T, client redis.UniversalClient) {
	st := newStore(t, client, deduperedis.Config{})
	ctx := context.Background()
	big := make([]byte, dedupe.MaxResultSize+1)
	free := dedupe.Key{Channel: "large", MessageID: "free"}
	err := st.MarkResult(ctx, free, big, time.Minute)
	require.ErrorIs(t, err, dedupe.ErrTooLarge, "MarkResult of %d bytes", len(big))
	require.True(t, strings.HasPrefix(err.Error(), "dedupe: redis: mark large:free: "), "MarkResult of %d bytes = %v, want ErrTooLarge, wrapped", len(big), err)
	n, err := client.Exists(ctx, deduperedis.Prefix(st)+free.String()).Result()
	require.NoError(t, err, "EXISTS after a refused MarkResult")
	require.Zero(t, n, "EXISTS after a refused MarkResult")
	held := dedupe.Key{Channel: "large", MessageID: "held"}
	c, status, err := claimNew(ctx, st, held, time.Minute)
	require.NoError(t, err, "Claim")
	require.Equal(t, dedupe.Claimed, status, "Claim")
	require.ErrorIs(t, st.MarkResult(ctx, held, big, time.Hour), dedupe.ErrTooLarge, "MarkResult over a claim")
	v, err := client.Get(ctx, deduperedis.Prefix(st)+held.String()).Result()
	require.NoError(t, err, "claim after a refused MarkResult")
	require.Equal(t, "c:"+c.Token, v, "claim after a refused MarkResult")
	require.NoError(t, st.Extend(ctx, c, time.Minute), "Extend of the claim after a refused MarkResult")
}

// TestMarkDropsResult checks that a later Mark drops the result kept with
// the mark before it, and a later MarkResult replaces it.
func TestMarkDropsResult(t *testing.T) { checkMarkDrops(t, newClient(t, redisAddr(t), nil)) }

func checkMarkDrops(t *testing.T, client redis.UniversalClient) {
	st := newStore(t, client, deduperedis.Config{})
	ctx := context.Background()
	k := dedupe.Key{Channel: "drop", MessageID: "1"}
	steps := []struct {
		name   string
		result []byte // nil: Mark
		want   []byte
	}{
		{"MarkResult", []byte("first"), []byte("first")},
		{"MarkResult again", []byte("second"), []byte("second")},
		{"Mark", nil, nil},
		{"MarkResult after Mark", []byte("third"), []byte("third")},
		{"MarkResult empty", []byte{}, nil},
	}
	for _, s := range steps {
		var err error
		if s.result == nil {
			err = st.Mark(ctx, k, time.Minute)
		} else {
			err = st.MarkResult(ctx, k, s.result, time.Minute)
		}
		require.NoError(t, err, s.name)
		t.Run(s.name, func(t *testing.T) { checkResult(t, st, k, s.want) })
	}
}

// TestResultExpiry checks that a result lives as long as its mark, in the
// same key: MarkResult sets the TTL it is given (the configured TTL for 0),
// writes one key, and once that key expires Result reports the message
// neither marked nor with a result, and a Claim takes it.
func TestResultExpiry(t *testing.T) { checkExpiry(t, newClient(t, redisAddr(t), nil)) }

func checkExpiry(t *testing.T, client redis.UniversalClient) {
	st := newStore(t, client, deduperedis.Config{TTL: 2 * time.Hour})
	ctx := context.Background()
	prefix := deduperedis.Prefix(st)
	for _, tc := range []struct {
		id        string
		ttl, want time.Duration
	}{{"hour", time.Hour, time.Hour}, {"default", 0, 2 * time.Hour}} {
		k := dedupe.Key{Channel: "expiry", MessageID: tc.id}
		require.NoError(t, st.MarkResult(ctx, k, []byte("answer"), tc.ttl))
		ttl, err := client.PTTL(ctx, prefix+k.String()).Result()
		assert.NoError(t, err, "PTTL of MarkResult(ttl %v)", tc.ttl)
		assert.LessOrEqual(t, ttl, tc.want, "PTTL of MarkResult(ttl %v): want about %v", tc.ttl, tc.want)
		assert.GreaterOrEqual(t, ttl, tc.want-time.Minute, "PTTL of MarkResult(ttl %v): want about %v", tc.ttl, tc.want)
	}
	assert.Len(t, keysUnder(t, client, prefix), 2, "keys under the prefix; want one per message")

	// Redis decides expiry by its own clock: a 1 ms mark is gone at once, or
	// nearly, so the test polls for it rather than sleeping for a TTL.
	k := dedupe.Key{Channel: "expiry", MessageID: "short"}
	require.NoError(t, st.MarkResult(ctx, k, []byte("answer"), time.Millisecond))
	until(t, "the mark and its result to expire", func() bool {
		res, marked, err := st.Result(ctx, k)
		require.NoError(t, err, "Result")
		if !marked {
			require.Nil(t, res, "Result of a key not marked")
		}
		return !marked
	})
	_, status, err := claimNew(ctx, st, k, time.Minute)
	require.NoError(t, err, "Claim after expiry")
	require.Equal(t, dedupe.Claimed, status, "Claim after expiry")
}

// TestResultNoIO checks the errors that MarkResult and Result return before
// any I/O (the client points at a port where nothing listens), and the
// wrapping of a Redis error.
func TestResultNoIO(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = client.Close() })
	st, err := deduperedis.New(client, deduperedis.Config{})
	require.NoError(t, err)
	ctx := context.Background()
	bad := dedupe.Key{Channel: "a:b", MessageID: "1"}
	assert.ErrorIs(t, st.MarkResult(ctx, bad, []byte("x"), 0), dedupe.ErrInvalidKey, "MarkResult(invalid)")
	_, _, err = st.Result(ctx, bad)
	assert.ErrorIs(t, err, dedupe.ErrInvalidKey, "Result(invalid)")
	good := dedupe.Key{Channel: "telegram", MessageID: "1"}
	assert.ErrorIs(t, st.MarkResult(ctx, good, make([]byte, dedupe.MaxResultSize+1), 0), dedupe.ErrTooLarge, "MarkResult(too large)")
	err = st.MarkResult(ctx, good, []byte("x"), 0)
	if assert.Error(t, err, "MarkResult with no server") {
		assert.True(t, strings.HasPrefix(err.Error(), "dedupe: redis: mark telegram:1: "), "MarkResult with no server = %v, want a wrapped error", err)
	}
	res, marked, err := st.Result(ctx, good)
	if assert.Error(t, err, "Result with no server") {
		assert.True(t, strings.HasPrefix(err.Error(), "dedupe: redis: result telegram:1: "), "Result with no server = %v, want a wrapped error", err)
	}
	assert.Nil(t, res, "Result with no server")
	assert.False(t, marked, "Result with no server")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, _, err = st.Result(cancelled, good)
	assert.ErrorIs(t, err, context.Canceled, "Result(cancelled)")
	require.NoError(t, st.Close())
	assert.ErrorIs(t, st.MarkResult(ctx, good, []byte("x"), 0), dedupe.ErrClosed, "MarkResult after Close")
	_, _, err = st.Result(ctx, good)
	assert.ErrorIs(t, err, dedupe.ErrClosed, "Result after Close")
}

// TestMarkResultReplicas runs MarkResult on a store with Replicas 1 on the
// shared server, which has no replica: the mark and its result are applied
// but MarkResult fails with ErrNotReplicated after the WAIT, as Mark does;
// Result waits for no replica.
func TestMarkResultReplicas(t *testing.T) {
	client := newClient(t, redisAddr(t), nil)
	const timeout = 50 * time.Millisecond
	st := newStore(t, client, deduperedis.Config{Replicas: 1, ReplicaTimeout: timeout})
	ctx := context.Background()
	k := dedupe.Key{Channel: "replicas", MessageID: "result"}
	start := time.Now()
	require.ErrorIs(t, st.MarkResult(ctx, k, []byte("answer"), time.Minute), deduperedis.ErrNotReplicated, "MarkResult")
	assert.GreaterOrEqual(t, time.Since(start), timeout, "MarkResult returned before the WAIT's timeout")
	checkResult(t, st, k, []byte("answer"))
}

// keysUnder returns the keys that start with prefix, on every master of a
// cluster, but for the layout record.
func keysUnder(t *testing.T, client redis.UniversalClient, prefix string) []string {
	t.Helper()
	ctx := context.Background()
	cluster, ok := client.(*redis.ClusterClient)
	if !ok {
		keys, err := client.Keys(ctx, prefix+"*").Result()
		require.NoError(t, err)
		return slices.DeleteFunc(keys, func(k string) bool { return k == prefix+deduperedis.LayoutKey })
	}
	var mu sync.Mutex
	var keys []string
	err := cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		ks, err := node.Keys(ctx, prefix+"*").Result()
		mu.Lock()
		keys = append(keys, ks...)
		mu.Unlock()
		return err
	})
	require.NoError(t, err)
	return slices.DeleteFunc(keys, func(k string) bool { return k == prefix+deduperedis.LayoutKey })
}
