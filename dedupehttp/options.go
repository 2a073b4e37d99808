package dedupehttp

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/queue"
)

// An Option configures [New], [Middleware] or [NewAsync]: what the three
// share (authentication, answers, limits, logging). Every Option is an
// [AsyncOption] too.
type Option func(*config)

// An AsyncOption configures [NewAsync]: an [Option], or one of the options of
// an [Async]'s queue and workers ([WithWorkers], [WithQueueSize],
// [WithAcceptedStatus], [WithDone], [WithQueue], [WithOverflow],
// [WithMaxAttempts], [WithHandlerTimeout], [WithQueuedHeaders]), which [New]
// and [Middleware] do not take.
type AsyncOption interface {
	applyAsync(c *config)
}

// applyAsync applies o to the config of an [Async].
func (o Option) applyAsync(c *config) { o(c) }

// asyncOption is an option that only an [Async] takes.
type asyncOption func(*config)

// applyAsync applies o to the config of an [Async].
func (o asyncOption) applyAsync(c *config) { o(c) }

type config struct {
	maxBody      int64
	duplicate    http.Handler
	inFlight     http.Handler
	extractError func(http.ResponseWriter, *http.Request, error) bool
	failed       func(status int) bool
	retryAfter   string
	logger       *slog.Logger
	now          func() time.Time
	allow        func(*http.Request) bool // WithSourceFilter

	preset                *platform.Preset // set by WithVerify: authenticate with it
	refuseNoID            bool             // WithRefuseUndeduplicated
	replay                bool             // WithReplay; also the preset's Replay
	replayHeaders         []string         // WithReplay: kept besides Content-Type
	replayUnauthenticated bool             // WithReplayUnauthenticated
	replaying             bool             // replay allowed: decided once the options are applied
	stats                 counters
	warnings              [numWarnings]limiter

	// Read by Async alone.
	workers        int
	queueSize      int
	acceptedStatus int
	done           func(context.Context, dedupe.Key, error)
	queue          queue.Queue
	spill          bool // WithOverflow: the queue takes what the memory tier cannot
	maxAttempts    int
	handlerTimeout time.Duration   // 0: from the visibility timeout
	queuedHeaders  map[string]bool // nil: all but hopHeaders
}

// newConfig returns the config of [New] and [Middleware] with opts applied.
func newConfig(opts []Option) *config {
	c := defaultConfig()
	for _, o := range opts {
		o(c)
	}
	c.replaying = c.replayAllowed()
	c.warnUnauthenticated()
	return c
}

// newAsyncConfig returns the config of [NewAsync] with opts applied.
func newAsyncConfig(opts []AsyncOption) *config {
	c := defaultConfig()
	for _, o := range opts {
		o.applyAsync(c)
	}
	c.warnUnauthenticated()
	return c
}

// defaultConfig returns the config no option changed.
func defaultConfig() *config {
	c := &config{
		maxBody:      DefaultMaxBodySize,
		duplicate:    http.HandlerFunc(answerOK),
		extractError: DefaultExtractError,
		failed:       func(status int) bool { return status < 200 || status > 299 },
		logger:       slog.Default(),
		now:          time.Now,

		workers:        DefaultWorkers,
		queueSize:      DefaultQueueSize,
		acceptedStatus: http.StatusAccepted,
		maxAttempts:    DefaultMaxAttempts,
	}
	c.inFlight = http.HandlerFunc(c.answerInFlight)
	WithRetryAfter(DefaultRetryAfter)(c)
	return c
}

// warnUnauthenticated logs, once at construction, that the endpoint does not
// authenticate deliveries, or that its secret cannot work.
func (c *config) warnUnauthenticated() {
	ctx := context.Background()
	var attrs []slog.Attr
	if c.replayAsked() && !c.replayAllowed() {
		attrs = append(attrs, slog.String("replay", "off: copies get the plain duplicate answer (WithReplayUnauthenticated)"))
	}
	if c.preset == nil {
		c.log(ctx, slog.LevelWarn, "dedupe: dedupehttp: endpoint is unauthenticated: deliveries are remembered without checking that they come from the platform; use dedupehttp.New or WithVerify with a preset given its secret",
			attrs...)
		return
	}
	switch err := c.preset.CheckSecret(); {
	case errors.Is(err, platform.ErrNoSecret):
		c.log(ctx, slog.LevelWarn, "dedupe: dedupehttp: endpoint is unauthenticated: the preset has no secret (platform.Preset.WithSecret)",
			append(attrs, slog.String("platform", c.preset.Name))...)
	case err != nil:
		c.log(ctx, slog.LevelError, "dedupe: dedupehttp: the preset's secret cannot be the platform's: every delivery will be refused",
			slog.String("platform", c.preset.Name), slog.Any("error", err))
	}
}

func answerOK(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }

// answerInFlight is the default answer to a copy in flight: 503 with
// Retry-After, so that the platform delivers it again.
func (c *config) answerInFlight(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Retry-After", c.retryAfter)
	http.Error(w, "message in flight, retry later", http.StatusServiceUnavailable)
}

