// Gateway is the job of package dedupe in miniature: a Telegram webhook
// gateway that hands every update to its (simulated) AI core exactly once,
// although the platform delivers it at least once.
//
// It starts a webhook gateway on a loopback port: a net/http handler that
// decodes each update with UseNumber, keys it by update_id (channel
// "telegram") and wraps the delivery to the core in [dedupe.Deduper.Do]. The
// core takes a random while to answer, longer than the platform waits one time
// in five, and fails the first delivery of one update in ten. A simulated
// platform then delivers the updates as platforms and proxies do: it retries on
// client timeouts (some retries arrive while the first copy is still being
// processed, some after), retries on 5xx with a backoff, and sends some updates
// as 2 or 3 concurrent copies. The program prints a short report and exits
// with status 1 unless every update was processed exactly once, so CI can run
// it as a check (status 2 reports a setup error, such as a store that cannot
// be opened).
//
// The handler answers 200 to a processed update and to a duplicate, so that
// the platform stops; 500 when the core failed, after which the Deduper has
// released the update for the platform's retry; and 503 with Retry-After to a
// copy that arrives while another copy is being processed. Answering 200 there
// would lose the update when the copy in flight then fails after its own
// platform request timed out: -inflight-status 200 -messages 1000 shows it.
//
// Usage:
//
//	go run ./examples/gateway [flags]
//
// The flags are:
//
//	-store memory|sqlite:PATH|PATH.db|redis://HOST:PORT/DB|postgres://…|layered:…
//	    the store of marks and claims (default memory). A SQLite file, Redis
//	    and PostgreSQL survive a restart of the gateway and can be shared by
//	    several gateway processes. A Redis Cluster is a redis:// URL naming
//	    its nodes with addr= (redis://HOST:PORT?addr=HOST:PORT&addr=…).
//	    layered:STORE puts a memory layer (5
//	    minutes) in front of STORE, which decides: a retry of an update this
//	    gateway processed is answered without a round trip.
//	-fallback STORE
//	    the Deduper's fallback (dedupe.WithFallback): it serves while the
//	    store fails, and the marks it took are written to the store once it
//	    answers. The report checks that every processed update is marked on
//	    the store after the run.
//	-fault loss=F,latency=D,down=D
//	    put network faults between the gateways and the store's server while
//	    the platform delivers, through a TCP proxy: a share F of the chunks
//	    either way lost (each drops its connection, as TCP cannot lose bytes
//	    and carry on), D added to each round trip, or the server unreachable
//	    for D (needs -fallback). The platform then retries for minutes, as
//	    real ones do, rather than seconds.
//	-restart
//	    after the deliveries, stop the gateway, close the store, open it again,
//	    start a new gateway, and let the platform redeliver a quarter of the
//	    updates. On by default for the durable stores, off for memory: a
//	    memory store forgets on restart, and -restart with it shows that.
//	-instances N
//	    run N gateway processes (default 1, in this process). The program
//	    starts itself N times in -serve mode and the platform sprays deliveries,
//	    copies and retries across them; the processes share the store, so each
//	    update is still processed once across all of them. With -store memory
//	    each process has its own store, and the report shows the updates they
//	    both processed.
//	-messages N
//	    the number of updates (default 200).
//	-seed N
//	    the seed of the simulation's random choices (default 1).
//	-fail F
//	    the share of updates whose first delivery to the core fails (default 0.1).
//	-inflight-status CODE
//	    the answer to a copy that arrives while another is processed (default 503).
//	-v
//	    log the Deduper's verdicts (slog debug records) to stderr.
//	-serve [-addr HOST:PORT]
//	    run one gateway only: print its address as JSON, serve until stdin is
//	    closed or the process is interrupted, then print what it processed as
//	    JSON. -instances uses this mode.
//
// Update ids start at a number taken from the clock, so that runs on one
// durable store do not see each other's updates. On a server the program keeps
// to its own keys: Redis keys start with "dedupe:examples-gateway:", and
// PostgreSQL gets the table examples_gateway_dedupe.
//
// The deployment checklist of the ClawBridge gateway design: 30% packet loss
// and 500 ms latency between gateway and store, then Redis failing over to
// PostgreSQL for three seconds:
//
//	go run ./examples/gateway -store redis://127.0.0.1:6379/0 -fault loss=0.3,latency=500ms -messages 40
//	go run ./examples/gateway -store redis://127.0.0.1:6379/0 -fallback postgres://… -fault down=3s
//
// Two gateway processes sharing one Redis store:
//
//	go run ./examples/gateway -store redis://127.0.0.1:6379/0 -instances 2
//
// The same by hand, each gateway in a terminal of its own, then the same
// update posted to both (the second answer is a duplicate):
//
//	go run ./examples/gateway -serve -fail 0 -store redis://127.0.0.1:6379/0 -addr 127.0.0.1:8081
//	go run ./examples/gateway -serve -fail 0 -store redis://127.0.0.1:6379/0 -addr 127.0.0.1:8082
//	curl -d '{"update_id": 1001, "message": {"text": "hi"}}' http://127.0.0.1:8081/telegram
//	curl -d '{"update_id": 1001, "message": {"text": "hi"}}' http://127.0.0.1:8082/telegram
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// runTimeout bounds a whole run, however slow the machine or the store;
// faultRunTimeout a run with -fault.
const (
	runTimeout      = 2 * time.Minute
	faultRunTimeout = 10 * time.Minute
)

