package idempotency

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const key1 = `"8e03978e-40d5-43e8-bc93-6894a57f9324"`

// TestMissingKey: a covered request without a key is refused with 400
// key-missing (draft 2.7), and passes through untouched WithOptional.
func TestMissingKey(t *testing.T) {
	a := &api{}
	f := newFixture(t, nil, a)
	assertProblem(t, f.do(post("", "hi")), keyMissing)
	assert.Zero(t, a.runs.Load())

	f = newFixture(t, nil, a, WithOptional())
	assert.Equal(t, http.StatusCreated, f.do(post("", "hi")).Code)
	assert.Equal(t, http.StatusCreated, f.do(post("", "hi")).Code)
	assert.EqualValues(t, 2, a.runs.Load())
}

// TestMalformedKey: a key that is not an sf-string is refused with 400
// key-malformed (draft 2.1), before the handler and the store; WithBareKeys
// takes an unquoted one.
func TestMalformedKey(t *testing.T) {
	a := &api{}
	f := newFixture(t, nil, a)
	for _, key := range []string{`abc`, `""`, `"unterminated`, `"a" "b"`, `8e03978e-40d5`, `"` + strings.Repeat("k", 256) + `"`} {
		p := assertProblem(t, f.do(post(key, "hi")), keyMalformed)
		assert.Contains(t, p.Detail, "Malformed Idempotency-Key: ")
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
	r.Header.Add("Idempotency-Key", `"a"`)
	r.Header.Add("Idempotency-Key", `"b"`)
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	assertProblem(t, w, keyMalformed)
	assert.Zero(t, a.runs.Load())

	f = newFixture(t, nil, a, WithBareKeys())
	first := f.do(post(`8e03978e-40d5`, "hi"))
	assert.Equal(t, http.StatusCreated, first.Code)
	assertSame(t, first, f.do(post(`"8e03978e-40d5"`, "hi"))) // the same key, quoted
}

// TestRetryReplayed: a retry after the first request completed gets its response
// again, status, kept headers and body, with Idempotent-Replayed: true, and
// the handler runs once (draft 2.6, "Retry"). The handler gets the body.
func TestRetryReplayed(t *testing.T) {
	a := &api{}
	f := newFixture(t, nil, a)
	first := f.do(post(key1, "hello"))
	require.Equal(t, http.StatusCreated, first.Code)
	assert.JSONEq(t, `{"run":1,"echo":"hello"}`, first.Body.String())
	assert.Equal(t, "session=s", first.Header().Get("Set-Cookie"))
	for range 3 {
		assertSame(t, first, f.do(post(key1, "hello")))
	}
	assert.EqualValues(t, 1, a.runs.Load())
	assert.Equal(t, http.StatusCreated, f.do(post(`"another"`, "hello")).Code)
	assert.EqualValues(t, 2, a.runs.Load())
}

// TestReplayByteForByteOverServer: over a real server, the replay is the first
// response byte for byte but for Date, Set-Cookie and the replay header.
func TestReplayByteForByteOverServer(t *testing.T) {
	srv := httptest.NewServer(newFixture(t, nil, &api{}).h)
	defer srv.Close()
	dump := func() string {
		r, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/messages?x=1", strings.NewReader("hi"))
		r.Header.Set("Idempotency-Key", key1)
		resp, err := http.DefaultClient.Do(r)
		require.NoError(t, err)
		defer resp.Body.Close()
		var b bytes.Buffer
		resp.Header.Del("Date")
		resp.Header.Del("Set-Cookie")
		resp.Header.Del("X-Run")
		resp.Header.Del(HeaderReplayed)
		require.NoError(t, resp.Write(&b))
		return b.String()
	}
	first := dump()
	assert.Equal(t, first, dump())
	assert.Contains(t, first, `{"run":1,"echo":"hi"}`)
}

// TestConcurrentRetryConflict: a retry while the first request runs is answered 409
// key-in-flight with Retry-After (draft 2.6, "Concurrent Request"), without
// running the handler; once the first completed, a retry is replayed.
func TestConcurrentRetryConflict(t *testing.T) {
	a := &api{entered: make(chan struct{}, 1), gate: make(chan struct{})}
	f := newFixture(t, nil, a)
	firstc := f.async(post(key1, "hello"))
	<-a.entered
	w := f.do(post(key1, "hello"))
	assertProblem(t, w, keyInFlight)
	assert.Equal(t, "1", w.Header().Get("Retry-After"))
	close(a.gate)
	first := <-firstc
	require.Equal(t, http.StatusCreated, first.Code)
	assertSame(t, first, f.do(post(key1, "hello")))
	assert.EqualValues(t, 1, a.runs.Load())
}

// TestConcurrentRetryWaits: WithWait, a concurrent retry waits for the first
// request and is answered with its response.
func TestConcurrentRetryWaits(t *testing.T) {
	a := &api{entered: make(chan struct{}, 1), gate: make(chan struct{})}
	f := newFixture(t, nil, a, WithWait(time.Hour))
	firstc := f.async(post(key1, "hello"))
	<-a.entered
	retryc := f.async(post(key1, "hello"))
	waitFor(func() bool { return f.d.Stats().Waits == 1 })
	close(a.gate)
	first := <-firstc
	require.Equal(t, http.StatusCreated, first.Code)
	assertSame(t, first, <-retryc)
	assert.EqualValues(t, 1, a.runs.Load())
}

// TestWaitingRetryRunsAfterFailure: WithWait, a retry that waited for a first
// request that failed (5xx) runs the handler itself, after it.
func TestWaitingRetryRunsAfterFailure(t *testing.T) {
	a := &api{entered: make(chan struct{}, 2), gate: make(chan struct{}),
		status: func(n int64) int { return map[bool]int{true: 503, false: 201}[n == 1] }}
	f := newFixture(t, nil, a, WithWait(time.Hour))
	firstc := f.async(post(key1, "hello"))
	<-a.entered
	retryc := f.async(post(key1, "hello"))
	waitFor(func() bool { return f.d.Stats().Waits == 1 })
	close(a.gate)
	assert.Equal(t, http.StatusServiceUnavailable, (<-firstc).Code)
	<-a.entered
	retry := <-retryc
	assert.Equal(t, http.StatusCreated, retry.Code)
	assert.Contains(t, retry.Body.String(), `"run":2`)
}

// TestKeyReusedAfterCompletion: a key reused with another payload (body, path or method's
// fingerprint) is refused with 422 key-reused (draft 2.7) after the first
// completed, and the first is replayed still.
func TestKeyReusedAfterCompletion(t *testing.T) {
	a := &api{}
	f := newFixture(t, nil, a)
	first := f.do(post(key1, "hello"))
	require.Equal(t, http.StatusCreated, first.Code)
	other := post(key1, "hello")
	other.path = "/v1/other"
	for _, rq := range []request{post(key1, "goodbye"), other, {method: http.MethodPatch, path: "/v1/messages", key: key1, body: "hello"}} {
		p := assertProblem(t, f.do(rq), keyReused)
		assert.Contains(t, p.Detail, "expires 24 hours after")
	}
	assertSame(t, first, f.do(post(key1, "hello")))
	assert.EqualValues(t, 1, a.runs.Load())
}

// TestKeyReusedInFlight: a key reused with another payload while the first
// request runs is refused with 422, not 409, with or without a wait (and
// the waiting kind does not wait).
func TestKeyReusedInFlight(t *testing.T) {
	for _, opts := range [][]Option{nil, {WithWait(time.Hour)}} {
		a := &api{entered: make(chan struct{}, 1), gate: make(chan struct{})}
		f := newFixture(t, nil, a, opts...)
		firstc := f.async(post(key1, "hello"))
		<-a.entered
		assertProblem(t, f.do(post(key1, "goodbye")), keyReused)
		assert.Zero(t, f.d.Stats().Waits)
		close(a.gate)
		assert.Equal(t, http.StatusCreated, (<-firstc).Code)
		assert.EqualValues(t, 1, a.runs.Load())
	}
}

// TestKeyReusedAfterFailure: a key whose first request failed stays bound to
// its payload: the same payload runs again, another is refused with 422.
func TestKeyReusedAfterFailure(t *testing.T) {
	a := &api{status: func(n int64) int { return map[bool]int{true: 500, false: 201}[n == 1] }}
	f := newFixture(t, nil, a)
	assert.Equal(t, http.StatusInternalServerError, f.do(post(key1, "hello")).Code)
	assertProblem(t, f.do(post(key1, "goodbye")), keyReused)
	assert.Equal(t, http.StatusCreated, f.do(post(key1, "hello")).Code)
	assert.EqualValues(t, 2, a.runs.Load())
}

// TestFailureNotStored: a 5xx or 429 answer, or a panic, is not stored: the
// client's retry runs the handler again. A 4xx is stored and replayed.
func TestFailureNotStored(t *testing.T) {
	for _, status := range []int{500, 502, 503, http.StatusTooManyRequests} {
		a := &api{status: func(n int64) int { return map[bool]int{true: status, false: 201}[n == 1] }}
		f := newFixture(t, nil, a)
		assert.Equal(t, status, f.do(post(key1, "hello")).Code)
		retry := f.do(post(key1, "hello"))
		assert.Equal(t, http.StatusCreated, retry.Code, status)
		assert.Empty(t, retry.Header().Get(HeaderReplayed))
		assert.EqualValues(t, 2, a.runs.Load())
	}

	a := &api{status: func(int64) int { return http.StatusBadRequest }}
	f := newFixture(t, nil, a)
	first := f.do(post(key1, "hello"))
	assertSame(t, first, f.do(post(key1, "hello")))
	assert.EqualValues(t, 1, a.runs.Load())
}

// TestPanicNotStored: a handler that panics leaves the key free: the panic
// goes on to the server, and the retry runs the handler.
func TestPanicNotStored(t *testing.T) {
	runs := 0
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		if runs == 1 {
			panic("model exploded")
		}
		w.WriteHeader(http.StatusCreated)
	})
	f := newFixture(t, nil, h)
	assert.PanicsWithValue(t, "model exploded", func() { f.do(post(key1, "hello")) })
	assert.Equal(t, http.StatusCreated, f.do(post(key1, "hello")).Code)
	assert.Equal(t, 2, runs)
}

