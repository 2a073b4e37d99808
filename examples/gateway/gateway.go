package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatewaykit/dedupe"
)

// Gateway settings. The core's latency is usually short, but one call in five
// is slow, longer than the platform's client timeout (see platform.go), so
// that the platform retries while the first copy is still in flight.
const (
	// telegramTTL is how long a processed update stays marked: Telegram keeps
	// an undelivered update, and so redelivers it, for at most 24 hours.
	telegramTTL = 24 * time.Hour
	// lease bounds how long a claim outlives a gateway that died while
	// processing; the Deduper renews it while the core works.
	lease = 30 * time.Second
	// deliveryTimeout bounds one call of the core. The call is not cancelled
	// when the platform hangs up: its retry should find the update processed.
	deliveryTimeout = 10 * time.Second
	// maxBody bounds the size of an update the handler reads.
	maxBody = 1 << 20

	fastLatencyMax = 15 * time.Millisecond
	slowLatencyMin = 40 * time.Millisecond
	slowLatencyMax = 120 * time.Millisecond
	slowShare      = 0.2
)

// gatewayConfig configures one gateway instance.
type gatewayConfig struct {
	store    storeSpec
	fallback *storeSpec // the Deduper's fallback store, if any
	addr     string     // listen address, "127.0.0.1:0" for any free port
	seed     uint64
	failRate float64 // share of updates whose first delivery to the core fails
	// inFlightStatus is the HTTP status of a copy that arrives while another
	// copy of its update is processed: 503 (retry later) by default.
	inFlightStatus int
	logger         *slog.Logger
}

// gateway is one webhook gateway: an HTTP server whose handler runs each
// Telegram update through a [dedupe.Deduper] on its way to the core.
type gateway struct {
	cfg      gatewayConfig
	store    dedupe.Store
	fallback dedupe.Store // nil without one
	deduper  *dedupe.Deduper
	core     *core
	srv      *http.Server
	addr     string
	served   chan error // the result of srv.Serve
	received atomic.Int64
	stopOnce sync.Once
	sum      summary
	stopErr  error
}