// config is the program's settings, set by its flags.
type config struct {
	Store          string  // -store
	Fallback       string  // -fallback; "" for none
	Fault          string  // -fault; "" for none
	Messages       int     // -messages
	Seed           uint64  // -seed
	Restart        *bool   // -restart; nil: on for durable stores
	Instances      int     // -instances
	FailRate       float64 // -fail
	InFlightStatus int     // -inflight-status
	Verbose        bool    // -v
	Serve          bool    // -serve
	Addr           string  // -addr, in -serve mode
	// Stderr receives log records and the output of gateway processes.
	// Default os.Stderr.
	Stderr io.Writer
}

// defaultConfig returns the settings of a run without flags.
func defaultConfig() config {
	return config{
		Store:          "memory",
		Messages:       200,
		Seed:           1,
		Instances:      1,
		FailRate:       0.1,
		InFlightStatus: http.StatusServiceUnavailable,
		Addr:           "127.0.0.1:0",
	}
}

func (c config) check() error {
	switch {
	case c.Messages < 1 || c.Messages > 1_000_000:
		return fmt.Errorf("-messages %d: want 1 to 1000000", c.Messages)
	case c.Instances < 1 || c.Instances > 16:
		return fmt.Errorf("-instances %d: want 1 to 16", c.Instances)
	case !(c.FailRate >= 0 && c.FailRate <= 1):
		return fmt.Errorf("-fail %v: want 0 to 1", c.FailRate)
	case !retried(c.InFlightStatus) && (c.InFlightStatus < 200 || c.InFlightStatus > 299):
		return fmt.Errorf("-inflight-status %d: want 2xx (the platform stops), 429 or 5xx (it retries)", c.InFlightStatus)
	}
	spec, err := parseStore(c.Store)
	if err != nil {
		return err
	}
	if c.Fallback != "" {
		fb, err := parseStore(c.Fallback)
		if err != nil {
			return fmt.Errorf("-fallback: %w", err)
		}
		if fb.kind == "layered" {
			return errors.New("-fallback: want a store of one layer")
		}
	}
	f, err := parseFault(c.Fault)
	if err != nil {
		return err
	}
	if !f.none() && !spec.onServer() {
		return fmt.Errorf("-fault needs a store on a server (redis://…, postgres://… or layered: either), not %s", spec)
	}
	if f.Down > 0 && c.Fallback == "" {
		return errors.New("-fault down=D needs -fallback: without one, the gateway fails closed while the store is down")
	}
	return nil
}

// fallbackSpec returns the -fallback store, or nil.
func (c config) fallbackSpec() *storeSpec {
	if c.Fallback == "" {
		return nil
	}
	fb, _ := parseStore(c.Fallback)
	return &fb
}

func (c config) stderr() io.Writer {
	if c.Stderr == nil {
		return os.Stderr
	}
	return c.Stderr
}

