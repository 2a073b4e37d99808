package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/redis/go-redis/v9"
)

// Message is one entry of the stream: its entry id, which the stream gives
// it, and its fields; the key of the message is its "id" field, which the
// producer sets, so that a producer's retry (a second XADD, with another
// entry id) has the same key.
type Message struct {
	EntryID string
	ID      string
	Body    string
}

// Consumer is one consumer of a consumer group of a Redis stream: it takes a
// batch of up to Batch entries at once and runs the batch through
// [dedupe.Deduper.DoEach], then acknowledges (XACK) only the entries
// processed now or found processed already. A failed entry, and one in
// flight in another consumer, stays pending, unacknowledged: once it has
// been idle for Retry, a consumer of the group (this one, or another if this
// one died) claims it again with XAUTOCLAIM and runs it in a later batch.
// An entry whose id cannot make a key goes to the dead-letter stream
// Stream+":dead" and is acknowledged.
type Consumer struct {
	Client  redis.UniversalClient
	Stream  string // the stream's key
	Group   string // the consumer group
	Name    string // this consumer's name in the group
	Deduper *dedupe.Deduper
	Channel string // the key channel of the messages
	// Handle processes one message; an error leaves it for redelivery.
	Handle func(ctx context.Context, m Message) error
	// Batch is the most entries taken at once (default 64).
	Batch int
	// Block is how long a take waits for new entries (default 1 s).
	Block time.Duration
	// Retry is how long a pending entry stays idle before it is claimed
	// again (default 5 s). Longer than Handle takes on a batch, or a slow
	// batch's entries are claimed by another consumer meanwhile (DoEach
	// then finds them in flight and leaves them).
	Retry time.Duration
}

// Outcome counts what one [Consumer.Step] did with its batch.
type Outcome struct {
	Taken, Reclaimed       int // entries in the batch; of them, claimed again
	Processed, Duplicates  int // acknowledged
	Failed, InFlight, Dead int // left pending (failed, in flight); dead letters
}

func (o Outcome) String() string {
	return fmt.Sprintf("took %d (%d again): processed %d, duplicates %d, failed %d, in flight %d, dead %d",
		o.Taken, o.Reclaimed, o.Processed, o.Duplicates, o.Failed, o.InFlight, o.Dead)
}

// CreateGroup creates the consumer group (and the stream) unless it exists.
func (c *Consumer) CreateGroup(ctx context.Context) error {
	err := c.Client.XGroupCreateMkStream(ctx, c.Stream, c.Group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("batchconsumer: create group %s: %w", c.Group, err)
	}
	return nil
}

// Step takes one batch, runs it through DoEach and acknowledges what it
// may. It returns an empty Outcome if no entry came within Block.
func (c *Consumer) Step(ctx context.Context) (Outcome, error) {
	entries, reclaimed, err := c.take(ctx)
	if err != nil || len(entries) == 0 {
		return Outcome{}, err
	}
	msgs := make([]Message, len(entries))
	keys := make([]dedupe.Key, len(entries))
	for i, e := range entries {
		id, _ := e.Values["id"].(string)
		body, _ := e.Values["body"].(string)
		msgs[i] = Message{EntryID: e.ID, ID: id, Body: body}
		keys[i] = dedupe.Key{Channel: c.Channel, MessageID: id}
	}
	errs := c.Deduper.DoEach(ctx, keys, func(ctx context.Context, i int) error {
		return c.Handle(ctx, msgs[i])
	})
	o := Outcome{Taken: len(entries), Reclaimed: reclaimed}
	var ack, dead []string
	for i, err := range errs {
		switch {
		case err == nil:
			o.Processed++
			ack = append(ack, msgs[i].EntryID)
		case errors.Is(err, dedupe.ErrDuplicate):
			o.Duplicates++
			ack = append(ack, msgs[i].EntryID)
		case errors.Is(err, dedupe.ErrInvalidKey):
			o.Dead++
			dead = append(dead, msgs[i].EntryID)
		case errors.Is(err, dedupe.ErrInFlight):
			o.InFlight++
		default: // the handler's error, a store's error, ctx's: leave it pending
			o.Failed++
		}
	}
	return o, c.settle(ctx, entries, ack, dead)
}

// take returns the pending entries idle for Retry (claimed for this
// consumer), then new entries up to Batch in all.
func (c *Consumer) take(ctx context.Context) ([]redis.XMessage, int, error) {
	batch := c.Batch
	if batch <= 0 {
		batch = 64
	}
	again, _, err := c.Client.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream: c.Stream, Group: c.Group, Consumer: c.Name,
		MinIdle: positive(c.Retry, 5*time.Second), Start: "0-0", Count: int64(batch),
	}).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("batchconsumer: xautoclaim: %w", err)
	}
	if len(again) >= batch {
		return again, len(again), nil
	}
	block := positive(c.Block, time.Second)
	if len(again) > 0 {
		block = -1 // do not wait: the batch has work already
	}
	streams, err := c.Client.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: c.Group, Consumer: c.Name, Streams: []string{c.Stream, ">"},
		Count: int64(batch - len(again)), Block: block,
	}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, 0, fmt.Errorf("batchconsumer: xreadgroup: %w", err)
	}
	entries := again
	for _, s := range streams {
		entries = append(entries, s.Messages...)
	}
	return entries, len(again), nil
}

// settle acknowledges ack, and moves dead to the dead-letter stream and
// acknowledges them, in one MULTI/EXEC: a dead letter is never both
// acknowledged and lost.
func (c *Consumer) settle(ctx context.Context, entries []redis.XMessage, ack, dead []string) error {
	if len(ack)+len(dead) == 0 {
		return nil
	}
	byID := make(map[string]redis.XMessage, len(entries))
	for _, e := range entries {
		byID[e.ID] = e
	}
	_, err := c.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range dead {
			values := map[string]any{"entry": id}
			for k, v := range byID[id].Values {
				values[k] = v
			}
			p.XAdd(ctx, &redis.XAddArgs{Stream: c.Stream + ":dead", Values: values})
		}
		p.XAck(ctx, c.Stream, c.Group, append(ack, dead...)...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("batchconsumer: acknowledge %d entries: %w", len(ack)+len(dead), err)
	}
	return nil
}

// pending returns how many entries of the group are pending, or -1 on a
// store error.
func (c *Consumer) pending(ctx context.Context) int64 {
	p, err := c.Client.XPending(ctx, c.Stream, c.Group).Result()
	if err != nil {
		return -1
	}
	return p.Count
}

// positive returns d, or def if d <= 0.
func positive(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
