package dedupewatermill_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupewatermill"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errHandler = errors.New("handler failed")

// openStore opens a SQLite store in a file of its own.
func openStore(t *testing.T) *dedupe.SQLiteStore {
	t.Helper()
	s, err := dedupe.OpenSQLite(filepath.Join(t.TempDir(), "dedupe.db"), dedupe.SQLiteConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// newPubSub returns a gochannel Pub/Sub whose Publish returns once every
// subscriber acked the message (a nacked one is sent again until acked).
func newPubSub(t *testing.T) *gochannel.GoChannel {
	t.Helper()
	ps := gochannel.NewGoChannel(gochannel.Config{BlockPublishUntilSubscriberAck: true}, watermill.NopLogger{})
	t.Cleanup(func() { _ = ps.Close() })
	return ps
}

// runRouter runs r until the test ends.
func runRouter(t *testing.T, r *message.Router) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		_ = r.Close()
		require.NoError(t, <-done)
	})
	select {
	case <-r.Running():
	case err := <-done:
		t.Fatalf("router stopped: %v", err)
	}
}

func newRouter(t *testing.T) *message.Router {
	t.Helper()
	r, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	require.NoError(t, err)
	return r
}

// ledger counts a handler's runs and successes per message UUID, and notes
// whether two runs of one message ever overlapped.
type ledger struct {
	mu         sync.Mutex
	runs, done map[string]int
	running    map[string]bool
	overlapped atomic.Bool
	fail       map[string]int // failures left per UUID
	hold       time.Duration  // how long each run takes
}

func newLedger() *ledger {
	return &ledger{runs: map[string]int{}, done: map[string]int{}, running: map[string]bool{}, fail: map[string]int{}}
}

func (l *ledger) handle(msg *message.Message) ([]*message.Message, error) {
	l.mu.Lock()
	l.runs[msg.UUID]++
	if l.running[msg.UUID] {
		l.overlapped.Store(true)
	}
	l.running[msg.UUID] = true
	fail := l.fail[msg.UUID] > 0
	if fail {
		l.fail[msg.UUID]--
	}
	l.mu.Unlock()
	time.Sleep(l.hold)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running[msg.UUID] = false
	if fail {
		return nil, errHandler
	}
	l.done[msg.UUID]++
	return nil, nil
}

func (l *ledger) counts(uuid string) (runs, done int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs[uuid], l.done[uuid]
}

// Through a real router and Pub/Sub over a SQLite store: each message runs
// once however often it is published; one that fails is nacked, delivered
// again by the subscriber and runs again until it succeeds; Publish returns
// only once every copy was acked, so none is left unacknowledged.
func TestMiddlewareRouter(t *testing.T) {
	d := dedupe.New(openStore(t))
	defer d.Close()
	ps := newPubSub(t)
	l := newLedger()
	l.fail["m-2"] = 2 // fails twice, then succeeds on the third delivery
	r := newRouter(t)
	r.AddMiddleware(dedupewatermill.Middleware(d, dedupewatermill.Config{Channel: "wm-router"}))
	r.AddNoPublisherHandler("h", "orders", ps, func(msg *message.Message) error {
		_, err := l.handle(msg)
		return err
	})
	runRouter(t, r)

	for _, id := range []string{"m-1", "m-2", "m-3", "m-1", "m-2", "m-3", "m-1"} {
		require.NoError(t, ps.Publish("orders", message.NewMessage(id, []byte("order "+id))))
	}
	for id, want := range map[string]int{"m-1": 1, "m-2": 3, "m-3": 1} {
		runs, done := l.counts(id)
		assert.Equal(t, want, runs, "runs of %s", id)
		assert.Equal(t, 1, done, "successes of %s", id)
	}
	s := d.Stats()
	assert.Equal(t, uint64(3), s.Processed)
	assert.Equal(t, uint64(4), s.Duplicates)
	assert.Equal(t, uint64(2), s.Failed)
}

