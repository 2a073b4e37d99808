package deduperedis_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
	if _, err := rand.Read(longest); err != nil {
		t.Fatal(err)
	}
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
			if err := st.MarkResult(ctx, k, sent, time.Hour); err != nil {
				t.Fatalf("MarkResult: %v", err)
			}
			clear(sent) // the store kept a copy
			checkResult(t, st, k, p.data)
			if v, err := client.Get(ctx, raw).Result(); err != nil || v != "m:"+string(p.data) {
				t.Fatalf("GET %s = %.20q (%d bytes), %v; want \"m:\" and the result", raw, v, len(v), err)
			}
			if ok, err := st.Exists(ctx, k); !ok || err != nil {
				t.Errorf("Exists = %v, %v", ok, err)
			}
			c, status, err := claimNew(ctx, st, k, time.Minute)
			if status != dedupe.Duplicate || err != nil {
				t.Errorf("Claim = %v, %v; want Duplicate", status, err)
			}
			if err := st.Extend(ctx, c, time.Second); !errors.Is(err, dedupe.ErrNotOwner) {
				t.Errorf("Extend of a marked key = %v, want ErrNotOwner", err)
			}
			if err := st.Release(ctx, c); !errors.Is(err, dedupe.ErrNotOwner) {
				t.Errorf("Release of a marked key = %v, want ErrNotOwner", err)
			}
			checkResult(t, st, k, p.data)
			if ttl, err := client.PTTL(ctx, raw).Result(); err != nil || ttl < 59*time.Minute {
				t.Errorf("PTTL after Extend and Release = %v, %v; want the mark's hour", ttl, err)
			}
		})
	}
}