// TestKeyExpires: after the TTL, on the store's clock, a key is new again; just
// before it, it is replayed.
func TestKeyExpires(t *testing.T) {
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	a := &api{}
	store := dedupe.NewMemoryStore(dedupe.MemoryConfig{Now: c.Now})
	f := newFixture(t, store, a, WithTTL(time.Hour))
	first := f.do(post(key1, "hello"))
	c.Advance(time.Hour - time.Second)
	assertSame(t, first, f.do(post(key1, "hello")))
	assertProblem(t, f.do(post(key1, "goodbye")), keyReused)
	c.Advance(2 * time.Second)
	again := f.do(post(key1, "goodbye")) // another payload: the key is new
	assert.Equal(t, http.StatusCreated, again.Code)
	assert.Contains(t, again.Body.String(), `"run":2`)
	assert.EqualValues(t, 2, a.runs.Load())
}

// TestConcurrentRetries: N copies of one request at once run the handler
// once; without a wait the others get its response or 409, with a wait all
// get its response.
func TestConcurrentRetries(t *testing.T) {
	const n = 16
	for _, wait := range []bool{false, true} {
		t.Run(fmt.Sprint("wait=", wait), func(t *testing.T) {
			a := &api{}
			var opts []Option
			var f *fixture
			if wait {
				// The first run waits until every other copy waits for it.
				a.entered, a.gate = make(chan struct{}, n), make(chan struct{})
				opts = append(opts, WithWait(time.Hour))
			}
			f = newFixture(t, nil, a, opts...)
			if wait {
				go func() {
					<-a.entered
					waitFor(func() bool { return f.d.Stats().Waits == n-1 })
					close(a.gate)
				}()
			}
			answers := runAll(f, n)
			assert.EqualValues(t, 1, a.runs.Load())
			var firsts, replays, conflicts int
			for _, w := range answers {
				switch {
				case w.Code == http.StatusConflict:
					assertProblem(t, w, keyInFlight)
					conflicts++
				case w.Header().Get(HeaderReplayed) == "true":
					replays++
					assert.JSONEq(t, `{"run":1,"echo":"hello"}`, w.Body.String())
				default:
					firsts++
					assert.JSONEq(t, `{"run":1,"echo":"hello"}`, w.Body.String())
				}
			}
			assert.Equal(t, 1, firsts)
			if wait {
				assert.Equal(t, n-1, replays)
			}
			assert.Equal(t, n-1, replays+conflicts)
		})
	}
}

