package dedupeslack_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupeslack"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// probe counts its calls, notes whether two ever ran at once, fails its first
// calls while fail is above zero, and holds each call until hold is closed,
// if set.
type probe struct {
	calls, running, fail atomic.Int32
	overlapped           atomic.Bool
	entered              chan struct{}
	hold                 chan struct{} // nil: do not hold
}

var errHandler = errors.New("handler failed")

func newProbe() *probe { return &probe{entered: make(chan struct{}, 64)} }

func (p *probe) run() error {
	p.calls.Add(1)
	if p.running.Add(1) > 1 {
		p.overlapped.Store(true)
	}
	defer p.running.Add(-1)
	p.entered <- struct{}{}
	if p.hold != nil {
		<-p.hold
	}
	if p.fail.Add(-1) >= 0 {
		return errHandler
	}
	return nil
}

func (p *probe) event(context.Context, slackevents.EventsAPIEvent) error { return p.run() }

const secret = "8f742231b10e8888abcd99yyyzzz85a5"

// callback is the payload of an event_callback delivering a message.
func callback(eventID string) string {
	return fmt.Sprintf(`{"token": "t", "team_id": "T1", "api_app_id": "A1", "type": "event_callback",
		"event_id": %q, "event_time": 1700000000,
		"event": {"type": "message", "channel": "C1", "user": "U1", "text": "hi", "ts": "1700000000.000100"}}`, eventID)
}

// eventsServer serves an Events API endpoint as ExampleEventsAPI_server
// does: the signature is checked before the event reaches handle.
func eventsServer(t *testing.T, handle dedupeslack.EventsHandler) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		sv, err := slack.NewSecretsVerifier(r.Header, secret)
		if err == nil {
			_, _ = sv.Write(body)
			err = sv.Ensure()
		}
		if err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		ev, err := slackevents.ParseEvent(body, slackevents.OptionNoVerifyToken())
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if ev.Type == slackevents.URLVerification {
			_, _ = io.WriteString(w, ev.Data.(*slackevents.EventsAPIURLVerificationEvent).Challenge)
			return
		}
		w.WriteHeader(dedupeslack.StatusCode(handle(r.Context(), ev)))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// post delivers body as Slack does, signed with key, and returns the status.
func post(t *testing.T, url, key, body string) int {
	t.Helper()
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(key))
	fmt.Fprintf(mac, "v0:%s:%s", ts, body)
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func TestEventsAPIRetries(t *testing.T) {
	p := newProbe()
	p.fail.Store(1)
	srv := eventsServer(t, dedupeslack.EventsAPI(dedupe.New(nil), "", p.event))

	var statuses []int
	for range 3 { // the delivery and Slack's retries
		statuses = append(statuses, post(t, srv.URL, secret, callback("Ev1")))
	}
	assert.Equal(t, []int{500, 200, 200}, statuses)
	assert.EqualValues(t, 2, p.calls.Load(), "the retry after the failure is processed, the next one dropped")
}

// TestEventsAPIForgedRequest sends a request with a wrong signature first: it
// is refused before the Deduper sees it, so the genuine event is processed.
func TestEventsAPIForgedRequest(t *testing.T) {
	p := newProbe()
	srv := eventsServer(t, dedupeslack.EventsAPI(dedupe.New(nil), "", p.event))
	assert.Equal(t, http.StatusUnauthorized, post(t, srv.URL, "not the secret", callback("Ev1")))
	assert.Equal(t, http.StatusOK, post(t, srv.URL, secret, callback("Ev1")))
	assert.EqualValues(t, 1, p.calls.Load())
}