// Several handlers consume one topic, so each gets a copy of every message at
// the same time (as consumers in several processes would): each message
// runs once, no two runs of one message overlap, and a copy that came while
// the first ran waits for its outcome and is acked as a duplicate.
func TestMiddlewareConcurrentCopies(t *testing.T) {
	d := dedupe.New(openStore(t))
	defer d.Close()
	ps := newPubSub(t)
	l := newLedger()
	l.hold = 2 * time.Millisecond
	const handlers, messages = 4, 40
	r := newRouter(t)
	r.AddMiddleware(dedupewatermill.Middleware(d, dedupewatermill.Config{Channel: "wm-concurrent"}))
	for i := range handlers {
		r.AddNoPublisherHandler(fmt.Sprint("h", i), "events", ps, func(msg *message.Message) error {
			_, err := l.handle(msg)
			return err
		})
	}
	runRouter(t, r)

	var wg sync.WaitGroup
	for p := range 2 { // two publishers, each publishing every message
		wg.Go(func() {
			for i := range messages {
				id := fmt.Sprint("e-", (i+p*messages/2)%messages)
				assert.NoError(t, ps.Publish("events", message.NewMessage(id, nil)))
			}
		})
	}
	wg.Wait()
	for i := range messages {
		id := fmt.Sprint("e-", i)
		runs, done := l.counts(id)
		assert.Equal(t, 1, runs, "runs of %s", id)
		assert.Equal(t, 1, done, "successes of %s", id)
	}
	assert.False(t, l.overlapped.Load(), "two runs of one message overlapped")
	s := d.Stats()
	assert.Equal(t, uint64(messages), s.Processed)
	assert.Equal(t, uint64(2*handlers*messages-messages), s.Duplicates)
}

// failingPublisher fails its first n Publish calls, then publishes.
type failingPublisher struct {
	message.Publisher
	n atomic.Int32
}

func (p *failingPublisher) Publish(topic string, msgs ...*message.Message) error {
	if p.n.Add(-1) >= 0 {
		return errors.New("broker unreachable")
	}
	return p.Publisher.Publish(topic, msgs...)
}

// A handler whose produced message the router fails to publish after the
// mark: the router nacks the input, and its redelivery, a duplicate, does
// not run the handler but publishes the kept message, the same UUID,
// metadata and payload.
func TestMiddlewareRepublishesKeptMessages(t *testing.T) {
	d := dedupe.New(openStore(t))
	defer d.Close()
	ps := newPubSub(t)
	out, err := ps.Subscribe(context.Background(), "out")
	require.NoError(t, err)
	pub := &failingPublisher{Publisher: ps}
	pub.n.Store(1)
	var runs atomic.Int32
	r := newRouter(t)
	r.AddMiddleware(dedupewatermill.Middleware(d, dedupewatermill.Config{Channel: "wm-produce"}))
	r.AddHandler("h", "in", ps, "out", pub, func(msg *message.Message) ([]*message.Message, error) {
		runs.Add(1)
		m := message.NewMessage("out-"+msg.UUID, append([]byte("shipped "), msg.Payload...))
		m.Metadata.Set("order", msg.UUID)
		return []*message.Message{m}, nil
	})
	runRouter(t, r)

	published := make(chan error, 1)
	go func() { published <- ps.Publish("in", message.NewMessage("o-1", []byte("o-1"))) }()
	select {
	case m := <-out:
		m.Ack()
		assert.Equal(t, "out-o-1", m.UUID)
		assert.Equal(t, "shipped o-1", string(m.Payload))
		assert.Equal(t, "o-1", m.Metadata.Get("order"))
	case <-time.After(10 * time.Second):
		t.Fatal("the produced message was never published")
	}
	require.NoError(t, <-published) // the input was acked
	assert.Equal(t, int32(1), runs.Load(), "handler runs")
	assert.Equal(t, uint64(1), d.Stats().Duplicates, "the redelivery after the failed publish")
}

// Watermill's own Deduplicator records a message before its handler runs, so
// a handler that fails once loses the message: the redelivery is dropped as
// a duplicate. Middleware releases the failed claim, and the redelivery runs.
func TestMiddlewareUnlikeWatermillDeduplicator(t *testing.T) {
	d := dedupe.New(openStore(t))
	defer d.Close()
	for name, mw := range map[string]message.HandlerMiddleware{
		"watermill Deduplicator": (&middleware.Deduplicator{KeyFactory: func(m *message.Message) (string, error) { return m.UUID, nil }}).Middleware,
		"dedupewatermill":        dedupewatermill.Middleware(d, dedupewatermill.Config{Channel: "wm-unlike"}),
	} {
		t.Run(name, func(t *testing.T) {
			ps := newPubSub(t)
			l := newLedger()
			l.fail["x-1"] = 1
			r := newRouter(t)
			r.AddMiddleware(mw)
			r.AddNoPublisherHandler("h", "t", ps, func(msg *message.Message) error {
				_, err := l.handle(msg)
				return err
			})
			runRouter(t, r)
			require.NoError(t, ps.Publish("t", message.NewMessage("x-1", nil)))
			_, done := l.counts("x-1")
			if name == "dedupewatermill" {
				assert.Equal(t, 1, done, "processed after its failure")
			} else {
				assert.Zero(t, done, "Watermill's Deduplicator dropped the redelivery")
			}
		})
	}
}

