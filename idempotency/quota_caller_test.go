package idempotency

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// byAccount scopes keys by the account a caller acts for, which the caller
// chooses (an API key acting for many accounts, as Stripe-Account does):
// the scope is finer than the caller.
func byAccount(r *http.Request) string {
	return r.Header.Get("Authorization") + "/" + r.Header.Get("X-Account")
}

// TestQuotaManyScopesOneCaller: one caller presenting 12 scopes (9 suffice
// at the defaults to fill the middleware's share of the memory store) holds
// one caller's share, an eighth, whatever the scopes, and another caller's
// new keys are served. By default the caller is the Authorization header;
// WithCaller names it otherwise. On the code before callers were counted,
// every new key of bob's was refused 503, Retry-After: 86400.
func TestQuotaManyScopesOneCaller(t *testing.T) {
	for name, tc := range map[string]struct {
		opts   []Option
		header string // the header that names mallory
	}{
		"default": {header: "Authorization"},
		"WithCaller": {header: "X-Api-Key", opts: []Option{WithCaller(func(r *http.Request) string {
			return r.Header.Get("X-Api-Key")
		})}},
	} {
		t.Run(name, func(t *testing.T) {
			store := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
			f := newFixture(t, store, &api{}, append(tc.opts, WithScope(func(r *http.Request) string {
				return byAccount(r) + r.Header.Get("X-Api-Key")
			}))...)
			created := 0
			for account := range 12 {
				for i := range 400 {
					rq := post(fmt.Sprintf(`"m-%d-%d"`, account, i), "x")
					rq.header = map[string]string{tc.header: "mallory", "X-Account": strconv.Itoa(account)}
					if f.do(rq).Code == http.StatusCreated {
						created++
					}
				}
			}
			assert.Equal(t, 2500/8, created, "mallory holds one caller's share")
			for i := range 20 {
				rq := post(fmt.Sprintf(`"bob-%d"`, i), "x")
				rq.header = map[string]string{tc.header: "bob"}
				w := f.do(rq)
				require.Equal(t, http.StatusCreated, w.Code, "bob's key %d: %s (Retry-After %s)", i, w.Body, w.Header().Get("Retry-After"))
			}
			assert.Zero(t, store.Evicted())
		})
	}
}

// failing is a store whose Claim fails while down is set.
type failing struct {
	dedupe.Store
	down atomic.Bool
}

func (s *failing) Claim(ctx context.Context, c dedupe.Claim, lease time.Duration) (dedupe.Status, error) {
	if s.down.Load() {
		return 0, errors.New("connection refused")
	}
	return s.Store.Claim(ctx, c, lease)
}

// TestQuotaFailedRequestGivesBack: a request that left nothing in the store
// (answered 503 unavailable by a failing store, or 409 for a key in flight
// in another process) gives its key's share back at once; a request whose
// handler ran and failed keeps it, as its key stays bound for the TTL. On
// the code before, the 10 failed requests held the whole quota for 24 h.
func TestQuotaFailedRequestGivesBack(t *testing.T) {
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	store := &failing{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{Now: c.Now})}
	a := &api{status: func(n int64) int {
		if n == 1 {
			return http.StatusBadGateway // the first run fails
		}
		return http.StatusCreated
	}}
	f := newFixture(t, store, a, WithScope(byCaller), WithQuota(3), WithClock(c.Now))

	store.down.Store(true)
	for i := range 10 {
		w := f.do(as("bob", post(fmt.Sprintf(`"down-%d"`, i), "x")))
		assertProblem(t, w, unavailable)
	}
	store.down.Store(false)

	// Another process holds a key's claim: 409, nothing of this request's.
	elsewhere := keysFor(DefaultChannel, "bob", "elsewhere")
	_, err := store.Claim(context.Background(), dedupe.NewClaim(elsewhere.main), time.Hour)
	require.NoError(t, err)
	for range 3 {
		assertProblem(t, f.do(as("bob", post(`"elsewhere"`, "x"))), keyInFlight)
	}

	// The handler runs and fails: its key keeps its share.
	assert.Equal(t, http.StatusBadGateway, f.do(as("bob", post(`"failed"`, "x"))).Code)
	codes := map[int]int{}
	for i := range 4 {
		codes[f.do(as("bob", post(fmt.Sprintf(`"up-%d"`, i), "x"))).Code]++
	}
	assert.Equal(t, map[int]int{http.StatusCreated: 2, http.StatusServiceUnavailable: 2}, codes,
		"the 13 requests that stored nothing left bob's 3 keys; the failed run holds one")
}

// TestQuotaRetryAfterIsTheWait: Retry-After is the time until the first key
// in the way expires, on the injected clock: the caller's first key, not
// the TTL, and not a key whose share was given back; when the store's share
// is full, the first key of any caller.
func TestQuotaRetryAfterIsTheWait(t *testing.T) {
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	store := &failing{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{Now: c.Now})}
	f := newFixture(t, store, &api{}, WithScope(byCaller), WithQuota(3), WithClock(c.Now))

	store.down.Store(true)
	assertProblem(t, f.do(as("bob", post(`"down"`, "x"))), unavailable) // t0, given back
	store.down.Store(false)
	for _, k := range []string{`"a"`, `"b"`, `"c"`} {
		c.Advance(time.Hour)
		require.Equal(t, http.StatusCreated, f.do(as("bob", post(k, "x"))).Code) // t0+1h, +2h, +3h
	}
	c.Advance(30 * time.Minute)
	w := f.do(as("bob", post(`"d"`, "x")))
	assertProblem(t, w, overQuota)
	assert.Equal(t, strconv.Itoa(int((DefaultTTL-150*time.Minute)/time.Second)), w.Header().Get("Retry-After"),
		"at t0+3.5h, a's expiry, 24 h after t0+1h, is 21.5 h away")

	c.Advance(DefaultTTL - 150*time.Minute) // a expires
	require.Equal(t, http.StatusCreated, f.do(as("bob", post(`"d"`, "x"))).Code)
	w = f.do(as("bob", post(`"e"`, "x")))
	assertProblem(t, w, overQuota)
	assert.Equal(t, "3600", w.Header().Get("Retry-After"), "b expires in 1 h")

	// The store's share: 40 marks hold 10 keys, unscoped one caller's all.
	c2 := &clock{now: time.Unix(1_800_000_000, 0)}
	f2 := newFixture(t, dedupe.NewMemoryStore(dedupe.MemoryConfig{Now: c2.Now, MaxSize: 40}), &api{}, WithClock(c2.Now))
	for i := range 10 {
		require.Equal(t, http.StatusCreated, f2.do(post(fmt.Sprintf(`"k%d"`, i), "x")).Code)
		c2.Advance(time.Minute)
	}
	w = f2.do(post(`"k10"`, "x"))
	assertProblem(t, w, overQuota)
	assert.Equal(t, strconv.Itoa(int((DefaultTTL-10*time.Minute)/time.Second)), w.Header().Get("Retry-After"))
}
