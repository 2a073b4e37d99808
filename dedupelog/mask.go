package dedupelog

import (
	"context"
	"log/slog"
	"strings"
)

// A Mode says how [Mask] hides a message id.
type Mode int

// Masking modes.
const (
	// Hash writes a message id as the first 16 bytes of its HMAC-SHA256 under
	// the key, in hex (32 characters): the records of one message still match
	// each other, and without the key the id cannot be found from its hash,
	// even for ids as guessable as sequence numbers.
	Hash Mode = iota + 1
	// Drop leaves the message id out.
	Drop
)

// MinKeyLen is the shortest key, in bytes, with which [Mask] hashes; with a
// shorter one it drops the ids instead, since numeric ids under a guessable
// key are found again by trying them all.
const MinKeyLen = 16

// Mask returns a handler that hides in each record the message id in every
// field that can hold it ([Fields]; the package documentation lists them)
// before passing it to h, as [NewMasker](mode, key) does: message_id is
// hashed ([Hash]) or left out ([Drop]); key "{platform}:{message_id}" becomes
// "{platform}:{hash}" or "{platform}"; in the texts of error, mark_error and
// panic the key, and the id standing on its own, are replaced the same way
// (the field is then a string). Records without message_id or key pass
// unchanged. key is copied.
func Mask(h slog.Handler, mode Mode, key []byte) slog.Handler {
	return &maskHandler{h: h, m: NewMasker(mode, key)}
}

type maskHandler struct {
	h slog.Handler
	m *Masker
}

// Enabled reports whether h takes records at level.
func (m *maskHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return m.h.Enabled(ctx, level)
}

// Handle passes r to h with its message id masked.
func (m *maskHandler) Handle(ctx context.Context, r slog.Record) error {
	platform, id, ok := messageOf(r)
	if !ok {
		return m.h.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if fields[a.Key] == 0 {
			out.AddAttrs(a)
			return true
		}
		v := a.Value.Resolve().String()
		switch masked, keep := m.m.Field(a.Key, v, platform, id); {
		case !keep:
		case masked == v:
			out.AddAttrs(a) // nothing to hide: the value keeps its kind
		default:
			out.AddAttrs(slog.String(a.Key, masked))
		}
		return true
	})
	return m.h.Handle(ctx, out)
}

// messageOf returns the platform and message id a record names, in the
// fields platform and message_id or in key.
func messageOf(r slog.Record) (platform, id string, ok bool) {
	var hasID bool
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "platform":
			platform = a.Value.String()
		case "message_id":
			id, hasID = a.Value.String(), true
		case "key":
			if p, i, found := strings.Cut(a.Value.String(), ":"); found {
				platform, id, hasID = p, i, true
			}
		}
		return true
	})
	return platform, id, hasID
}

// WithAttrs returns the handler over h.WithAttrs(attrs); attrs are not masked.
func (m *maskHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &maskHandler{h: m.h.WithAttrs(attrs), m: m.m}
}

// WithGroup returns the handler over h.WithGroup(name).
func (m *maskHandler) WithGroup(name string) slog.Handler {
	return &maskHandler{h: m.h.WithGroup(name), m: m.m}
}