// checkResult checks that Result of k on st is marked with want (nil: marked
// without a result).
func checkResult(t *testing.T, st dedupe.Store, k dedupe.Key, want []byte) {
	t.Helper()
	got, marked, err := st.Result(context.Background(), k)
	switch {
	case err != nil || !marked:
		t.Fatalf("Result(%s) = %v, %v; want marked", k, marked, err)
	case want == nil && got != nil:
		t.Fatalf("Result(%s) = %q, want none", k, got)
	case !bytes.Equal(got, want):
		t.Fatalf("Result(%s) = %d bytes %.20q, want %d bytes %.20q", k, len(got), got, len(want), want)
	}
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
	if _, status, err := claimNew(ctx, st, claimed, time.Minute); status != dedupe.Claimed || err != nil {
		t.Fatalf("Claim = %v, %v", status, err)
	}
	released := key("released")
	c, _, _ := claimNew(ctx, st, released, time.Minute)
	if err := st.Release(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, set := range []struct{ key, value string }{
		{raw(key("old")), "m"}, {raw(key("foreign")), "maybe"}, {raw(key("colon only")), "m:"},
	} {
		if err := client.Set(ctx, set.key, set.value, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Mark(ctx, key("mark"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkResult(ctx, key("empty"), []byte{}, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id     string
		marked bool
	}{
		{"absent", false}, {"claimed", false}, {"released", false}, {"foreign", false},
		{"old", true}, {"mark", true}, {"empty", true}, {"colon only", true},
	} {
		k := key(tc.id)
		res, marked, err := st.Result(ctx, k)
		if marked != tc.marked || res != nil || err != nil {
			t.Errorf("Result(%s) = %q, %v, %v; want nil, %v", tc.id, res, marked, err, tc.marked)
		}
		if ok, err := st.Exists(ctx, k); ok != tc.marked || err != nil {
			t.Errorf("Exists(%s) = %v, %v; want %v", tc.id, ok, err, tc.marked)
		}
	}
	if v, err := client.Get(ctx, raw(key("empty"))).Result(); v != "m" || err != nil {
		t.Errorf("GET of a mark with an empty result = %q, %v; want \"m\"", v, err)
	}
	// The previous release's mark is a duplicate, whose copies get no result.
	d := dedupe.New(st)
	defer d.Close()
	res, err := d.DoResult(ctx, key("old"), func(context.Context) ([]byte, error) {
		t.Error("fn ran for a key marked by the previous release")
		return nil, nil
	})
	if !errors.Is(err, dedupe.ErrDuplicate) || res != nil {
		t.Errorf("DoResult of an old mark = %q, %v; want nil, ErrDuplicate", res, err)
	}
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
	if !errors.Is(err, dedupe.ErrTooLarge) || !strings.HasPrefix(err.Error(), "dedupe: redis: mark large:free: ") {
		t.Fatalf("MarkResult of %d bytes = %v, want ErrTooLarge, wrapped", len(big), err)
	}
	if n, err := client.Exists(ctx, deduperedis.Prefix(st)+free.String()).Result(); n != 0 || err != nil {
		t.Fatalf("EXISTS after a refused MarkResult = %d, %v", n, err)
	}
	held := dedupe.Key{Channel: "large", MessageID: "held"}
	c, status, err := claimNew(ctx, st, held, time.Minute)
	if status != dedupe.Claimed || err != nil {
		t.Fatalf("Claim = %v, %v", status, err)
	}
	if err := st.MarkResult(ctx, held, big, time.Hour); !errors.Is(err, dedupe.ErrTooLarge) {
		t.Fatalf("MarkResult over a claim = %v, want ErrTooLarge", err)
	}
	if v, err := client.Get(ctx, deduperedis.Prefix(st)+held.String()).Result(); v != "c:"+c.Token || err != nil {
		t.Fatalf("claim after a refused MarkResult = %q, %v", v, err)
	}
	if err := st.Extend(ctx, c, time.Minute); err != nil {
		t.Fatalf("Extend of the claim after a refused MarkResult: %v", err)
	}
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
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
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
		if err := st.MarkResult(ctx, k, []byte("answer"), tc.ttl); err != nil {
			t.Fatal(err)
		}
		ttl, err := client.PTTL(ctx, prefix+k.String()).Result()
		if err != nil || ttl > tc.want || ttl < tc.want-time.Minute {
			t.Errorf("PTTL of MarkResult(ttl %v) = %v, %v; want about %v", tc.ttl, ttl, err, tc.want)
		}
	}
	if keys := keysUnder(t, client, prefix); len(keys) != 2 {
		t.Errorf("keys under the prefix = %q; want one per message", keys)
	}

	// Redis decides expiry by its own clock: a 1 ms mark is gone at once, or
	// nearly, so the test polls for it rather than sleeping for a TTL.
	k := dedupe.Key{Channel: "expiry", MessageID: "short"}
	if err := st.MarkResult(ctx, k, []byte("answer"), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	until(t, "the mark and its result to expire", func() bool {
		res, marked, err := st.Result(ctx, k)
		if err != nil || res != nil && !marked {
			t.Fatalf("Result = %q, %v, %v", res, marked, err)
		}
		return !marked
	})
	if _, status, err := claimNew(ctx, st, k, time.Minute); status != dedupe.Claimed || err != nil {
		t.Fatalf("Claim after expiry = %v, %v", status, err)
	}
}

// TestResultNoIO checks the errors that MarkResult and Result return before
// any I/O (the client points at a port where nothing listens), and the
// wrapping of a Redis error.
func TestResultNoIO(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = client.Close() })
	st, err := deduperedis.New(client, deduperedis.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bad := dedupe.Key{Channel: "a:b", MessageID: "1"}
	if err := st.MarkResult(ctx, bad, []byte("x"), 0); !errors.Is(err, dedupe.ErrInvalidKey) {
		t.Errorf("MarkResult(invalid) = %v, want ErrInvalidKey", err)
	}
	if _, _, err := st.Result(ctx, bad); !errors.Is(err, dedupe.ErrInvalidKey) {
		t.Errorf("Result(invalid) = %v, want ErrInvalidKey", err)
	}
	good := dedupe.Key{Channel: "telegram", MessageID: "1"}
	if err := st.MarkResult(ctx, good, make([]byte, dedupe.MaxResultSize+1), 0); !errors.Is(err, dedupe.ErrTooLarge) {
		t.Errorf("MarkResult(too large) = %v, want ErrTooLarge", err)
	}
	if err := st.MarkResult(ctx, good, []byte("x"), 0); err == nil || !strings.HasPrefix(err.Error(), "dedupe: redis: mark telegram:1: ") {
		t.Errorf("MarkResult with no server = %v, want a wrapped error", err)
	}
	res, marked, err := st.Result(ctx, good)
	if err == nil || !strings.HasPrefix(err.Error(), "dedupe: redis: result telegram:1: ") || res != nil || marked {
		t.Errorf("Result with no server = %q, %v, %v; want a wrapped error", res, marked, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := st.Result(cancelled, good); !errors.Is(err, context.Canceled) {
		t.Errorf("Result(cancelled) = %v, want context.Canceled", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkResult(ctx, good, []byte("x"), 0); !errors.Is(err, dedupe.ErrClosed) {
		t.Errorf("MarkResult after Close = %v, want ErrClosed", err)
	}
	if _, _, err := st.Result(ctx, good); !errors.Is(err, dedupe.ErrClosed) {
		t.Errorf("Result after Close = %v, want ErrClosed", err)
	}
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
	if err := st.MarkResult(ctx, k, []byte("answer"), time.Minute); !errors.Is(err, deduperedis.ErrNotReplicated) {
		t.Fatalf("MarkResult = %v, want ErrNotReplicated", err)
	}
	if d := time.Since(start); d < timeout {
		t.Errorf("MarkResult returned after %v, before the WAIT's %v", d, timeout)
	}
	checkResult(t, st, k, []byte("answer"))
}

// keysUnder returns the keys that start with prefix, on every master of a
// cluster.
func keysUnder(t *testing.T, client redis.UniversalClient, prefix string) []string {
	t.Helper()
	ctx := context.Background()
	cluster, ok := client.(*redis.ClusterClient)
	if !ok {
		keys, err := client.Keys(ctx, prefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return keys
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
	if err != nil {
		t.Fatal(err)
	}
	return keys
}