// The middleware called directly: how it keys a message, and what it
// returns for each verdict.
func TestMiddlewareVerdicts(t *testing.T) {
	d := dedupe.New(openStore(t))
	defer d.Close()
	ok := func(*message.Message) ([]*message.Message, error) { return nil, nil }
	fail := func(*message.Message) ([]*message.Message, error) { return nil, errHandler }
	byField := dedupewatermill.Config{Channel: "wm-field", Field: "event_id"}
	withField := func(uuid, id string) *message.Message {
		m := message.NewMessage(uuid, nil)
		m.Metadata.Set("event_id", id)
		return m
	}
	tests := []struct {
		name    string
		cfg     dedupewatermill.Config
		h       message.HandlerFunc
		msg     *message.Message
		wantErr error
	}{
		{"first", byField, ok, withField("u1", "ev-1"), nil},
		{"same field, another UUID: a duplicate", byField, fail, withField("u2", "ev-1"), nil},
		{"failure", byField, fail, withField("u3", "ev-2"), errHandler},
		{"after the failure, runs", byField, ok, withField("u4", "ev-2"), nil},
		{"field missing", byField, ok, message.NewMessage("u5", nil), dedupe.ErrNoMessageID},
		{"empty UUID", dedupewatermill.Config{}, ok, message.NewMessage("", nil), dedupe.ErrNoMessageID},
		{"UUID too long for a key", dedupewatermill.Config{}, ok, message.NewMessage(string(make([]byte, 300)), nil), dedupe.ErrInvalidKey},
		{"key func error", dedupewatermill.Config{Key: func(*message.Message) (dedupe.Key, error) { return dedupe.Key{}, errHandler }}, ok, message.NewMessage("u6", nil), errHandler},
		{"key func", dedupewatermill.Config{Key: func(m *message.Message) (dedupe.Key, error) {
			return dedupe.Key{Channel: "wm-func", MessageID: m.Metadata.Get("event_id")}, nil
		}}, ok, withField("u7", "ev-1"), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dedupewatermill.Middleware(d, tc.cfg)(tc.h)(tc.msg)
			if tc.wantErr == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, tc.wantErr)
			}
		})
	}
}

// A copy of a message that another handler holds past the wait gets an
// error wrapping ErrInFlight (the router nacks it); the handler sees a
// context that is the claim's, and the message gets its own context back.
func TestMiddlewareInFlight(t *testing.T) {
	d := dedupe.New(openStore(t))
	defer d.Close()
	mw := dedupewatermill.Middleware(d, dedupewatermill.Config{Channel: "wm-inflight"}, dedupe.WithWait(20*time.Millisecond))
	entered, release := make(chan struct{}), make(chan struct{})
	type ctxKey struct{}
	first := message.NewMessage("f-1", nil)
	first.SetContext(context.WithValue(context.Background(), ctxKey{}, "mine"))
	orig := first.Context()
	done := make(chan error, 1)
	go func() {
		_, err := mw(func(m *message.Message) ([]*message.Message, error) {
			assert.Equal(t, "mine", m.Context().Value(ctxKey{}), "the handler's context derives from the message's")
			assert.NotEqual(t, orig, m.Context(), "the handler runs under the claim's context")
			close(entered)
			<-release
			return nil, nil
		})(first)
		done <- err
	}()
	<-entered
	_, err := mw(func(*message.Message) ([]*message.Message, error) {
		t.Error("a copy in flight ran")
		return nil, nil
	})(message.NewMessage("f-1", nil))
	assert.ErrorIs(t, err, dedupe.ErrInFlight)
	close(release)
	require.NoError(t, <-done)
	assert.Equal(t, orig, first.Context(), "the message's context is put back")
}

// A panic in the handler releases the claim and goes on to the router's
// Recoverer; the redelivery runs.
func TestMiddlewarePanic(t *testing.T) {
	d := dedupe.New(openStore(t))
	defer d.Close()
	h := middleware.Recoverer(dedupewatermill.Middleware(d, dedupewatermill.Config{Channel: "wm-panic"})(
		func(*message.Message) ([]*message.Message, error) { panic("boom") }))
	_, err := h(message.NewMessage("p-1", nil))
	require.Error(t, err)
	ran := false
	_, err = dedupewatermill.Middleware(d, dedupewatermill.Config{Channel: "wm-panic"})(
		func(*message.Message) ([]*message.Message, error) { ran = true; return nil, nil })(message.NewMessage("p-1", nil))
	require.NoError(t, err)
	assert.True(t, ran, "the redelivery after a panic ran")
}