func runAll(f *fixture, n int) []*httptest.ResponseRecorder {
	answers := make([]*httptest.ResponseRecorder, n)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = f.do(post(key1, "hello"))
		}()
	}
	wg.Wait()
	return answers
}

// TestMethodsNotCovered: GET, PUT and DELETE pass through untouched, key or
// not; WithMethods changes the covered set.
func TestMethodsNotCovered(t *testing.T) {
	a := &api{}
	f := newFixture(t, nil, a)
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		for _, key := range []string{key1, key1, "", "malformed"} {
			w := f.do(request{method: m, path: "/v1/messages", key: key})
			assert.Equal(t, http.StatusCreated, w.Code)
			assert.Empty(t, w.Header().Get(HeaderReplayed))
		}
	}
	assert.EqualValues(t, 12, a.runs.Load())

	f = newFixture(t, nil, a, WithMethods(http.MethodPut))
	assert.Equal(t, http.StatusCreated, f.do(post("", "x")).Code)
	assertProblem(t, f.do(request{method: http.MethodPut, path: "/"}), keyMissing)
}

// TestScopeSeparatesCallers: WithScope keeps two callers' equal keys apart; one caller's
// retry is replayed.
func TestScopeSeparatesCallers(t *testing.T) {
	a := &api{}
	f := newFixture(t, nil, a, WithScope(func(r *http.Request) string { return r.Header.Get("X-User") }))
	alice, bob := post(key1, "hello"), post(key1, "goodbye")
	alice.header = map[string]string{"X-User": "alice"}
	bob.header = map[string]string{"X-User": "bob"}
	first := f.do(alice)
	assert.Equal(t, http.StatusCreated, f.do(bob).Code)
	assertSame(t, first, f.do(alice))
	assert.EqualValues(t, 2, a.runs.Load())
}

