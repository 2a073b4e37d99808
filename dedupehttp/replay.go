package dedupehttp

import (
	"context"
	"log/slog"
	"net/http"
	"net/textproto"

	"github.com/gatewaykit/dedupe"
)

// WithReplay makes the middleware keep the handler's 2xx answer to a new
// message (its status, Content-Type, the headers named and its body) with the
// mark, and answer a redelivery, or a copy that waited for the first, with it
// byte for byte and [HeaderVerdict] "replayed": for platforms that show the
// answer to the user. [New] and [Middleware] replay for a preset whose Replay
// is set (see [platform.Preset]). A copy gets the [WithDuplicate] answer if
// the first was an empty 200, over [dedupe.MaxResultSize]
// ([Stats].ReplayTooLarge) or not kept by the store (not a
// [dedupe.ResultStore]). [Async], which answers first, ignores it.
func WithReplay(headers ...string) Option {
	names := make([]string, len(headers))
	for i, h := range headers {
		names[i] = textproto.CanonicalMIMEHeaderKey(h)
	}
	return func(c *config) {
		c.replay = true
		c.replayHeaders = names
	}
}

// replays reports whether the middleware keeps and replays answers: given
// WithReplay, or authenticating with a preset whose Replay is set.
func (c *config) replays() bool {
	return c.replay || c.preset != nil && c.preset.Replay
}

// serveKept serves the request as serve does, recording the handler's
// answer, and returns the answer to keep with the mark: nil for an empty
// 200 or one too large to keep.
func (rn *run) serveKept(ctx context.Context) ([]byte, error) {
	rec := &answerRecorder{ResponseWriter: rn.ResponseWriter, names: rn.h.c.replayHeaders}
	rn.ResponseWriter = rec
	if err := rn.serve(ctx); err != nil || rn.panicked != nil {
		return nil, err // a handler that panicked after its status: its answer may be cut short
	}
	ans, ok := rec.answer(rn.status)
	if !ok {
		c := rn.h.c
		c.stats.replayTooLarge.Add(1)
		c.warn(ctx, warnReplayTooLarge, "dedupe: dedupehttp: answer too large to replay; copies get the plain duplicate answer",
			slog.String("key", rn.d.key.String()), slog.Int("status", rn.status), slog.Int("limit", dedupe.MaxResultSize))
		return nil, nil
	}
	return ans, nil
}

// replayTo answers w with the answer kept for a duplicate. It returns false,
// having written nothing, if ans cannot be read: the copy is then answered
// as a plain duplicate.
func (c *config) replayTo(w http.ResponseWriter, r *http.Request, d *delivery, ans []byte) bool {
	status, header, body, err := decodeAnswer(ans)
	if err != nil {
		c.log(r.Context(), slog.LevelWarn, "dedupe: dedupehttp: kept answer unreadable; answered as a plain duplicate",
			slog.String("key", d.key.String()), slog.Any("error", err))
		return false
	}
	d.verdict = VerdictDuplicate
	h := w.Header()
	for k, v := range header {
		h[k] = v
	}
	h.Set(HeaderVerdict, "replayed")
	w.WriteHeader(status)
	_, _ = w.Write(body)
	return true
}
