package idempotency

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// byCaller scopes keys by the Authorization header, the caller.
func byCaller(r *http.Request) string { return r.Header.Get("Authorization") }

// as is rq sent by caller.
func as(caller string, rq request) request {
	rq.header = map[string]string{"Authorization": caller}
	return rq
}

// flood sends n requests with new keys from caller, and returns the number
// of each status answered and the first over-quota answer.
func (f *fixture) flood(caller string, n int) (map[int]int, *problem, string) {
	codes := map[int]int{}
	var first *problem
	var retryAfter string
	for i := range n {
		w := f.do(as(caller, post(fmt.Sprintf(`"%s-flood-%d"`, caller, i), "x")))
		codes[w.Code]++
		if w.Code == http.StatusServiceUnavailable && first == nil {
			p := assertProblem(f.t, w, overQuota)
			first, retryAfter = &p, w.Header().Get("Retry-After")
		}
	}
	return codes, first, retryAfter
}

// TestFloodDoesNotEvictOtherScope: over the default memory store (10,000
// marks, least recently used evicted), one caller sending 6,000 new keys
// (12,000 marks) does not evict another caller's key within its TTL: the
// other's retry is replayed, and the handler does not run again. The flood's
// keys beyond its scope's share (an eighth of 2,500 keys) are refused with
// 503 over-quota, counted, with a Retry-After that says when its first key
// expires; the other caller can still use new keys, and the store evicted
// nothing.
func TestFloodDoesNotEvictOtherScope(t *testing.T) {
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	store := dedupe.NewMemoryStore(dedupe.MemoryConfig{Now: c.Now})
	var stats Stats
	a := &api{}
	f := newFixture(t, store, a, WithScope(byCaller), WithClock(c.Now), WithStats(&stats))
	first := f.do(as("bob", post(key1, "hello")))
	require.Equal(t, http.StatusCreated, first.Code)

	c.Advance(time.Minute)
	codes, p, retryAfter := f.flood("mallory", 6000)
	t.Logf("the flood's answers by status: %v", codes)

	retry := f.do(as("bob", post(key1, "hello")))
	assertSame(t, first, retry)
	assert.Contains(t, retry.Body.String(), `"run":1`, "bob's retry ran the handler again")

	assert.Equal(t, map[int]int{http.StatusCreated: 312, http.StatusServiceUnavailable: 6000 - 312}, codes)
	assert.EqualValues(t, 6000-312, stats.OverQuota.Load())
	require.NotNil(t, p)
	assert.Contains(t, p.Detail, "A key expires 24 hours after its request was processed.")
	assert.Equal(t, strconv.Itoa(int(DefaultTTL/time.Second)), retryAfter, "mallory's first key expires in 24 h")
	assert.Zero(t, store.Evicted())
	assert.Equal(t, http.StatusCreated, f.do(as("bob", post(`"bob-2"`, "hi"))).Code, "bob has room")

	// Retries of mallory's keys held are served; once they expire, the
	// quota has room again.
	assert.Equal(t, "true", f.do(as("mallory", post(`"mallory-flood-0"`, "x"))).Header().Get(HeaderReplayed))
	c.Advance(DefaultTTL)
	assert.Equal(t, http.StatusCreated, f.do(as("mallory", post(`"mallory-new"`, "x"))).Code)
}

// TestQuotaUnscoped: without WithScope every caller shares one scope, whose
// quota is the middleware's share of a bounded store: 2,500 keys of the
// default 10,000 marks.
func TestQuotaUnscoped(t *testing.T) {
	store := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	f := newFixture(t, store, &api{})
	codes, _, _ := f.flood("", 3000)
	assert.Equal(t, map[int]int{http.StatusCreated: 2500, http.StatusServiceUnavailable: 500}, codes)
	assert.Zero(t, store.Evicted())
}

// TestQuotaOptions: WithQuota(n) bounds each scope on a store that does not
// evict (SQLite; no quota by default) and on a bounded one; WithQuota(-1)
// turns it off, and a bounded store then evicts.
func TestQuotaOptions(t *testing.T) {
	sqlite, err := dedupe.OpenSQLite(filepath.Join(t.TempDir(), "keys.db"), dedupe.SQLiteConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sqlite.Close() })
	for _, tc := range []struct {
		name  string
		store dedupe.Store
		opts  []Option
		n     int
		want  map[int]int
	}{
		{"sqlite default", sqlite, nil, 50, map[int]int{201: 50}},
		{"sqlite WithQuota", sqlite, []Option{WithQuota(20)}, 50, map[int]int{201: 20, 503: 30}},
		{"memory WithQuota", dedupe.NewMemoryStore(dedupe.MemoryConfig{}), []Option{WithQuota(20)}, 50, map[int]int{201: 20, 503: 30}},
		{"memory off", dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: 200}), []Option{WithQuota(-1)}, 500, map[int]int{201: 500}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.store, &api{}, append(tc.opts, WithScope(byCaller))...)
			codes, _, _ := f.flood(tc.name, tc.n)
			assert.Equal(t, tc.want, codes)
		})
	}
}

// TestQuotaCountsKeysHeldBeforeStart: a key the store holds from before the
// middleware started (a snapshot, a durable store) is not new: its retry is
// served even when its scope's quota is used.
func TestQuotaCountsKeysHeldBeforeStart(t *testing.T) {
	store := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	before := newFixture(t, store, &api{}, WithScope(byCaller))
	first := before.do(as("bob", post(key1, "hello")))
	require.Equal(t, http.StatusCreated, first.Code)

	after := newFixture(t, store, &api{}, WithScope(byCaller), WithQuota(3)) // a restart
	codes, _, _ := after.flood("bob", 5)
	assert.Equal(t, map[int]int{201: 3, 503: 2}, codes)
	assertSame(t, first, after.do(as("bob", post(key1, "hello"))))
}
