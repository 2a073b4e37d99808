package dedupehttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
)

// What every request goes through before the Deduper sees it: the body is
// read once, authenticated, answered if it is a protocol request the preset
// answers itself, and keyed; and how the middleware answers what the Deduper
// decided.

// Extractor returns the [dedupe.Key] of a webhook delivery. It may read
// r.Body, or get the buffered bytes without a copy from [Body]: the handler
// still sees the whole body. It returns an error wrapping
// [dedupe.ErrNoMessageID] for a request that carries no message (a handshake
// such as Slack's url_verification), which by default reaches the handler
// without deduplication; see [DefaultExtractError] for the others.
type Extractor func(r *http.Request) (dedupe.Key, error)

// DefaultExtractError is the default policy of [WithExtractError]:
//   - An error wrapping [dedupe.ErrNoMessageID] (and so [platform.ErrNotAMessage])
//     means a request that carries no message, such as a Slack or Feishu
//     url_verification challenge, a Discord PING, a OneBot heartbeat, or an
//     empty body (a GET that verifies the webhook's URL): it passes to the
//     handler without deduplication, and the handler answers it.
//   - A non-empty body that is not JSON, or JSON of the wrong shape (an error
//     wrapping a [*json.SyntaxError] or a [*json.UnmarshalTypeError]), an
//     invalid id ([dedupe.ErrInvalidKey]) and any other error are answered 400
//     Bad Request, with the error in the body.
//
// Whatever the policy, a delivery served without deduplication that is not a
// protocol request is counted in [Stats].Undeduplicated and logged at warn
// level; see [WithRefuseUndeduplicated] to refuse those instead.
func DefaultExtractError(w http.ResponseWriter, r *http.Request, err error) bool {
	if errors.Is(err, dedupe.ErrNoMessageID) {
		if b, _ := Body(r); len(b) == 0 || !malformed(err) {
			return true
		}
	}
	http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
	return false
}

// malformed reports whether err tells of a body that is not the expected
// JSON.
func malformed(err error) bool {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	return errors.As(err, &syntax) || errors.As(err, &typ)
}

// next tells a handler what to do with a request after prepare.
type next int

const (
	nextDedupe next = iota // deduplicate under the key
	nextPass               // serve without deduplication
	nextDone               // answered already
)

// prepare receives r (see receive), extracts its key and applies the
// extract-error policy. It returns a shallow copy of r whose Body reads the
// buffer and whose context carries the delivery.
func (c *config) prepare(w http.ResponseWriter, r *http.Request, extract Extractor) (*http.Request, *delivery, next) {
	r2, d := c.receive(w, r)
	if d == nil {
		return nil, nil, nextDone
	}
	key, err := extract(r2)
	d.body.set(d.body.data)
	r2.Body = &d.body
	if err != nil {
		return r2, d, c.extractFailed(w, r2, d, err)
	}
	d.key = key
	return r2, d, nextDedupe
}

// receive refuses r if its source is not allowed (see WithSourceFilter),
// buffers its body and authenticates it (see WithVerify). It returns a
// shallow copy of r whose Body reads the buffer and whose context is the
// delivery, or a nil delivery when it answered r itself.
func (c *config) receive(w http.ResponseWriter, r *http.Request) (*http.Request, *delivery) {
	if c.refuseSource(w, r) {
		return nil, nil
	}
	data, err := c.readBody(w, r)
	if err != nil {
		c.refuseBody(w, r, err)
		return nil, nil
	}
	received := len(data)
	tokenInBody := false
	if c.preset != nil {
		tokenInBody = c.preset.TokenInBody(data, r.Header) // of the body as received
		var answered bool
		if data, answered = c.authenticate(w, r, data); answered {
			return nil, nil
		}
	}
	d := &delivery{Context: r.Context(), tokenInBody: tokenInBody}
	d.body.set(data)
	r2 := r.WithContext(d) // handlers must not modify the request they are given
	r2.Body = &d.body
	if len(data) != received { // decrypted: the handler reads the plaintext
		r2.ContentLength = int64(len(data))
	}
	return r2, d
}

// refuseBody answers a request whose body could not be read.
func (c *config) refuseBody(w http.ResponseWriter, r *http.Request, err error) {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		c.debug(r.Context(), "dedupe: dedupehttp: request body too large", slog.Int64("limit", c.maxBody))
		http.Error(w, fmt.Sprintf("request body larger than %d bytes", c.maxBody), http.StatusRequestEntityTooLarge)
		return
	}
	c.debug(r.Context(), "dedupe: dedupehttp: cannot read request body", slog.Any("error", err))
	http.Error(w, "cannot read request body", http.StatusBadRequest)
}

