// Command durable serves a Telegram webhook whose handler is slow (an AI turn)
// with dedupehttp.Async and a durable queue: each update is answered 202
// Accepted with a queue id only once it is stored in the queue, processed in
// the background exactly once, and its state can be asked for at
// GET /queue/{id}. The queue's depth, outcomes and handler latency are on
// /metrics.
//
// Run without flags, it queues in a SQLite file in a temporary directory,
// plays Telegram (five updates, one of them redelivered while it waits and
// again once it is done), polls each queue id until it is done, prints the
// queue's metrics and exits:
//
//	go run ./examples/durable
//	go run ./examples/durable -queue redis://127.0.0.1:6379
//	go run ./examples/durable -queue 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//	go run ./examples/durable -queue memory -overflow 2
//
// -queue is "sqlite:PATH", "redis://…", "postgres://…" or "memory" (in the
// process: a crash loses accepted updates). The marks go to the same place
// (the memory queue marks in memory). On Redis and PostgreSQL the demo uses
// keys and tables of its own and deletes them at the end; -serve uses the
// stream "{dedupe-example:queue}" and the tables dedupe_example_queue and
// dedupe_example_marks, and keeps them. With -overflow N the first N updates
// waiting or running stay in memory and the rest spill to the queue. With
// -serve it keeps serving on -addr until interrupted; kill it with SIGKILL
// mid-handler and start it again on the same queue: no accepted update is
// lost or processed twice.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe/queue"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/dedupeprom"
	"github.com/gatewaykit/dedupe/deduperedis"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
	"github.com/gatewaykit/dedupe/postgres"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	queue := flag.String("queue", "", `"sqlite:PATH", "redis://…", "postgres://…" or "memory" (default: SQLite in a temporary directory)`)
	overflow := flag.Int("overflow", 0, "keep this many updates in memory first and spill the rest to the queue (0: queue them all)")
	work := flag.Duration("work", 300*time.Millisecond, "how long the handler works on an update")
	serve := flag.Bool("serve", false, "keep serving until interrupted instead of running the demo")
	secret := flag.String("telegram-secret", "demo-telegram-secret", "Telegram webhook secret_token")
	flag.Parse()
	if err := run(*addr, *queue, *overflow, *work, *serve, *secret); err != nil {
		log.Fatal(err)
	}
}

// backend is an opened queue and store, and what closes them.
type backend struct {
	queue queue.Queue
	store dedupe.Store
	close func()
	drop  func() // deletes the queue's and the store's data from a shared server
}

// open opens the queue and the store that spec names, under name.
func open(ctx context.Context, spec, name string) (*backend, error) {
	switch {
	case spec == "memory":
		q, s := queue.NewMemory(queue.MemoryConfig{}), dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		return &backend{q, s, func() { q.Close(); s.Close() }, func() {}}, nil
	case strings.HasPrefix(spec, "redis://"):
		opt, err := redis.ParseURL(spec)
		if err != nil {
			return nil, err
		}
		client := redis.NewClient(opt)
		q, err := deduperedis.NewQueue(client, deduperedis.QueueConfig{Name: name + ":queue"})
		if err != nil {
			return nil, err
		}
		s, err := deduperedis.New(client, deduperedis.Config{Prefix: name + ":"})
		drop := func() {
			for _, pattern := range []string{"{" + name + ":queue}*", name + ":*"} {
				for it := client.Scan(ctx, 0, pattern, 100).Iterator(); it.Next(ctx); {
					client.Del(ctx, it.Val())
				}
			}
		}
		return &backend{q, s, func() { q.Close(); s.Close(); client.Close() }, drop}, err
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		pool, err := pgxpool.New(ctx, spec)
		if err != nil {
			return nil, err
		}
		table := strings.ReplaceAll(name, "-", "_")
		q, err := postgres.NewQueue(ctx, pool, postgres.QueueConfig{Table: table + "_queue"})
		if err != nil {
			pool.Close()
			return nil, err
		}
		s, err := postgres.New(ctx, pool, postgres.Config{Table: table + "_marks"})
		drop := func() { pool.Exec(ctx, `DROP TABLE IF EXISTS `+table+`_queue, `+table+`_marks`) }
		return &backend{q, s, func() { q.Close(); s.Close(); pool.Close() }, drop}, err
	case strings.HasPrefix(spec, "sqlite:"):
		path := strings.TrimPrefix(spec, "sqlite:")
		q, err := queue.OpenSQLite(path, queue.SQLiteConfig{})
		if err != nil {
			return nil, err
		}
		s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{})
		if err != nil {
			q.Close()
			return nil, err
		}
		return &backend{q, s, func() { q.Close(); s.Close() }, func() {}}, nil
	}
	return nil, fmt.Errorf("-queue %q: want sqlite:PATH, redis://…, postgres://… or memory", spec)
}

