package dedupehttp

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
)

// Handler is the webhook endpoint of one platform: an [http.Handler] that
// authenticates each delivery with a [platform.Preset], deduplicates it with
// a [dedupe.Deduper] under the preset's TTL, and serves it to the next
// handler, as [Middleware] describes. Make one with [New]. Its [Stats] count
// what it refused or passed through before the Deduper. A Handler is safe for
// concurrent use.
type Handler struct {
	h    http.Handler // *handler, or Events' *eventsHandler
	c    *config
	name string
}

// New returns a [Handler] that serves the deliveries of platform p to next:
//
//	tg := platform.Telegram.WithSecret(os.Getenv("TELEGRAM_WEBHOOK_SECRET"))
//	http.Handle("POST /telegram", dedupehttp.New(d, tg, telegramHandler))
//
// Each delivery is authenticated with p's secret first ([WithVerify]; without
// one, New warns that it is not), and keyed with [FromPreset]. The message is
// claimed and marked with d.With(dedupe.WithTTL(p.TTL),
// dedupe.WithWait(p.AckBudget)): one Deduper serves every platform, each
// with its own TTL, and a copy that arrives while the first is processed
// waits up to p.AckBudget for its outcome, then is answered as a duplicate if
// the first was processed and 503 with Retry-After otherwise, never
// acknowledged blindly. If p.Replay is set and p has its secret, copies get
// the first answer ([WithReplay]). opts are those of [Middleware]; a [WithVerify] among them
// replaces p's. A preset that delivers several events at once (p.Events) is
// served by [Events].
func New(d *dedupe.Deduper, p platform.Preset, next http.Handler, opts ...Option) *Handler {
	c := newConfig(append([]Option{WithVerify(p)}, opts...))
	if p.Events != nil {
		c.log(context.Background(), slog.LevelError, "dedupe: dedupehttp: the preset delivers several events at once: serve it with dedupehttp.Events",
			slog.String("platform", p.Name))
	}
	return &Handler{
		h: &handler{
			d:       presetDeduper(d, p),
			extract: FromPreset(p),
			next:    next,
			c:       c,
		},
		c:    c,
		name: p.Name,
	}
}

// ServeHTTP authenticates, deduplicates and serves r, as [New] says.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.h.ServeHTTP(w, r) }

// Name returns the name of the Handler's preset, such as "telegram".
func (h *Handler) Name() string { return h.name }

// Stats returns a snapshot of the Handler's counters. It is safe to call
// concurrently with ServeHTTP.
func (h *Handler) Stats() Stats { return h.c.stats.snapshot() }

// presetDeduper returns d with p's TTL and the wait of its AckBudget.
func presetDeduper(d *dedupe.Deduper, p platform.Preset) *dedupe.Deduper {
	return d.With(dedupe.WithTTL(p.TTL), dedupe.WithWait(waitFor(p.AckBudget)))
}

// waitFor is the wait of a preset's AckBudget: none for a platform that gives
// no budget (dedupe.WithWait(0) would keep the Deduper's own).
func waitFor(budget time.Duration) time.Duration {
	if budget <= 0 {
		return -1
	}
	return budget
}