// authenticate verifies data with the preset. It returns the body to key on,
// or answered true when it answered the request itself: 401 for a forgery,
// the preset's answer to a protocol request that needs the secret.
func (c *config) authenticate(w http.ResponseWriter, r *http.Request, data []byte) ([]byte, bool) {
	p := c.preset
	verified, err := p.VerifyRequest(r, data, c.now())
	if err != nil {
		c.stats.unauthenticated.Add(1)
		c.warn(r.Context(), warnUnauthenticated, "dedupe: dedupehttp: unauthenticated delivery refused",
			slog.String("platform", p.Name), slog.String("remote_addr", r.RemoteAddr), slog.Any("error", err))
		w.Header().Set(HeaderVerdict, "unauthenticated")
		http.Error(w, "unauthenticated", http.StatusUnauthorized)
		return nil, true
	}
	if resp, ok := p.Answer(verified); ok {
		c.stats.protocol.Add(1)
		w.Header().Set("Content-Type", answerType(resp))
		w.Header().Set(HeaderVerdict, string(VerdictProtocol))
		_, _ = w.Write(resp)
		return nil, true
	}
	return verified, false
}

// extractFailed applies the extract-error policy to a request without a key,
// and counts and logs what it decided.
func (c *config) extractFailed(w http.ResponseWriter, r *http.Request, d *delivery, err error) next {
	protocol := errors.Is(err, platform.ErrNotAMessage)
	noID := !protocol && errors.Is(err, dedupe.ErrNoMessageID) && (len(d.body.data) == 0 || !malformed(err))
	if noID && c.refuseNoID {
		c.undeduplicated(r, err, "refused")
		w.Header().Set(HeaderVerdict, string(VerdictUndeduplicated))
		http.Error(w, "bad request: no message id to deduplicate: "+err.Error(), http.StatusBadRequest)
		return nextDone
	}
	if !c.extractError(w, r, err) {
		c.stats.malformed.Add(1)
		c.debug(r.Context(), "dedupe: dedupehttp: no key, refused", slog.Any("error", err))
		return nextDone
	}
	if protocol {
		c.stats.protocol.Add(1)
		d.verdict = VerdictProtocol
		c.debug(r.Context(), "dedupe: dedupehttp: protocol request served without deduplication", slog.Any("error", err))
	} else {
		c.undeduplicated(r, err, "served")
		d.verdict = VerdictUndeduplicated
	}
	return nextPass
}

// undeduplicated counts and logs a delivery without a usable message id.
func (c *config) undeduplicated(r *http.Request, err error, how string) {
	c.stats.undeduplicated.Add(1)
	attrs := []slog.Attr{slog.String("outcome", how), slog.Any("error", err)}
	if c.preset != nil {
		attrs = append(attrs, slog.String("platform", c.preset.Name))
	}
	c.warn(r.Context(), warnUndeduplicated, "dedupe: dedupehttp: delivery without a usable message id, not deduplicated", attrs...)
}

// answer answers a request whose Deduper.Do did not run the handler.
func (c *config) answer(w http.ResponseWriter, r *http.Request, d *delivery, h http.Handler, err error) {
	switch {
	case errors.Is(err, dedupe.ErrDuplicate):
		d.verdict = VerdictDuplicate
		w.Header().Set(HeaderVerdict, string(VerdictDuplicate))
		c.duplicate.ServeHTTP(w, r)
	case errors.Is(err, dedupe.ErrInFlight):
		d.verdict = VerdictInFlight
		w.Header().Set(HeaderVerdict, string(VerdictInFlight))
		c.inFlight.ServeHTTP(w, r)
	case errors.Is(err, dedupe.ErrInvalidKey):
		d.key = dedupe.Key{}
		if c.extractFailed(w, r, d, err) == nextPass {
			h.ServeHTTP(w, r)
		}
	default: // the store failed; the Deduper logged it
		c.unavailable(w, "message store unavailable")
	}
}

// unavailable answers 503 with Retry-After, so that the platform retries.
func (c *config) unavailable(w http.ResponseWriter, why string) {
	w.Header().Set("Retry-After", c.retryAfter)
	w.Header().Set(HeaderVerdict, "unavailable")
	http.Error(w, why+", retry later", http.StatusServiceUnavailable)
}

func (c *config) debug(ctx context.Context, msg string, attrs ...slog.Attr) {
	if c.logger.Enabled(ctx, slog.LevelDebug) {
		c.log(ctx, slog.LevelDebug, msg, attrs...)
	}
}

func (c *config) log(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	if id := dedupe.TraceID(ctx); id != "" {
		attrs = append(attrs, slog.String("trace_id", id))
	}
	c.logger.LogAttrs(ctx, level, msg, attrs...)
}

// answerType is the Content-Type of a preset's answer to a protocol request:
// JSON for an object (Feishu's challenge, QQ's validation, DingTalk's
// encrypted "success"), plain text for anything else, such as the bare
// echostr that WeChat and WeCom expect back from their URL check.
func answerType(resp []byte) string {
	if len(resp) > 0 && resp[0] == '{' {
		return "application/json"
	}
	return "text/plain; charset=utf-8"
}