// startGateway opens the store, listens on cfg.addr and serves until stop.
func startGateway(ctx context.Context, cfg gatewayConfig) (*gateway, error) {
	store, err := openStore(ctx, cfg.store)
	if err != nil {
		return nil, err
	}
	opts := []dedupe.Option{dedupe.WithTTL(telegramTTL), dedupe.WithLease(lease), dedupe.WithLogger(cfg.logger)}
	var fallback dedupe.Store
	if cfg.fallback != nil {
		if fallback, err = openStore(ctx, *cfg.fallback); err != nil {
			_ = store.Close()
			return nil, fmt.Errorf("-fallback: %w", err)
		}
		opts = append(opts, dedupe.WithFallback(fallback))
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		_ = store.Close()
		if fallback != nil {
			_ = fallback.Close()
		}
		return nil, err
	}
	g := &gateway{
		cfg:      cfg,
		store:    store,
		fallback: fallback,
		deduper:  dedupe.New(store, opts...),
		core:     newCore(cfg.seed, cfg.failRate),
		addr:     ln.Addr().String(),
		served:   make(chan error, 1),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /telegram", g.handleTelegram)
	g.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { g.served <- g.srv.Serve(ln) }()
	return g, nil
}

// URL returns the webhook URL the platform posts updates to.
func (g *gateway) URL() string { return "http://" + g.addr + "/telegram" }

// stop shuts the server down, waiting for the handlers still running (also
// those whose platform request timed out), lets the Deduper write the marks
// the primary store did not take at first, closes the stores and returns what
// the gateway did. It may be called more than once.
func (g *gateway) stop(ctx context.Context) (summary, error) {
	g.stopOnce.Do(func() {
		err := g.srv.Shutdown(ctx)
		if serr := <-g.served; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		if ferr := g.deduper.Flush(ctx); ferr != nil {
			err = errors.Join(err, fmt.Errorf("marks queued for the store not written: %w", ferr))
		}
		err = errors.Join(err, g.deduper.Close(), g.store.Close())
		if g.fallback != nil {
			err = errors.Join(err, g.fallback.Close())
		}
		st := g.deduper.Stats()
		g.sum = summary{
			Addr:        g.addr,
			Backend:     st.Backend,
			Received:    g.received.Load(),
			Duplicates:  st.Duplicates,
			InFlight:    st.InFlight,
			Failed:      st.Failed,
			StoreErrors: st.StoreErrors,
			StoreCalls:  st.Latency["claim"].Count + st.Latency["mark"].Count + st.Latency["release"].Count,
			StoreTime:   st.Latency["claim"].Sum + st.Latency["mark"].Sum + st.Latency["release"].Sum,
			Fallbacks:   st.Fallbacks,
			Deferred:    st.Deferred,
			Replayed:    st.Replayed,
			Dropped:     st.Dropped,
			Layers:      st.Layers,
		}
		g.sum.Processed, g.sum.CoreFailures = g.core.counts()
		g.stopErr = err
	})
	return g.sum, g.stopErr
}

// summary is what a gateway instance did between its start and its stop.
// A gateway process prints it as JSON when it stops.
type summary struct {
	PID         int    `json:"pid"`
	Addr        string `json:"addr"`
	Backend     string `json:"backend"`
	Received    int64  `json:"received"`     // requests that reached the handler
	Duplicates  uint64 `json:"duplicates"`   // answered 200 without processing
	InFlight    uint64 `json:"in_flight"`    // answered inFlightStatus without processing
	Failed      uint64 `json:"failed"`       // the core failed; the claim was released
	StoreErrors uint64 `json:"store_errors"` // store calls that failed
	// StoreCalls counts the claims, marks and releases, which took StoreTime.
	StoreCalls uint64        `json:"store_calls"`
	StoreTime  time.Duration `json:"store_time"`
	// With a fallback store: calls it served alone, marks queued for the
	// primary, of them written to it, and queued work dropped.
	Fallbacks uint64 `json:"fallbacks"`
	Deferred  uint64 `json:"deferred"`
	Replayed  uint64 `json:"replayed"`
	Dropped   uint64 `json:"dropped"`
	// Layers counts the claims each layer of a layered store answered.
	Layers map[string]uint64 `json:"layers,omitempty"`
	// Processed counts, for each update id, the times the core processed it.
	Processed map[int64]int `json:"processed"`
	// CoreFailures counts, for each update id, the deliveries the core failed.
	CoreFailures map[int64]int `json:"core_failures"`
}

// update is the part of a Telegram Update the gateway reads. A real gateway
// would hand the message on to the core; the simulated core needs only the id.
type update struct {
	UpdateID json.Number `json:"update_id"`
}

// handleTelegram is the webhook handler. Its answers tell the platform what to
// do next:
//   - 200 when the update was processed now or before (a duplicate): the
//     platform stops.
//   - inFlightStatus (503 with Retry-After by default) when another copy of
//     the update is being processed: the platform retries later, and finds it
//     processed, or processes it if that copy failed.
//   - 500 when the core failed: the claim was released, the retry processes it.
//   - 400 for a body that is not an update: retrying cannot help.
func (g *gateway) handleTelegram(w http.ResponseWriter, r *http.Request) {
	g.received.Add(1)
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.UseNumber() // ids stay exact, whatever their size
	var u update
	if err := dec.Decode(&u); err != nil {
		http.Error(w, "not a Telegram update: "+err.Error(), http.StatusBadRequest)
		return
	}
	id, err := strconv.ParseInt(u.UpdateID.String(), 10, 64)
	if err != nil || id <= 0 {
		http.Error(w, fmt.Sprintf("update_id %q is not a positive integer", u.UpdateID), http.StatusBadRequest)
		return
	}
	key := dedupe.Key{Channel: "telegram", MessageID: u.UpdateID.String()}

	// Once claimed, the update is delivered to the core even if the platform
	// hangs up meanwhile: the platform's retry then finds it processed.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), deliveryTimeout)
	defer cancel()
	err = g.deduper.Do(ctx, key, func(ctx context.Context) error {
		return g.core.deliver(ctx, id)
	})
	switch {
	case err == nil:
		answer(w, http.StatusOK, "processed")
	case errors.Is(err, dedupe.ErrDuplicate):
		answer(w, http.StatusOK, "duplicate")
	case errors.Is(err, dedupe.ErrInFlight):
		if g.cfg.inFlightStatus != http.StatusOK {
			w.Header().Set("Retry-After", "1")
		}
		answer(w, g.cfg.inFlightStatus, "in_flight")
	case errors.Is(err, errCoreFailed):
		answer(w, http.StatusInternalServerError, "failed")
	default: // the store failed: nothing was processed, or it was but not marked
		g.cfg.logger.Warn("gateway: delivery failed", "key", key.String(), "error", err)
		answer(w, http.StatusServiceUnavailable, "store_error")
	}
}

// answer writes the verdict as a small JSON body.
func answer(w http.ResponseWriter, status int, verdict string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, "{\"ok\":%t,\"verdict\":%q}\n", status == http.StatusOK, verdict)
}

// errCoreFailed is the core's answer to a delivery it failed.
var errCoreFailed = errors.New("core unavailable")

// core is the simulated AI core behind the gateway. It takes a random while
// to answer, fails the first delivery of some updates (after working on it for
// that while, like a model call that times out), and counts the times it
// processed each update: more than once is the bug this library prevents.
type core struct {
	failRate float64

	mu        sync.Mutex
	rng       *rand.Rand
	seen      map[int64]bool
	processed map[int64]int
	failures  map[int64]int
}

func newCore(seed uint64, failRate float64) *core {
	return &core{
		failRate:  failRate,
		rng:       rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
		seen:      make(map[int64]bool),
		processed: make(map[int64]int),
		failures:  make(map[int64]int),
	}
}

// deliver processes update id, or fails to.
func (c *core) deliver(ctx context.Context, id int64) error {
	c.mu.Lock()
	fail := !c.seen[id] && c.rng.Float64() < c.failRate
	c.seen[id] = true
	latency := time.Duration(c.rng.Int64N(int64(fastLatencyMax))) + time.Millisecond
	if c.rng.Float64() < slowShare {
		latency = slowLatencyMin + time.Duration(c.rng.Int64N(int64(slowLatencyMax-slowLatencyMin)))
	}
	c.mu.Unlock()

	t := time.NewTimer(latency)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if fail {
		c.failures[id]++
		return errCoreFailed
	}
	c.processed[id]++
	return nil
}

// counts returns copies of the processed and failure counts.
func (c *core) counts() (processed, failures map[int64]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.processed), maps.Clone(c.failures)
}