// logger returns the gateway's logger: warnings, and the Deduper's verdicts
// with -v.
func (c config) logger() *slog.Logger {
	level := slog.LevelWarn
	switch {
	case c.Verbose:
		level = slog.LevelDebug
	case c.Fault != "":
		level = slog.LevelError // store errors are the point; the report counts them
	}
	return slog.New(slog.NewTextHandler(c.stderr(), &slog.HandlerOptions{Level: level}))
}

// autoBool is a boolean flag that remembers whether it was set.
type autoBool struct{ v **bool }

func (b autoBool) IsBoolFlag() bool { return true }

func (b autoBool) String() string {
	if b.v == nil || *b.v == nil {
		return "auto"
	}
	return strconv.FormatBool(**b.v)
}

func (b autoBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*b.v = &v
	return nil
}

// parseFlags returns the config that args select.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	c := defaultConfig()
	c.Stderr = stderr
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Store, "store", c.Store, "the store: memory, sqlite:PATH, PATH.db, redis://HOST:PORT/DB, postgres://… or layered: and one of the durable ones")
	fs.StringVar(&c.Fallback, "fallback", "", "the Deduper's fallback store, used while the store fails (same forms as -store)")
	fs.StringVar(&c.Fault, "fault", "", "faults between the gateways and the store's server: loss=F,latency=D,down=D")
	fs.IntVar(&c.Messages, "messages", c.Messages, "number of updates the platform sends")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the simulation's random choices")
	fs.Var(autoBool{&c.Restart}, "restart", "restart the gateway, reopening the store, before the platform redelivers a batch (default: on for durable stores)")
	fs.IntVar(&c.Instances, "instances", c.Instances, "number of gateway processes sharing the store")
	fs.Float64Var(&c.FailRate, "fail", c.FailRate, "share of updates whose first delivery to the core fails")
	fs.IntVar(&c.InFlightStatus, "inflight-status", c.InFlightStatus, "HTTP status answered to a copy that arrives while another is processed")
	fs.BoolVar(&c.Verbose, "v", false, "log the Deduper's verdicts to stderr")
	fs.BoolVar(&c.Serve, "serve", false, "run one gateway until stdin is closed, printing its address and then its summary as JSON")
	fs.StringVar(&c.Addr, "addr", c.Addr, "listen address in -serve mode")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return c, c.check()
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := mainArgs(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// mainArgs runs the program with args and returns its exit status: 0 when
// every update was processed exactly once, 1 when not, 2 for an error.
func mainArgs(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "gateway:", err)
		return 2
	}
	if cfg.Serve {
		if err := serve(ctx, cfg, stdin, stdout); err != nil {
			fmt.Fprintln(stderr, "gateway -serve:", err)
			return 2
		}
		return 0
	}
	rep, err := run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "gateway:", err)
		return 2
	}
	rep.write(stdout)
	if !rep.ExactlyOnce {
		return 1
	}
	return 0
}

// instance is a running gateway: in this process, or a child process.
type instance interface {
	URL() string
	stop(ctx context.Context) (summary, error)
}