// WithVerify makes the middleware authenticate each delivery with
// [platform.Preset.Verify] before anything else: a forgery is answered 401
// with [HeaderVerdict] "unauthenticated", counted in [Stats].Unauthenticated
// and logged at warn level (at most once a minute for each cause, with the
// number left out, so that an unsigned delivery is seen among wrong ones),
// and nothing of it reaches the extractor, the store or the handler, which
// read the body Verify returns (for an encrypted Feishu delivery, the
// plaintext). The middleware answers the protocol requests the preset
// answers itself ([platform.Preset.Answer]: QQ's callback URL validation).
//
// [New] sets it, and so do [Middleware] and [NewAsync] given an extractor
// made by [FromPreset] (a WithVerify among their options takes precedence);
// otherwise they authenticate nothing and warn at construction, as for a
// preset given no secret.
func WithVerify(p platform.Preset) Option {
	return func(c *config) { c.preset = &p }
}

// WithRefuseUndeduplicated makes the middleware refuse, with 400 Bad Request
// and [HeaderVerdict] "undeduplicated", a delivery whose key it cannot find
// and that is not a protocol request (see [DefaultExtractError]), such as an
// encrypted Feishu body without the Encrypt Key, a OneBot message event
// without a bot id, a QQ dispatch without an id, or OneBot's notices and
// requests, which have no id of their own. By default such a delivery is
// served without deduplication; either way it is counted in
// [Stats].Undeduplicated and logged at warn level (at most once a minute).
func WithRefuseUndeduplicated() Option {
	return func(c *config) { c.refuseNoID = true }
}

// WithClock sets the clock against which signed timestamps are checked
// (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now != nil {
			c.now = now
		}
	}
}

// WithMaxBodySize sets the largest request body the middleware reads (default
// [DefaultMaxBodySize]). A larger body is answered 413 Request Entity Too Large
// and reaches neither the extractor nor the handler. n <= 0 keeps the default.
func WithMaxBodySize(n int64) Option {
	return func(c *config) {
		if n > 0 {
			c.maxBody = n
		}
	}
}

// WithDuplicate sets the handler that answers a message already processed
// whose first answer is not replayed ([WithReplay]). The default answers 200
// with an empty body, so that the platform stops redelivering; the message's
// own handler never sees it. [KeyFrom] gives it the key and [VerdictDuplicate].
func WithDuplicate(h http.Handler) Option {
	return func(c *config) {
		if h != nil {
			c.duplicate = h
		}
	}
}

// WithInFlight sets the handler that answers a copy of a message that another
// request is still processing, after the copy waited for it as long as
// [dedupe.WithWait] allows ([New]: the preset's AckBudget). The default
// answers 503 with Retry-After, so that the platform delivers the copy again:
// acknowledging it would lose the message if the first request failed.
// [KeyFrom] gives it the key and [VerdictInFlight].
func WithInFlight(h http.Handler) Option {
	return func(c *config) {
		if h != nil {
			c.inFlight = h
		}
	}
}

// WithExtractError sets the policy for a request whose key the [Extractor]
// could not find (default [DefaultExtractError]). The policy either returns
// true, and the request reaches the handler without deduplication, or answers
// the request itself and returns false. It must not read the body.
func WithExtractError(f func(w http.ResponseWriter, r *http.Request, err error) bool) Option {
	return func(c *config) {
		if f != nil {
			c.extractError = f
		}
	}
}

// WithFailureStatus sets which statuses of the handler's answer count as a
// failure: the claim is then released instead of the message being marked, so
// that the platform's retry is processed. The default is any status outside
// 2xx: a handler that refuses a delivery (401, 403, 400, 429, 5xx) leaves the
// message unmarked, so that a forged or premature delivery never hides the
// real one. A handler that panics has always failed. A gateway whose handler
// answers 422 to a message it will never accept, and wants it remembered,
// can use
//
//	dedupehttp.WithFailureStatus(func(s int) bool { return (s < 200 || s > 299) && s != 422 })
func WithFailureStatus(failed func(status int) bool) Option {
	return func(c *config) {
		if failed != nil {
			c.failed = failed
		}
	}
}

// WithRetryAfter sets the Retry-After of the middleware's 503 answers (default
// [DefaultRetryAfter]; zero or less keeps the setting), rounded up to whole
// seconds.
func WithRetryAfter(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			return
		}
		secs := max(1, int64((d+time.Second-1)/time.Second))
		c.retryAfter = strconv.FormatInt(secs, 10)
	}
}

// WithLogger sets the logger for the middleware's own records: at warn level
// an unauthenticated endpoint (once, at construction), refused forgeries,
// deliveries served without deduplication and answers too large to replay
// (each at most once a minute), a full queue, and each delivery whose
// handler failed, with its key, the status it answered (0 if it panicked
// first) and the error; at debug level other refused requests; at error level a
// secret that cannot work and the failures of requests [Async] had already
// accepted, which the platform will not redeliver. The default is
// [slog.Default]. The [dedupe.Deduper] logs its verdicts and store errors to
// its own logger.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}
