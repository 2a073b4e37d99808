package idempotency

import (
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// killedMidFlight leaves in store what a request with key and body leaves
// when its process is killed while the handler runs: the key's binding and
// its claim, taken for lease, which no one renews or releases.
func killedMidFlight(t *testing.T, store dedupe.Store, key, body string, lease time.Duration) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(body))
	ks := keysFor(DefaultChannel, "", key)
	fp := fingerprint(sha256.Sum256(DefaultFingerprint(r, []byte(body))))
	require.NoError(t, store.MarkResult(t.Context(), ks.bind, encodeRecord(fp, nil), DefaultTTL))
	st, err := store.Claim(t.Context(), dedupe.NewClaim(ks.main), lease)
	require.NoError(t, err)
	require.Equal(t, dedupe.Claimed, st)
}

// TestInterruptedRequestRetryAfter: a request killed mid-flight holds its
// key until its claim's lease (the Deduper's WithLease) runs out. A retry
// meanwhile gets 409 whose Retry-After is the time left of that lease at
// most, and whose detail says how long a crashed request holds its key;
// once the lease ran out the retry runs.
func TestInterruptedRequestRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 90 * time.Second
		store := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		killedMidFlight(t, store, "8e03978e-40d5-43e8-bc93-6894a57f9324", "hello", lease)

		a := &api{}
		d := dedupe.New(store, dedupe.WithLease(lease))
		defer d.Close()
		f := &fixture{t: t, store: store, d: d, h: Middleware(d)(a)}

		w := f.do(post(key1, "hello"))
		p := assertProblem(t, w, keyInFlight)
		assert.Equal(t, "90", w.Header().Get("Retry-After"), "the lease a crashed request holds the key for")
		assert.Contains(t, p.Detail, "90 seconds")

		// A retry that waits 30 s is told what is left: 60 s.
		f.h = Middleware(d, WithWait(30*time.Second))(a)
		w = f.do(post(key1, "hello"))
		assertProblem(t, w, keyInFlight)
		assert.Equal(t, "60", w.Header().Get("Retry-After"))

		time.Sleep(60 * time.Second) // as Retry-After said
		w = f.do(post(key1, "hello"))
		assert.Equal(t, http.StatusCreated, w.Code, w.Body.String())
		assert.EqualValues(t, 1, a.runs.Load())
	})
}
