package deduperedis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gatewaykit/dedupe/queue"

	"github.com/gatewaykit/dedupe"
	"github.com/redis/go-redis/v9"
)

// Defaults of [QueueConfig].
const (
	// DefaultQueueName is the default [QueueConfig.Name].
	DefaultQueueName = "dedupe:queue"
	// DefaultQueueGroup is the default [QueueConfig.Group].
	DefaultQueueGroup = "workers"
)

// QueueConfig configures a [Queue]. The zero value gives the defaults.
type QueueConfig struct {
	// Name names the queue. Its stream is the key "{Name}"; the id of the
	// live message of each [dedupe.Key] is kept under "{Name}:live:<key>"
	// and the state of each message under "{Name}:s:<id>"; the failed
	// messages are indexed under "{Name}:failed"; what each take took is
	// kept under "{Name}:t:<receipt>" while it is hidden. The braces make
	// every key of a queue one hash slot, so its scripts work on Redis
	// Cluster. Give each Async of dedupehttp (each handler) a queue of its own.
	// Default [DefaultQueueName].
	Name string
	// Group is the stream's consumer group, which every process of the
	// gateway shares. Default [DefaultQueueGroup].
	Group string
	// Consumer names this process in the group; two processes must not share
	// a name. Default the host name, the process id and random letters.
	Consumer string
	// Visibility is how long a take hides a message: an entry left pending
	// longer than that (its worker died) is taken again with XAUTOCLAIM.
	// Default [queue.DefaultVisibility].
	Visibility time.Duration
	// Retention is how long the state of a done or failed message is kept
	// (an expiry on its hash). Default [queue.DefaultRetention].
	Retention time.Duration
	// PollInterval is how long one XREADGROUP blocks waiting for a new
	// entry, between two looks for entries whose visibility timeout ran out;
	// it also bounds how long Take takes to see that its context is done or
	// the queue closed. Default [queue.DefaultPollInterval].
	PollInterval time.Duration
	// MaxDepth bounds the live (queued or processing) messages, the
	// entries of the stream: Push refuses more with [queue.ErrFull], exactly,
	// whichever process pushes. Zero or less: no bound.
	MaxDepth int
}

// Queue is a [queue.Queue] on a Redis stream with a consumer group, for
// the processes of a gateway that share one Redis: dedupehttp.WithQueue
// makes an Async answer 202 only once its message is in the stream. Take
// reads new entries with XREADGROUP, and takes over entries whose worker
// died (pending longer than the visibility timeout) with XAUTOCLAIM. Each
// Push, take and Update is one Lua script, so the stream, the message's
// state and the key's live entry change together. Settled entries are
// acknowledged and deleted from the stream; their state stays for the
// retention.
//
// A message is as durable as the server's persistence makes it: a crash of
// the gateway loses nothing once Push returned, but a crash of Redis loses
// what it had not written to its append-only file (appendonly yes with
// appendfsync always loses nothing; everysec up to a second) or replicated
// before a failover. Run it on a server that does not evict keys
// (maxmemory-policy noeviction), as any queue.
//
// A Queue does not own its client: Close leaves it open. A Queue is safe for
// concurrent use.
type Queue struct {
	client redis.UniversalClient
	cfg    QueueConfig
	stream string // "{Name}"

	mu     sync.Mutex
	cursor string // where XAUTOCLAIM looks next

	closeOnce sync.Once
	done      chan struct{}
}

var _ queue.Queue = (*Queue)(nil)