// TestEventsAPIRetriesInFlight posts Slack's retries of an event while its
// first delivery is processed, at once, as Slack does when the first was not
// answered within 3 seconds. With the default wait, each retry is answered
// with the first's outcome, 200 if it succeeded, and if it failed one retry
// is processed and the others are answered 200: no retry is answered 500.
// With a wait shorter than the first delivery, the retries are answered 503;
// a wait of 0 keeps the default.
func TestEventsAPIRetriesInFlight(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      []dedupe.Option
		fail      int32
		wantFirst int
		wantRetry int // the answer of each retry
		wantCalls int32
	}{
		{"default wait, first succeeds", nil, 0, 200, 200, 1},
		{"default wait, first fails", nil, 1, 500, 200, 2},
		{"wait shorter than the first", []dedupe.Option{dedupe.WithWait(time.Millisecond)}, 0, 200, 503, 1},
		// A wait of 0 read from a config keeps the default: before issue 34
		// it switched the wait off, and every retry was answered 500.
		{"WithWait(0) keeps the default wait", []dedupe.Option{dedupe.WithWait(0)}, 0, 200, 200, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const retries = 20
			d := dedupe.New(nil)
			p := newProbe()
			p.hold = make(chan struct{})
			p.fail.Store(tc.fail)
			srv := eventsServer(t, dedupeslack.EventsAPI(d, "", p.event, tc.opts...))

			first := make(chan int, 1)
			go func() { first <- post(t, srv.URL, secret, callback("Ev1")) }()
			<-p.entered
			answers := make(chan int, retries)
			for range retries {
				go func() { answers <- post(t, srv.URL, secret, callback("Ev1")) }()
			}
			require.Eventually(t, func() bool { return d.Stats().Waits == retries },
				10*time.Second, time.Millisecond, "every retry waits")
			count := map[int]int{}
			short := tc.wantRetry == 503
			if short { // the retries' wait ends while the first runs
				for range retries {
					count[<-answers]++
				}
			}
			close(p.hold)
			assert.Equal(t, tc.wantFirst, <-first)
			if !short {
				for range retries {
					count[<-answers]++
				}
			}
			assert.Equal(t, map[int]int{tc.wantRetry: retries}, count)
			assert.Equal(t, tc.wantCalls, p.calls.Load())
			assert.False(t, p.overlapped.Load(), "two copies ran at once")
			t.Logf("Events API, %s: 1+%d deliveries of one event; first answered %d, retries %v (500s: %d); %d runs",
				tc.name, retries, tc.wantFirst, count, count[500], p.calls.Load())
		})
	}
}

func TestEventsAPIWithoutEventID(t *testing.T) {
	p := newProbe()
	handle := dedupeslack.EventsAPI(dedupe.New(nil), "", p.event)
	srv := eventsServer(t, handle)
	assert.Equal(t, http.StatusOK, post(t, srv.URL, secret, `{"type": "url_verification", "token": "t", "challenge": "c"}`))

	ev, err := slackevents.ParseEvent([]byte(`{"type": "app_rate_limited", "token": "t", "team_id": "T1",
		"minute_rate_limited": 1518467820, "api_app_id": "A1"}`), slackevents.OptionNoVerifyToken())
	require.NoError(t, err)
	_, ok := dedupeslack.EventID(ev)
	assert.False(t, ok)
	require.NoError(t, handle(t.Context(), ev))
	require.NoError(t, handle(t.Context(), ev))
	assert.EqualValues(t, 2, p.calls.Load(), "no event id, no deduplication")
}

func TestEventsAPITwoAppsShareAStore(t *testing.T) {
	d := dedupe.New(nil)
	pa, pb := newProbe(), newProbe()
	a := eventsServer(t, dedupeslack.EventsAPI(d, "slack-a", pa.event))
	b := eventsServer(t, dedupeslack.EventsAPI(d, "slack-b", pb.event))
	for range 2 {
		assert.Equal(t, http.StatusOK, post(t, a.URL, secret, callback("Ev1")))
		assert.Equal(t, http.StatusOK, post(t, b.URL, secret, callback("Ev1")))
	}
	assert.EqualValues(t, 1, pa.calls.Load())
	assert.EqualValues(t, 1, pb.calls.Load(), "app b's Ev1 is not app a's")
}

// TestEventsAPIErrorWrappingErrDuplicate checks that a handler's own error is
// returned even when it wraps dedupe.ErrDuplicate.
func TestEventsAPIErrorWrappingErrDuplicate(t *testing.T) {
	own := fmt.Errorf("inner step: %w", dedupe.ErrDuplicate)
	handle := dedupeslack.EventsAPI(dedupe.New(nil), "", func(context.Context, slackevents.EventsAPIEvent) error { return own })
	ev, err := slackevents.ParseEvent([]byte(callback("Ev1")), slackevents.OptionNoVerifyToken())
	require.NoError(t, err)
	assert.Same(t, own, handle(t.Context(), ev))
}
