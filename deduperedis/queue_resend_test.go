package deduperedis_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
	"github.com/gatewaykit/dedupe/dedupetest/faultproxy"
	"github.com/gatewaykit/dedupe/queue"
)

// TestQueueTakeResent is issue 44, item 16, on the queue's side: go-redis
// sends a command again by itself when its reply is lost (MaxRetries, 3 by
// default). A take whose first run took the oldest message, and whose reply
// was swallowed, was sent again and took the next one: the first stayed
// hidden, pending for a receipt nobody held, until its visibility timeout
// ran out, and its attempt was spent (enough such takes, around a restart,
// and a message that never ran became a dead letter). The take run again
// must hand out the message its first run took, once, with the same attempt;
// a push sent again must report its message added.
func TestQueueTakeResent(t *testing.T) {
	p, err := faultproxy.Start(redisAddr(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	client := newClient(t, p.Addr(), func(o *redis.Options) { o.ReadTimeout = 300 * time.Millisecond })
	name := "dedupe-test:resend:" + randomID(t)
	q := newQueue(t, client, deduperedis.QueueConfig{Name: name, Visibility: time.Minute, PollInterval: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, client.XGroupCreateMkStream(ctx, "{"+name+"}", deduperedis.DefaultQueueGroup, "0").Err())
	var ids []string
	for i := range 3 {
		id := name + "-" + string(rune('a'+i))
		ids = append(ids, id)
		_, added, err := q.Push(ctx, queue.Message{ID: id, Key: dedupe.Key{Channel: "resend", MessageID: id},
			Method: http.MethodPost, Target: "/hook", Body: []byte("{}"), Accepted: time.Now()})
		require.NoError(t, err)
		require.True(t, added)
	}
	warm, err := q.Take(ctx) // loads the take's script, so that the first run below runs it
	require.NoError(t, err)
	require.NoError(t, q.Update(ctx, warm, queue.Change{State: queue.StateDone}))
	ids = ids[1:]

	p.DropReplies(true) // the take runs on the server; its reply is swallowed
	taken := make(chan queue.Delivery, 1)
	go func() {
		d, err := q.Take(ctx)
		assert.NoError(t, err, "the take whose first reply was lost")
		taken <- d
	}()
	for p.Stats().Silenced == 0 {
		time.Sleep(5 * time.Millisecond) // polling the proxy, not a timing assumption
	}
	p.DropReplies(false) // go-redis sends the take again on a new connection
	first := <-taken
	assert.Equal(t, ids[0], first.ID, "the take sent again hands out the message its first run took")
	assert.Equal(t, 1, first.Attempt, "attempt of %s", first.ID)

	tctx, tcancel := context.WithTimeout(ctx, 3*time.Second) // far below the visibility timeout
	defer tcancel()
	second, err := q.Take(tctx)
	require.NoError(t, err, "the other message is not hidden for the visibility timeout")
	assert.Equal(t, ids[1], second.ID)
	assert.Equal(t, 1, second.Attempt, "attempt of %s", second.ID)

	// A push whose reply was lost, sent again, finds the message its first
	// run added: added, not a copy of a live message (which NewAsync would
	// answer as in flight).
	p.DropReplies(true)
	pushed := make(chan bool, 1)
	go func() {
		id := name + "-again"
		_, added, err := q.Push(ctx, queue.Message{ID: id, Key: dedupe.Key{Channel: "resend", MessageID: id},
			Method: http.MethodPost, Target: "/hook", Body: []byte("{}"), Accepted: time.Now()})
		assert.NoError(t, err, "the push whose first reply was lost")
		pushed <- added
	}()
	for p.Stats().Silenced < 2 {
		time.Sleep(5 * time.Millisecond) // polling the proxy, not a timing assumption
	}
	p.DropReplies(false)
	assert.True(t, <-pushed, "the push sent again reports the message added")
}
