package dedupehttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/queue"
)

// sizingQueue adds up the bytes of the messages pushed to it as a durable
// queue stores them (queue.Message.MarshalBinary).
type sizingQueue struct {
	queue.Queue
	bytes, added atomic.Int64
}

func (q *sizingQueue) Push(ctx context.Context, m queue.Message) (string, bool, error) {
	id, added, err := q.Queue.Push(ctx, m)
	if added {
		b, merr := m.MarshalBinary()
		if merr != nil {
			return id, added, merr
		}
		q.bytes.Add(int64(len(b)))
		q.added.Add(1)
	}
	return id, added, err
}

// openQueue opens a SQLite queue in dir, closed when t ends.
func openQueue(t *testing.T, dir string) queue.Queue {
	t.Helper()
	q, err := queue.OpenSQLite(filepath.Join(dir, "queue.db"), queue.SQLiteConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	return q
}

// lineBatch returns a LINE batch of n message events as LINE writes them
// (Messaging API reference, webhook event objects), about 420 bytes each.
func lineBatch(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"destination":"U0123456789abcdef0123456789abcdef","events":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"message","message":{"type":"text","id":"46894%014d","quoteToken":"q3Plxr4AgKd2NBZxlZLqsvIaPFRr1ylDWPnJmsuHhoMbjBtzcTIqUgVNhFkzBWThTRjA","text":"message number %d of the batch"},`+
			`"webhookEventId":"01H810YECXQQZ37VAXPF%06d","deliveryContext":{"isRedelivery":false},"timestamp":1692251666727,`+
			`"source":{"type":"group","groupId":"Ca56f94637c4c3bdaea2bd5c2a7f2d2d3","userId":"U4af4980629c4c3bdaea2bd5c2a7f2d2d"},`+
			`"replyToken":"38ef843bde154d9b91c21320ffd17a0f","mode":"active"}`, i, i, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// TestAsyncEventsQueueBytes accepts a 600-event LINE batch with
// NewAsyncEvents and adds up the bytes of its 600 messages as a durable
// queue stores them (queue.Message.MarshalBinary): at most 3 times the body, since each
// message holds its event's part of the batch (the destination and its
// event), not the whole batch. Each event then runs once, reading a part in
// which LINE's Events finds it alone, beside the batch's destination. Before,
// each message held the whole batch: 600 × 1.33 × the body, about 800 times
// it.
func TestAsyncEventsQueueBytes(t *testing.T) {
	const n = 600
	body := lineBatch(n)
	p := linePreset()
	mem := queue.NewMemory(queue.MemoryConfig{})
	t.Cleanup(func() { _ = mem.Close() })
	q := &sizingQueue{Queue: mem}
	var mu sync.Mutex
	runs := map[string]int{}
	done := make(chan ended, n)
	a := dedupehttp.NewAsyncEvents(dedupe.New(nil), p, func(r *http.Request, ev platform.Event) error {
		part, _ := io.ReadAll(r.Body)
		evs, err := p.Events(part, r.Header)
		if err != nil || len(evs) != 1 || evs[0].ID != ev.ID || !strings.Contains(string(part), `"destination":"U0123456789abcdef`) {
			return fmt.Errorf("part %q of event %s", part, ev.ID)
		}
		mu.Lock()
		runs[ev.ID]++
		mu.Unlock()
		return nil
	}, q, dedupehttp.WithLogger(quiet), dedupehttp.WithDone(doneTo(done)), dedupehttp.WithWorkers(8))
	t.Cleanup(func() { _ = a.Close(context.Background()) })

	w := deliverBatch(a, body, eventsSecret)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.EqualValues(t, n, q.added.Load())
	ratio := float64(q.bytes.Load()) / float64(len(body))
	t.Logf("%d events, body %d bytes, queue %d bytes: %.2f× the body", n, len(body), q.bytes.Load(), ratio)
	assert.LessOrEqual(t, ratio, 3.0, "the queue holds the batch about once")
	drain(t, done, n)
	require.NoError(t, a.Close(t.Context()))
	assert.Len(t, runs, n)
	for id, c := range runs {
		assert.Equal(t, 1, c, "runs of %s", id)
	}
}

