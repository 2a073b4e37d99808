package dedupehttp

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"

	"github.com/gatewaykit/dedupe/internal/httpreplay"
)

// WithReplay makes the middleware keep the handler's 2xx answer to a new
// message (status, body, headers describing the body such as Content-Type,
// and those named; never Set-Cookie or Date) with the mark, and answer a
// redelivery, or a copy that waited for the first, with it byte for byte and
// [HeaderVerdict] "replayed": for platforms that show the answer to the
// user. [New] and [Middleware] replay for a preset whose Replay is set (see
// [platform.Preset]). A copy gets the [WithDuplicate] answer if the first
// was an empty 200, over [dedupe.MaxResultSize] ([Stats].ReplayTooLarge), or
// gone from the store before its mark. [Async] ignores it.
//
// Only an endpoint that authenticates its deliveries replays (a preset given
// its secret): elsewhere anyone who knows a message id could forge a copy and
// read the first answer, so copies get the plain duplicate answer unless
// [WithReplayUnauthenticated] says otherwise; nor to a copy only a token in
// its body authenticates ([platform.Preset.TokenInBody]: Feishu's).
func WithReplay(headers ...string) Option {
	var kept []string // nil: httpreplay.DefaultHeaders
	if len(headers) > 0 {
		kept = append(slices.Clone(httpreplay.DefaultHeaders), headers...)
	}
	return func(c *config) {
		c.replay = true
		c.replayHeaders = kept
	}
}

// WithReplayUnauthenticated lets an endpoint that authenticates nothing (a
// preset without a secret, or a custom [Extractor] without [WithVerify])
// replay answers as [WithReplay] says. Without it such an endpoint answers
// every copy with the plain duplicate answer, since it cannot tell a copy
// from a forgery. Use it only behind an authentication of your own, such as
// edge.RequireAuth or a private network.
func WithReplayUnauthenticated() Option {
	return func(c *config) { c.replayUnauthenticated = true }
}

// replayAsked reports whether the options ask to keep and replay answers:
// WithReplay, or authenticating with a preset whose Replay is set.
func (c *config) replayAsked() bool {
	return c.replay || c.preset != nil && c.preset.Replay
}

// replayAllowed reports whether the middleware replays as asked: it
// authenticates each delivery, or WithReplayUnauthenticated allows it. Read
// once, at construction.
func (c *config) replayAllowed() bool {
	authenticated := c.preset != nil && c.preset.CheckSecret() == nil
	return c.replayAsked() && (authenticated || c.replayUnauthenticated)
}

// replays reports whether the middleware keeps and replays answers.
func (c *config) replays() bool { return c.replaying }

// serveKept serves the request as serve does, recording the handler's
// answer, and returns the answer to keep with the mark: nil for an empty
// 200, for one too large to keep, and for one a panic may have cut short.
func (rn *run) serveKept(ctx context.Context) ([]byte, error) {
	rec := httpreplay.NewRecorder(rn.ResponseWriter, httpreplay.Config{Headers: rn.h.c.replayHeaders})
	rn.ResponseWriter = rec
	if err := rn.serve(ctx); err != nil || rn.panicked != nil {
		return nil, err
	}
	if resp, ok := rec.Response(); ok && resp.Status == http.StatusOK && len(resp.Body) == 0 {
		return nil, nil // the plain duplicate answer is the same
	}
	ans, err := rec.Encode()
	if errors.Is(err, httpreplay.ErrTooLarge) {
		c := rn.h.c
		c.stats.replayTooLarge.Add(1)
		c.warn(ctx, warnReplayTooLarge, "dedupe: dedupehttp: answer too large to replay; copies get the plain duplicate answer",
			slog.String("key", rn.d.key.String()), slog.Int("status", rn.status), slog.Any("error", err))
		return nil, nil
	}
	if err != nil { // a header httpreplay would refuse to read back
		rn.h.c.log(ctx, slog.LevelWarn, "dedupe: dedupehttp: answer not kept for replay",
			slog.String("key", rn.d.key.String()), slog.Any("error", err))
		return nil, nil
	}
	return ans, nil
}

// replayTo answers w with the answer kept for a duplicate. It returns false,
// having written nothing, if ans cannot be read or the copy is authenticated
// by a token in its body alone: the copy is then answered as a plain
// duplicate.
func (c *config) replayTo(w http.ResponseWriter, r *http.Request, d *delivery, ans []byte) bool {
	if d.tokenInBody {
		c.debug(r.Context(), "dedupe: dedupehttp: copy authenticated by a token in its body alone; answered as a plain duplicate, not replayed",
			slog.String("platform", c.preset.Name))
		return false
	}
	resp, err := httpreplay.Decode(ans)
	if err != nil {
		c.log(r.Context(), slog.LevelWarn, "dedupe: dedupehttp: kept answer unreadable; answered as a plain duplicate",
			slog.String("key", d.key.String()), slog.Any("error", err))
		return false
	}
	d.verdict = VerdictDuplicate
	w.Header().Set(HeaderVerdict, "replayed")
	_ = resp.Replay(w)
	return true
}