// newMux builds the gateway: the webhook, the status of queue ids and the
// metrics. It returns the Async to close.
func newMux(b *backend, overflow int, work time.Duration, tg platform.Preset) (*http.ServeMux, *dedupehttp.Async) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, _ := dedupehttp.KeyFrom(r.Context())
		select {
		case <-time.After(work): // the AI core thinking
			fmt.Printf("  handler: update %s processed (queue id %s)\n", k.MessageID, dedupehttp.QueueID(r.Context()))
		case <-r.Context().Done(): // shutting down: it is put back in the queue
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	opts := []dedupehttp.AsyncOption{dedupehttp.WithVerify(tg), dedupehttp.WithWorkers(2), dedupehttp.WithMaxAttempts(3)}
	if overflow > 0 {
		opts = append(opts, dedupehttp.WithOverflow(b.queue), dedupehttp.WithQueueSize(max(overflow-2, 0)))
	} else {
		opts = append(opts, dedupehttp.WithQueue(b.queue))
	}
	d := dedupe.New(b.store, dedupe.WithTTL(tg.TTL), dedupe.WithLease(30*time.Second))
	a := dedupehttp.NewAsync(d, dedupehttp.FromPreset(tg), handler, opts...)
	reg := prometheus.NewRegistry()
	reg.MustRegister(dedupeprom.NewCollector(d), dedupeprom.NewQueueCollector([]*dedupehttp.Async{a}))
	mux := http.NewServeMux()
	mux.Handle("POST /telegram", a)
	mux.Handle("GET /queue/{id}", a.StatusHandler())
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux, a
}

func run(addr, spec string, overflow int, work time.Duration, serve bool, secret string) error {
	ctx := context.Background()
	if spec == "" {
		dir, err := os.MkdirTemp("", "dedupe-durable")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		spec = "sqlite:" + filepath.Join(dir, "gateway.db")
	}
	name := "dedupe-example"
	if !serve { // the demo's own keys or tables on a shared server, deleted at the end
		name += "-" + strings.ToLower(rand.Text()[:8])
	}
	b, err := open(ctx, spec, name)
	if err != nil {
		return err
	}
	defer b.close()
	if !serve {
		defer b.drop()
	}
	tg := platform.Telegram.WithSecret(secret)
	mux, a := newMux(b, overflow, work, tg)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	base := "http://" + ln.Addr().String()
	if serve {
		fmt.Println("serving on", base, "(POST /telegram, GET /queue/{id}, GET /metrics), queue", spec)
		sig, stop := signal.NotifyContext(ctx, os.Interrupt)
		defer stop()
		<-sig.Done()
	} else if err := demo(base, platformtest.NewSigner("telegram", secret)); err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return a.Close(sctx) // a handler still running is put back in the queue
}

// demo plays Telegram against the gateway at base.
func demo(base string, tg *platformtest.Signer) error {
	ids := map[int]string{}
	for u := 1; u <= 5; u++ {
		status, verdict, id, err := deliver(base, tg, u)
		if err != nil {
			return err
		}
		fmt.Printf("update %d: %d %s, queue id %s\n", u, status, verdict, id)
		ids[u] = id
	}
	status, verdict, _, err := deliver(base, tg, 3) // a redelivery while it waits
	if err != nil {
		return err
	}
	fmt.Printf("update 3 again: %d %s\n", status, verdict)
	for u := 1; u <= 5; u++ {
		if err := waitDone(base, ids[u]); err != nil {
			return err
		}
	}
	fmt.Println("every queue id is done")
	if status, verdict, _, err = deliver(base, tg, 3); err != nil {
		return err
	}
	fmt.Printf("update 3 once more: %d %s\n", status, verdict)
	return printMetrics(base)
}

// deliver posts Telegram update u, signed, and returns the answer.
func deliver(base string, tg *platformtest.Signer, u int) (int, string, string, error) {
	body := fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"text":"hello"}}`, u, u)
	req, err := http.NewRequest(http.MethodPost, base+"/telegram", strings.NewReader(body))
	if err != nil {
		return 0, "", "", err
	}
	req.Header = tg.Sign([]byte(body), time.Now())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get(dedupehttp.HeaderVerdict), resp.Header.Get(dedupehttp.HeaderQueueID), nil
}

// waitDone polls GET /queue/{id} until the update is done.
func waitDone(base, id string) error {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(base + "/queue/" + id)
		if err != nil {
			return err
		}
		var s struct{ State string }
		err = json.NewDecoder(resp.Body).Decode(&s)
		resp.Body.Close()
		switch {
		case err != nil:
			return err
		case s.State == "done":
			return nil
		case s.State == "failed":
			return fmt.Errorf("queue id %s failed", id)
		}
	}
	return errors.New("queue id " + id + " not done in a minute")
}

// printMetrics prints the queue's metrics from /metrics.
func printMetrics(base string) error {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	buf := new(strings.Builder)
	if _, err := io.Copy(buf, resp.Body); err != nil {
		return err
	}
	for line := range strings.Lines(buf.String()) {
		if strings.HasPrefix(line, "dedupe_queue_depth") || strings.HasPrefix(line, "dedupe_queue_processed_total") ||
			strings.HasPrefix(line, "dedupe_queue_processing_duration_seconds_count") {
			fmt.Print("  ", line)
		}
	}
	return nil
}
