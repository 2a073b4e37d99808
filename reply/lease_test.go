package reply_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/reply"
)

// cutStore is a store a process stops reaching when cut is set: its calls
// fail, as a dead process's would never be made.
type cutStore struct {
	dedupe.Store
	cut atomic.Bool
}

func (s *cutStore) Extend(ctx context.Context, c dedupe.Claim, lease time.Duration) error {
	if s.cut.Load() {
		return context.DeadlineExceeded
	}
	return s.Store.Extend(ctx, c, lease)
}

func (s *cutStore) Release(ctx context.Context, c dedupe.Claim) error {
	if s.cut.Load() {
		return context.DeadlineExceeded
	}
	return s.Store.Release(ctx, c)
}

// A send that runs longer than the lock's lease keeps the lock, renewed
// while Send runs: a copy meanwhile gets ErrInFlight, and the reply is sent
// once. Before, the send's context ended with the lease (1 minute by
// default, 1 s here) and the reply's outcome was left unknown.
func TestSendOutlastsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		defer st.Close()
		p := newPlatform(true, reply.LINE.Window, time.Now)
		s := reply.New(st, reply.LINE, reply.WithLease(time.Second))
		compose := func(context.Context) ([]byte, error) { return []byte("answer"), nil }
		slow := func(ctx context.Context, m reply.Message) (string, error) {
			select {
			case <-ctx.Done():
				return "", context.Cause(ctx)
			case <-time.After(5 * time.Second):
			}
			return p.send(ctx, m)
		}
		done := make(chan error, 1)
		var rc reply.Receipt
		go func() {
			var err error
			rc, err = s.Send(context.Background(), msgKey, 0, compose, slow)
			done <- err
		}()
		time.Sleep(3 * time.Second)
		_, err := s.Send(context.Background(), msgKey, 0, compose, p.send)
		require.ErrorIs(t, err, dedupe.ErrInFlight, "a copy while the slow send runs")
		require.NoError(t, <-done)
		assert.True(t, rc.Sent)
		assert.Equal(t, 1, p.seen())
	})
}

// With the default lease, the reply of a sender that died holding its lock
// (its store calls no longer made) is sent by another within 15 s, not
// after the minute it took before.
func TestSendDeadSenderDefaultLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		defer mem.Close()
		p := newPlatform(true, reply.LINE.Window, time.Now)
		dying := &cutStore{Store: mem}
		a := reply.New(dying, reply.LINE)
		b := reply.New(mem, reply.LINE)
		compose := func(context.Context) ([]byte, error) { return []byte("answer"), nil }
		died := make(chan struct{})
		go func() {
			_, _ = a.Send(context.Background(), msgKey, 0, compose, func(ctx context.Context, _ reply.Message) (string, error) {
				dying.cut.Store(true) // the process dies here: nothing it does reaches the store
				close(died)
				<-ctx.Done()
				return "", ctx.Err()
			})
		}()
		<-died
		start := time.Now()
		for {
			rc, err := b.Send(context.Background(), msgKey, 0, compose, p.send)
			if err == nil {
				assert.True(t, rc.Sent)
				break
			}
			require.ErrorIs(t, err, dedupe.ErrInFlight)
			require.Less(t, time.Since(start), 2*time.Minute)
			time.Sleep(time.Second)
		}
		assert.LessOrEqual(t, time.Since(start), 15*time.Second, "the dead sender's reply was held that long")
		assert.Equal(t, 1, p.seen())
	})
}