// NewQueue returns a queue on client, which may be any of go-redis's
// clients. It does not contact the server: the stream and its group are
// created when first needed. Set [redis.Options.ContextTimeoutEnabled] on
// the client for the deadlines of contexts to bound calls in flight.
func NewQueue(client redis.UniversalClient, cfg QueueConfig) (*Queue, error) {
	if isNil(client) {
		return nil, errors.New("dedupe: redis queue: nil client")
	}
	for _, d := range []time.Duration{cfg.Visibility, cfg.Retention, cfg.PollInterval} {
		if d < 0 {
			return nil, fmt.Errorf("dedupe: redis queue: negative duration %v", d)
		}
	}
	if cfg.Name == "" {
		cfg.Name = DefaultQueueName
	}
	if cfg.Group == "" {
		cfg.Group = DefaultQueueGroup
	}
	if cfg.Consumer == "" {
		host, _ := os.Hostname()
		cfg.Consumer = host + "-" + strconv.Itoa(os.Getpid()) + "-" + queue.NewReceipt()[:8]
	}
	cfg.Visibility = positiveOr(cfg.Visibility, queue.DefaultVisibility)
	cfg.Retention = positiveOr(cfg.Retention, queue.DefaultRetention)
	cfg.PollInterval = positiveOr(cfg.PollInterval, queue.DefaultPollInterval)
	return &Queue{client: client, cfg: cfg, stream: "{" + cfg.Name + "}", cursor: "0-0", done: make(chan struct{})}, nil
}

func positiveOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func (q *Queue) liveKey(k dedupe.Key) string { return q.stream + ":live:" + k.String() }
func (q *Queue) statusKey(id string) string  { return q.stream + ":s:" + id }
func (q *Queue) failedKey() string           { return q.stream + ":failed" }

// takeKey is where a take with the receipt token token records the entry it
// took, for as long as the entry stays hidden, so that the same take sent
// again (go-redis sends a command again when its reply was lost) hands out
// that entry instead of taking another.
func (q *Queue) takeKey(token string) string { return q.stream + ":t:" + token }

// check returns the error a call fails with before it does anything.
func (q *Queue) check(ctx context.Context) error {
	select {
	case <-q.done:
		return queue.ErrClosed
	default:
	}
	return ctx.Err()
}

// queueErr wraps err from operation op, but the sentinels and context errors.
func queueErr(op string, err error) error {
	if errors.Is(err, queue.ErrClosed) || errors.Is(err, queue.ErrStaleDelivery) || errors.Is(err, queue.ErrFull) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("dedupe: redis queue: %s: %w", op, err)
}

// Push adds m to the stream unless a live message has its key; see
// [queue.Queue].
func (q *Queue) Push(ctx context.Context, m queue.Message) (string, bool, error) {
	if err := q.check(ctx); err != nil {
		return "", false, err
	}
	data, err := m.MarshalBinary()
	if err != nil {
		return "", false, queueErr("push", err)
	}
	res, err := pushScript.Run(ctx, q.client, []string{q.stream, q.liveKey(m.Key), q.statusKey(m.ID)},
		m.ID, m.Key.String(), data, max(q.cfg.MaxDepth, 0)).Slice()
	if err != nil && strings.Contains(err.Error(), "DEDUPE_FULL") {
		return "", false, queue.ErrFull
	}
	if err != nil {
		return "", false, queueErr("push", err)
	}
	if len(res) != 2 {
		return "", false, queueErr("push", fmt.Errorf("unexpected reply %v", res))
	}
	added, _ := res[0].(int64)
	id, _ := res[1].(string)
	// The same push sent again (go-redis does when a reply was lost) finds
	// the message its first run added: added all the same.
	return id, added == 1 || id == m.ID, nil
}

// Take waits for an entry, new or left by a dead worker, and hides it; see
// [queue.Queue].
func (q *Queue) Take(ctx context.Context) (queue.Delivery, error) {
	for {
		if err := q.check(ctx); err != nil {
			return queue.Delivery{}, err
		}
		d, ok, err := q.tryTake(ctx)
		if err != nil || ok {
			return d, err
		}
		d, ok, err = q.waitNew(ctx)
		if err != nil || ok {
			return d, err
		}
	}
}

