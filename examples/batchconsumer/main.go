// Command batchconsumer consumes a Redis stream in batches through the batch
// API of the Deduper: each consumer of a consumer group takes up to 64
// entries at once (XREADGROUP COUNT 64, and XAUTOCLAIM for the entries left
// pending), runs them through Deduper.DoEach (one claim and one mark round
// trip for the batch on a store that is a dedupe.BatchStore), and
// acknowledges only the entries processed or found processed already. A
// failed entry stays pending and is claimed again once idle, by this
// consumer or another; so each message is processed once, however often the
// producer added it or the stream handed it out, and none is lost.
//
// Run without flags, it plays a producer that adds 300 messages, retrying
// some (a second XADD of the same message), and a message without an id,
// then runs two consumers whose handler fails the first attempt of one
// message in ten, until every message is processed; it prints what each
// consumer did and checks that each message ran once:
//
//	go run ./examples/batchconsumer
//	go run ./examples/batchconsumer -store memory -consumers 4 -batch 32
//	go run ./examples/batchconsumer -store sqlite:/tmp/marks.db
//
// -redis is the Redis server of the stream (default redis://$DEDUPE_REDIS_ADDR/0,
// or 127.0.0.1:6379); -store is "redis" (the marks on that server),
// "memory" or "sqlite:PATH". The stream, its group and the marks have names
// of their own, deleted at the end. The stream's name has a hash tag, so
// that it and its dead-letter stream share a slot of a Redis Cluster.
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"log"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
	"github.com/redis/go-redis/v9"
)

// Config is one run of the demonstration.
type Config struct {
	RedisURL  string // the stream's server
	Store     string // "redis", "memory" or "sqlite:PATH"
	Messages  int    // messages the producer adds
	Consumers int    // consumers in the group, running at once
	Batch     int    // most entries a consumer takes at once
	FailEvery int    // the handler fails the first attempt of every FailEvery-th message (0: never)
	Timeout   time.Duration
}

// Report is what a run did.
type Report struct {
	Entries  int            // entries the producer added (retries included)
	Runs     map[string]int // handler runs per message id
	Effects  map[string]int // successful runs per message id
	Steps    []Outcome      // each batch of each consumer
	Pending  int64          // entries of the group still pending at the end
	Dead     int64          // entries in the dead-letter stream
	Consumed map[string]int // entries each consumer acknowledged
}

func main() {
	cfg := Config{}
	flag.StringVar(&cfg.RedisURL, "redis", defaultRedisURL(), "the Redis server of the stream")
	flag.StringVar(&cfg.Store, "store", "redis", `where the marks go: "redis" (the stream's server), "memory" or "sqlite:PATH"`)
	flag.IntVar(&cfg.Messages, "messages", 300, "messages the producer adds")
	flag.IntVar(&cfg.Consumers, "consumers", 2, "consumers in the group")
	flag.IntVar(&cfg.Batch, "batch", 64, "most entries a consumer takes at once")
	flag.IntVar(&cfg.FailEvery, "fail-every", 10, "the handler fails the first attempt of every n-th message (0: never)")
	flag.DurationVar(&cfg.Timeout, "timeout", time.Minute, "give up after this long")
	flag.Parse()
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	if err := rep.Check(cfg); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d messages in %d entries, %d batches: each message processed once; %d pending, %d dead letter\n",
		len(rep.Effects), rep.Entries, len(rep.Steps), rep.Pending, rep.Dead)
	for _, name := range slices.Sorted(maps.Keys(rep.Consumed)) {
		fmt.Printf("  %s acknowledged %d entries\n", name, rep.Consumed[name])
	}
}

func defaultRedisURL() string {
	if addr := os.Getenv("DEDUPE_REDIS_ADDR"); addr != "" {
		return "redis://" + addr + "/0"
	}
	return "redis://127.0.0.1:6379/0"
}

// Check reports whether every message was processed exactly once and
// nothing is left pending.
func (r *Report) Check(cfg Config) error {
	if len(r.Effects) != cfg.Messages {
		return fmt.Errorf("%d of %d messages processed", len(r.Effects), cfg.Messages)
	}
	for id, n := range r.Effects {
		if n != 1 {
			return fmt.Errorf("message %s processed %d times", id, n)
		}
	}
	if r.Pending != 0 || r.Dead != 1 {
		return fmt.Errorf("%d entries pending and %d dead letters at the end, want 0 and 1", r.Pending, r.Dead)
	}
	return nil
}

