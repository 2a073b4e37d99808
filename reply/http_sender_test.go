package reply_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/reply"
)

// compose returns body, counting its calls.
func compose(body string, calls *int) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) {
		*calls++
		return []byte(body), nil
	}
}

// TestSenderNativeAfterUnknown drives the helpers through a Sender: a send
// the platform accepts and whose answer is lost (a 5xx, a timeout) ends with
// its outcome unknown; the next Send, a redelivery of the message, sends it
// again with the same token and records it sent; the user sees one message.
// A later Send returns the record without sending.
func TestSenderNativeAfterUnknown(t *testing.T) {
	for _, x := range []fault{acceptThen500, acceptThenCut} {
		for _, h := range helpers()[:3] { // LINE, Discord, Feishu
			t.Run(h.name, func(t *testing.T) {
				t.Parallel()
				f := newFake(t, x)
				store := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
				s := reply.New(store, h.p)
				send := h.send(reply.API{Client: f.client(), BaseURL: f.srv.URL})
				calls := 0
				_, err := s.Send(context.Background(), testKey, 0, compose(h.body, &calls), send)
				require.Error(t, err)
				assert.False(t, reply.IsNotSent(err))

				rc, err := s.Send(context.Background(), testKey, 0, compose(h.body, &calls), send)
				require.NoError(t, err)
				assert.True(t, rc.Sent)
				assert.Equal(t, 2, rc.Attempts)
				assert.Equal(t, "m1", rc.ID)
				assert.Equal(t, h.p.Token(testKey, 0), rc.Token)

				rc, err = s.Send(context.Background(), testKey, 0, compose(h.body, &calls), send)
				require.NoError(t, err)
				assert.False(t, rc.Sent)
				assert.Equal(t, 1, f.count(), "duplicate reply")
				assert.Equal(t, 1, calls, "compose runs once")
			})
		}
	}
}

// TestSenderRejectedThenSent: a 400 is NotSent: the next Send sends again.
func TestSenderRejectedThenSent(t *testing.T) {
	for _, h := range helpers() {
		t.Run(h.name, func(t *testing.T) {
			f := newFake(t, reject400)
			s := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), h.p)
			send := h.send(reply.API{Client: f.client(), BaseURL: f.srv.URL})
			calls := 0
			_, err := s.Send(context.Background(), testKey, 0, compose(h.body, &calls), send)
			require.Error(t, err)
			assert.True(t, reply.IsNotSent(err))
			rc, err := s.Send(context.Background(), testKey, 0, nil, send)
			require.NoError(t, err)
			assert.True(t, rc.Sent)
			assert.Equal(t, 1, f.count())
		})
	}
}

// TestSenderWithoutToken: Telegram and Slack after an accepted send whose
// answer was lost: at most once reports the reply possibly lost and does not
// send again; at least once sends again and reports a possible duplicate;
// Slack's read-back finds the message and sends nothing.
func TestSenderWithoutToken(t *testing.T) {
	tg, sl := helpers()[3], helpers()[4]
	run := func(t *testing.T, h helper, opts ...reply.Option) (*fakePlatform, reply.Receipt, error) {
		f := newFake(t, acceptThen500)
		api := reply.API{Client: f.client(), BaseURL: f.srv.URL}
		for i, o := range opts {
			if o == nil {
				opts[i] = reply.WithCheck(reply.SlackCheck(api, 0))
			}
		}
		s := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), h.p, opts...)
		calls := 0
		_, err := s.Send(context.Background(), testKey, 0, compose(h.body, &calls), h.send(api))
		require.Error(t, err)
		rc, err := s.Send(context.Background(), testKey, 0, compose(h.body, &calls), h.send(api))
		return f, rc, err
	}
	t.Run("telegram at most once", func(t *testing.T) {
		f, _, err := run(t, tg)
		assert.True(t, errors.Is(err, reply.ErrMaybeLost), "%v", err)
		assert.Equal(t, 1, f.count())
	})
	t.Run("telegram at least once", func(t *testing.T) {
		f, rc, err := run(t, tg, reply.WithPolicy(reply.AtLeastOnce))
		require.NoError(t, err)
		assert.True(t, rc.MaybeDuplicate)
		assert.Equal(t, 2, f.count())
	})
	t.Run("slack read-back", func(t *testing.T) {
		f, rc, err := run(t, sl, nil)
		require.NoError(t, err)
		assert.Equal(t, "m1", rc.ID)
		assert.Equal(t, 1, f.count())
	})
}