// TestTooLargeToReplay: a response over what a mark keeps reaches the client
// whole and is not run again: a retry gets 409 not-replayable.
func TestTooLargeToReplay(t *testing.T) {
	big := bytes.Repeat([]byte("x"), dedupe.MaxResultSize)
	a := &api{body: func(int64) []byte { return big }}
	f := newFixture(t, nil, a)
	first := f.do(post(key1, "hello"))
	assert.Equal(t, len(big), first.Body.Len())
	w := f.do(post(key1, "hello"))
	p := assertProblem(t, w, notReplayable)
	assert.Contains(t, p.Detail, "will not be processed again")
	assert.Empty(t, w.Header().Get("Retry-After"))
	assert.EqualValues(t, 1, a.runs.Load())
}

// TestRequestBodyLimit: a body over WithMaxBody is refused with 413.
func TestRequestBodyLimit(t *testing.T) {
	a := &api{}
	f := newFixture(t, nil, a, WithMaxBody(4))
	assertProblem(t, f.do(post(key1, "hello")), bodyTooLarge)
	assert.Equal(t, http.StatusCreated, f.do(post(key1, "hell")).Code)
}

// TestStoreFailureUnavailable: a store that fails is answered 503 with Retry-After, and
// the handler does not run.
func TestStoreFailureUnavailable(t *testing.T) {
	for _, opts := range [][]Option{nil, {WithWait(time.Hour)}} {
		a := &api{}
		store := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		f := newFixture(t, store, a, opts...)
		require.NoError(t, store.Close())
		w := f.do(post(key1, "hello"))
		assertProblem(t, w, unavailable)
		assert.Equal(t, "1", w.Header().Get("Retry-After"))
		assert.Zero(t, a.runs.Load())
	}
}

// TestReplayAfterRestart: the response is replayed by a new middleware over the same
// SQLite file after a restart.
func TestReplayAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idem.db")
	open := func() *dedupe.SQLiteStore {
		st, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{})
		require.NoError(t, err)
		return st
	}
	a := &api{}
	st := open()
	first := newFixture(t, st, a).do(post(key1, "hello"))
	require.NoError(t, st.Close())

	st = open()
	defer st.Close()
	f := newFixture(t, st, a)
	assertSame(t, first, f.do(post(key1, "hello")))
	assertProblem(t, f.do(post(key1, "goodbye")), keyReused)
	assert.EqualValues(t, 1, a.runs.Load())
}

// TestKeysFor: the dedupe keys are valid for any key and scope, and the
// scope and key are length-prefixed, so that no two pairs share one.
func TestKeysFor(t *testing.T) {
	long := strings.Repeat("é", 1000)
	seen := map[dedupe.Key]bool{}
	for _, p := range [][2]string{{"", "abc"}, {"a", "bc"}, {"ab", "c"}, {long, long}, {"abc", ""}} {
		ks := keysFor(DefaultChannel, p[0], p[1])
		require.NoError(t, ks.main.Validate())
		require.NoError(t, ks.bind.Validate())
		assert.False(t, seen[ks.main], p)
		seen[ks.main] = true
	}
}