// tryTake takes an entry whose visibility timeout ran out, or else a new
// one, without blocking.
func (q *Queue) tryTake(ctx context.Context) (queue.Delivery, bool, error) {
	q.mu.Lock()
	cursor := q.cursor
	q.mu.Unlock()
	res, err := q.withGroup(ctx, func() ([]any, error) {
		token := queue.NewReceipt()
		return takeScript.Run(ctx, q.client, []string{q.stream, q.takeKey(token)}, q.cfg.Group, q.cfg.Consumer,
			max(q.cfg.Visibility.Milliseconds(), 1), cursor, token, q.statusKey("")).Slice()
	})
	if err != nil {
		return queue.Delivery{}, false, q.takeErr(ctx, err)
	}
	if next, ok := res[0].(string); ok {
		q.mu.Lock()
		q.cursor = next
		q.mu.Unlock()
	}
	if len(res) < 4 {
		return queue.Delivery{}, false, nil
	}
	receipt, _ := res[1].(string)
	data, _ := res[2].(string)
	attempts, _ := res[3].(int64)
	d, err := q.delivery(data, attempts, receipt)
	return d, err == nil, err
}

// waitNew blocks up to the poll interval for a new entry, and no longer than
// ctx allows.
func (q *Queue) waitNew(ctx context.Context) (queue.Delivery, bool, error) {
	block := q.cfg.PollInterval
	if dl, ok := ctx.Deadline(); ok {
		// Ends before ctx, so that a reply, not a read deadline, ends it; BLOCK
		// 0 is forever.
		block = max(min(block, time.Until(dl)-10*time.Millisecond), time.Millisecond)
	}
	var streams []redis.XStream
	_, err := q.withGroup(ctx, func() ([]any, error) {
		var err error
		streams, err = q.client.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group: q.cfg.Group, Consumer: q.cfg.Consumer, Streams: []string{q.stream, ">"},
			Count: 1, Block: block,
		}).Result()
		return nil, err
	})
	if errors.Is(err, redis.Nil) || err == nil && (len(streams) == 0 || len(streams[0].Messages) == 0) {
		return queue.Delivery{}, false, nil
	}
	if err != nil {
		return queue.Delivery{}, false, q.takeErr(ctx, err)
	}
	msg := streams[0].Messages[0]
	id, _ := msg.Values["id"].(string)
	data, _ := msg.Values["data"].(string)
	receipt := msg.ID + "/" + queue.NewReceipt()
	attempts, err := takenScript.Run(ctx, q.client, []string{q.statusKey(id)}, receipt).Int64()
	if err != nil { // the entry stays pending: it is taken again after the timeout
		return queue.Delivery{}, false, queueErr("take", err)
	}
	d, err := q.delivery(data, attempts, receipt)
	return d, err == nil, err
}

// takeErr returns the error of a take that failed with err: the queue's
// closing or ctx's end if either happened meanwhile (a read deadline set
// from ctx fails a call with an i/o timeout, maybe before ctx says it is
// done), and err otherwise.
func (q *Queue) takeErr(ctx context.Context, err error) error {
	if err := q.check(ctx); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return queueErr("take", err)
}

// delivery decodes a taken entry.
func (q *Queue) delivery(data string, attempts int64, receipt string) (queue.Delivery, error) {
	d := queue.Delivery{Attempt: int(attempts), Receipt: receipt, Visibility: q.cfg.Visibility}
	if err := d.Message.UnmarshalBinary([]byte(data)); err != nil {
		return queue.Delivery{}, queueErr("take", err)
	}
	return d, nil
}

// withGroup runs f, and once more after creating the stream and its group if
// f found them missing.
func (q *Queue) withGroup(ctx context.Context, f func() ([]any, error)) ([]any, error) {
	res, err := f()
	if err == nil || !strings.Contains(err.Error(), "NOGROUP") {
		return res, err
	}
	err = q.client.XGroupCreateMkStream(ctx, q.stream, q.cfg.Group, "0").Err()
	if err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
		return nil, err
	}
	return f()
}