// TestAsyncEventsOldMessages serves messages that an earlier version queued
// in a durable queue before an upgrade, each holding the whole batch under
// its event's key: the new version runs each on its own event, once, and
// answers the batch's redelivery as a duplicate.
func TestAsyncEventsOldMessages(t *testing.T) {
	p := linePreset()
	body := testdata(t, "line_events.json")
	evs, err := p.Events(body, nil)
	require.NoError(t, err)
	dir := t.TempDir()
	old, err := queue.OpenSQLite(filepath.Join(dir, "queue.db"), queue.SQLiteConfig{})
	require.NoError(t, err)
	for i, ev := range evs { // as the earlier newMessage wrote them
		_, added, err := old.Push(t.Context(), queue.Message{
			ID: fmt.Sprintf("old-%d", i), Key: ev.Key(p), Method: http.MethodPost, Target: "/hook", Host: "example.com",
			Header: queue.Header{"Content-Type": {"application/json"}}, Body: body, Accepted: time.Now(),
		})
		require.NoError(t, err)
		require.True(t, added)
	}
	require.NoError(t, old.Close())

	var mu sync.Mutex
	runs := map[string]int{}
	done := make(chan ended, len(evs))
	a := dedupehttp.NewAsyncEvents(dedupe.New(nil), p, func(r *http.Request, ev platform.Event) error {
		key, verdict := dedupehttp.KeyFrom(r.Context())
		assert.Equal(t, ev.Key(p), key)
		assert.Equal(t, dedupehttp.VerdictNew, verdict)
		mu.Lock()
		runs[ev.ID]++
		mu.Unlock()
		return nil
	}, openQueue(t, dir), dedupehttp.WithLogger(quiet), dedupehttp.WithDone(doneTo(done)))
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	drain(t, done, len(evs))
	w := deliverBatch(a, body, eventsSecret)
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "duplicate", w.Header().Get(dedupehttp.HeaderVerdict))
	require.NoError(t, a.Close(t.Context()))
	want := map[string]int{}
	for _, ev := range evs {
		want[ev.ID] = 1
	}
	assert.Equal(t, want, runs)
}

// TestAsyncEventsUnkeyedEventAlone is TestEventsUnkeyedEventAlone through
// NewAsyncEvents on a SQLite queue: on each batched platform, a batch of
// [keyed, cannot be keyed, keyed] delivered three times is answered 200
// each time; the keyed events run once, the one without an id once per
// delivery, with verdict undeduplicated and no key (or never, under
// WithRefuseUndeduplicated); each is counted and logged without its
// content. Before, every delivery was answered 400 and nothing was queued.
func TestAsyncEventsUnkeyedEventAlone(t *testing.T) {
	for name, c := range unkeyedBatches(t) {
		for _, refuse := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/refuse=%v", name, refuse), func(t *testing.T) {
				var logs logBuffer
				done := make(chan ended, 8)
				opts := []dedupehttp.AsyncOption{dedupehttp.WithLogger(logs.logger()), dedupehttp.WithDone(doneTo(done))}
				if refuse {
					opts = append(opts, dedupehttp.WithRefuseUndeduplicated())
				}
				q := &sizingQueue{Queue: openQueue(t, t.TempDir())}
				var mu sync.Mutex
				runs := map[string]int{}
				a := dedupehttp.NewAsyncEvents(dedupe.New(nil), c.preset, func(r *http.Request, ev platform.Event) error {
					key, verdict := dedupehttp.KeyFrom(r.Context())
					id := ev.ID
					if verdict == dedupehttp.VerdictUndeduplicated {
						assert.Equal(t, dedupe.Key{}, key)
						id = "unkeyed"
					} else {
						assert.Equal(t, ev.Key(c.preset), key)
						assert.Equal(t, dedupehttp.VerdictNew, verdict)
					}
					mu.Lock()
					runs[id]++
					mu.Unlock()
					return nil
				}, q, opts...)
				t.Cleanup(func() { _ = a.Close(context.Background()) })
				var drained int64
				for range 3 {
					w := deliverSigned(a, c.preset, c.body)
					assert.Equal(t, http.StatusOK, w.Code, w.Body.String())
					added := q.added.Load()
					drain(t, done, int(added-drained))
					drained = added
				}
				require.NoError(t, a.Close(t.Context()))
				want := map[string]int{c.want[0]: 1, c.want[1]: 1, "unkeyed": 3}
				if refuse {
					delete(want, "unkeyed")
				}
				assert.Equal(t, want, runs)
				assert.Equal(t, uint64(3), a.Stats().Undeduplicated)
				recs := logs.records(t)
				require.NotEmpty(t, recs)
				assert.Equal(t, "WARN", recs[0]["level"])
				assert.Equal(t, c.preset.Name, recs[0]["platform"])
				assert.EqualValues(t, 1, recs[0]["event"])
				assert.Equal(t, map[bool]string{false: "queued", true: "refused"}[refuse], recs[0]["outcome"])
				assert.NotContains(t, logs.String(), userRef)
			})
		}
	}
}