// run runs the simulation that cfg describes and reports it.
func run(ctx context.Context, cfg config) (report, error) {
	start := time.Now()
	if err := cfg.check(); err != nil {
		return report{}, err
	}
	spec, _ := parseStore(cfg.Store)
	fspec, _ := parseFault(cfg.Fault)
	timeout := runTimeout
	if !fspec.none() {
		timeout = faultRunTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel() // also kills gateway processes left by an error

	rep := newReport(cfg, spec, fspec)
	// Update ids start at a base taken from the clock, so that a run on a
	// durable store used by an earlier run sends updates it has not seen.
	msgs := newMessages(idBase(cfg.Messages), cfg.Messages)
	p := newPlatform(cfg.Seed, !fspec.none())
	defer p.close()

	// With -fault the gateways reach the store's server through a proxy that
	// puts the faults on the way; the report checks the marks without it.
	primary := spec
	var fs *faults
	if !fspec.none() {
		var err error
		if fs, spec, err = startFaults(spec, fspec); err != nil {
			return rep, err
		}
		defer fs.close()
		cfg.Store = spec.flag()
	}

	first, err := runPhase(ctx, cfg, spec, 0, func(urls []string) {
		fs.begin()
		p.deliver(ctx, urls, msgs, true)
		fs.end(ctx) // the gateways write the outage's marks when they stop
	})
	if err != nil {
		return rep, stopped(ctx, err)
	}
	sums := append([]summary(nil), first...)
	rep.PerProcess = first
	if rep.Restart {
		again, err := rep.restart(ctx, cfg, spec, p, fs, msgs, first)
		if err != nil {
			return rep, stopped(ctx, err)
		}
		sums = append(sums, again...)
	}
	if ctx.Err() != nil {
		return rep, stopped(ctx, nil)
	}
	rep.Platform = p.stats()
	rep.FaultStats = fs.stats()
	rep.total(msgs, sums)
	if rep.Fallback != "" {
		if rep.OnPrimary, err = markedOn(ctx, primary, msgs); err != nil {
			return rep, fmt.Errorf("checking the marks on the primary store: %w", err)
		}
		rep.ExactlyOnce = rep.ExactlyOnce && rep.OnPrimary == rep.Processed
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// restart runs the second phase: the platform redelivers a quarter of the
// updates, as if their answers had been lost, to new gateways on the store
// opened again. It counts what the new gateways processed.
func (rep *report) restart(ctx context.Context, cfg config, spec storeSpec, p *platform, fs *faults, msgs []message, first []summary) ([]summary, error) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 2))
	var batch []message
	for _, i := range rng.Perm(len(msgs))[:max(1, len(msgs)/4)] {
		batch = append(batch, msgs[i])
	}
	again, err := runPhase(ctx, cfg, spec, 1, func(urls []string) {
		fs.begin()
		p.deliver(ctx, urls, batch, false)
		fs.end(ctx)
	})
	if err != nil {
		return nil, err
	}
	rep.Redelivered = len(batch)
	before := make(map[int64]bool)
	for _, s := range first {
		for id := range s.Processed {
			before[id] = true
		}
	}
	for _, s := range again {
		for id, n := range s.Processed {
			if before[id] {
				rep.ProcessedAgain += n
			} else {
				rep.FirstAfterRestart += n
			}
		}
	}
	return again, nil
}

// stopped returns the error of a run that failed with err, or that was
// interrupted or timed out: then the gateways were killed and err says little.
func stopped(ctx context.Context, err error) error {
	switch ctx.Err() {
	case nil:
		return err
	case context.DeadlineExceeded:
		return errors.New("run timed out")
	}
	return errors.New("run interrupted")
}

// runPhase starts cfg.Instances gateways on the store, lets drive deliver to
// their URLs, and stops them: their stores are closed when it returns.
func runPhase(ctx context.Context, cfg config, spec storeSpec, phase int, drive func(urls []string)) ([]summary, error) {
	var insts []instance
	stopAll := func() ([]summary, error) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), processStopTimeout)
		defer cancel()
		sums := make([]summary, len(insts))
		errs := make([]error, len(insts))
		var wg sync.WaitGroup
		for i, in := range insts {
			wg.Go(func() { sums[i], errs[i] = in.stop(sctx) })
		}
		wg.Wait()
		return sums, errors.Join(errs...)
	}
	for i := range cfg.Instances {
		seed := cfg.Seed<<8 | uint64(phase<<4|i)
		var in instance
		var err error
		if cfg.Instances == 1 {
			in, err = startGateway(ctx, gatewayConfig{
				store:          spec,
				fallback:       cfg.fallbackSpec(),
				addr:           "127.0.0.1:0",
				seed:           seed,
				failRate:       cfg.FailRate,
				inFlightStatus: cfg.InFlightStatus,
				logger:         cfg.logger(),
			})
		} else {
			in, err = startProcess(ctx, cfg, seed)
		}
		if err != nil {
			_, _ = stopAll()
			return nil, err
		}
		insts = append(insts, in)
	}
	urls := make([]string, len(insts))
	for i, in := range insts {
		urls[i] = in.URL()
	}
	drive(urls)
	return stopAll()
}

// retried reports whether the platform retries a delivery answered status.
func retried(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}