// Run adds the messages to a stream of its own, runs the consumers until
// every message is processed and nothing is pending, and deletes the
// stream and the marks.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	opt, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, err
	}
	client := redis.NewClient(opt)
	defer client.Close()
	name := "batchconsumer-" + rand.Text()[:10]
	stream := "{" + name + "}:orders"
	defer client.Del(context.WithoutCancel(ctx), stream, stream+":dead")
	store, closeStore, err := openStore(ctx, cfg.Store, client, name)
	if err != nil {
		return nil, err
	}
	defer closeStore()
	d := dedupe.New(store, dedupe.WithLease(10*time.Second))
	defer d.Close()

	rep := &Report{Runs: map[string]int{}, Effects: map[string]int{}, Consumed: map[string]int{}}
	if rep.Entries, err = produce(ctx, client, stream, cfg.Messages); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	handle := func(_ context.Context, m Message) error {
		mu.Lock()
		defer mu.Unlock()
		rep.Runs[m.ID]++
		if cfg.FailEvery > 0 && numberOf(m.ID)%cfg.FailEvery == 0 && rep.Runs[m.ID] == 1 {
			return fmt.Errorf("order %s: warehouse unreachable", m.ID)
		}
		rep.Effects[m.ID]++
		return nil
	}
	err = consumeAll(ctx, cfg, rep, &mu, func(i int) *Consumer {
		return &Consumer{Client: client, Stream: stream, Group: "shipping", Name: fmt.Sprint("consumer-", i),
			Deduper: d, Channel: "orders", Handle: handle, Batch: cfg.Batch,
			Block: 200 * time.Millisecond, Retry: time.Second}
	})
	if err != nil {
		return rep, err
	}
	pending, err := client.XPending(ctx, stream, "shipping").Result()
	if err != nil {
		return rep, err
	}
	rep.Pending = pending.Count
	rep.Dead, err = client.XLen(ctx, stream+":dead").Result()
	return rep, err
}

// produce adds n messages, every seventh twice (a producer's retry), and one
// entry without an id.
func produce(ctx context.Context, client *redis.Client, stream string, n int) (int, error) {
	entries := 0
	p := client.Pipeline()
	for i := range n {
		id := fmt.Sprint("order-", i)
		for range 1 + boolInt(i%7 == 0) {
			p.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: map[string]any{"id": id, "body": "2 books"}})
			entries++
		}
	}
	p.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: map[string]any{"body": "no id"}})
	_, err := p.Exec(ctx)
	return entries + 1, err
}

// consumeAll runs cfg.Consumers consumers until every message has succeeded
// once and the group has nothing pending.
func consumeAll(ctx context.Context, cfg Config, rep *Report, mu *sync.Mutex, newConsumer func(i int) *Consumer) error {
	if err := newConsumer(0).CreateGroup(ctx); err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	done := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(rep.Effects) == cfg.Messages
	}
	errs := make(chan error, cfg.Consumers)
	for i := range max(cfg.Consumers, 1) {
		c := newConsumer(i)
		go func() {
			for {
				o, err := c.Step(ctx)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if o.Taken > 0 {
					rep.Steps = append(rep.Steps, o)
				}
				rep.Consumed[c.Name] += o.Processed + o.Duplicates + o.Dead
				mu.Unlock()
				if o.Taken == 0 && done() && c.pending(ctx) == 0 {
					errs <- nil
					return
				}
			}
		}()
	}
	var first error
	for range max(cfg.Consumers, 1) {
		if err := <-errs; err != nil && first == nil {
			first = err
			stop()
		}
	}
	return first
}

// openStore opens the store of the marks.
func openStore(ctx context.Context, spec string, client *redis.Client, name string) (dedupe.Store, func(), error) {
	switch {
	case spec == "redis":
		s, err := deduperedis.New(client, deduperedis.Config{Prefix: name + ":"})
		drop := func() {
			ctx := context.WithoutCancel(ctx)
			for it := client.Scan(ctx, 0, name+":*", 100).Iterator(); it.Next(ctx); {
				client.Del(ctx, it.Val())
			}
		}
		return s, drop, err
	case spec == "memory":
		s := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		return s, func() { _ = s.Close() }, nil
	case strings.HasPrefix(spec, "sqlite:"):
		s, err := dedupe.OpenSQLite(strings.TrimPrefix(spec, "sqlite:"), dedupe.SQLiteConfig{})
		if err != nil {
			return nil, nil, err
		}
		return s, func() { _ = s.Close() }, nil
	}
	return nil, nil, fmt.Errorf("batchconsumer: unknown -store %q: want redis, memory or sqlite:PATH", spec)
}

// numberOf returns n of "order-n".
func numberOf(id string) int {
	var n int
	_, _ = fmt.Sscanf(id, "order-%d", &n)
	return n
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
