package dedupelog

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/gatewaykit/dedupe"
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
// "{platform}:{hash}" or "{platform}"; in the texts of error, err,
// mark_error and panic the key, and the id standing on its own, are
// replaced the same way (the field is then a string).
//
// The message is the one the record names in platform, message_id or key,
// or else the one named by the attributes bound to the logger
// ([slog.Logger.With]): those attributes are masked too, when they are
// bound, and a field is found at any depth of groups. An error (a field
// above whose value is an error) that wraps [dedupe.ErrInvalidKey] or
// [dedupe.ErrNoMessageID] quotes the value that could not become a key,
// which no field names: it is written as that sentinel's text alone, in
// every record (see [Masker.Error]). Records with none of these pass
// unchanged. key is copied.
func Mask(h slog.Handler, mode Mode, key []byte) slog.Handler {
	return &maskHandler{h: h, m: NewMasker(mode, key)}
}

type maskHandler struct {
	h   slog.Handler
	m   *Masker
	msg message // named by the attributes bound with WithAttrs
}

// message is the message a record names: its platform and id.
type message struct {
	platform, id string
	hasID        bool
}

// Enabled reports whether h takes records at level.
func (m *maskHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return m.h.Enabled(ctx, level)
}

// Handle passes r to h with its message id masked.
func (m *maskHandler) Handle(ctx context.Context, r slog.Record) error {
	msg := m.msg
	changed := false
	r.Attrs(func(a slog.Attr) bool {
		msg.scan(a)
		changed = changed || m.needs(a, msg)
		return true
	})
	if !changed {
		return m.h.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if a, keep := m.attr(a, msg); keep {
			out.AddAttrs(a)
		}
		return true
	})
	return m.h.Handle(ctx, out)
}

// scan notes in msg the message that a names, in the fields platform and
// message_id or in key, at any depth of groups.
func (msg *message) scan(a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		for _, g := range v.Group() {
			msg.scan(g)
		}
		return
	}
	switch a.Key {
	case "platform":
		msg.platform = v.String()
	case "message_id":
		msg.id, msg.hasID = v.String(), true
	case "key":
		if p, i, found := strings.Cut(v.String(), ":"); found {
			msg.platform, msg.id, msg.hasID = p, i, true
		}
	}
}

// needs reports whether a, or a field in its groups, is to be masked for
// msg.
func (m *maskHandler) needs(a slog.Attr, msg message) bool {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		for _, g := range v.Group() {
			if m.needs(g, msg) {
				return true
			}
		}
		return false
	}
	switch fields[a.Key] {
	case 0:
		return false
	case holdsText:
		if err, ok := v.Any().(error); ok && v.Kind() == slog.KindAny && quotesValue(err) {
			return true
		}
	}
	return msg.hasID || fields[a.Key] == holdsKey || fields[a.Key] == holdsID
}

// attr returns a with the message msg hidden in it and in its groups; keep
// is false for a field to leave out.
func (m *maskHandler) attr(a slog.Attr, msg message) (_ slog.Attr, keep bool) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		group := v.Group()
		out := make([]slog.Attr, 0, len(group))
		for _, g := range group {
			if g, keep := m.attr(g, msg); keep {
				out = append(out, g)
			}
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}, true
	}
	if fields[a.Key] == 0 {
		return a, true
	}
	if err, ok := v.Any().(error); ok && v.Kind() == slog.KindAny && fields[a.Key] == holdsText {
		if s := m.m.Error(err, msg.platform, msg.id); s != err.Error() {
			return slog.String(a.Key, s), true
		}
		return a, true
	}
	s := v.String()
	switch masked, keep := m.m.Field(a.Key, s, msg.platform, msg.id); {
	case !keep:
		return a, false
	case masked == s:
		return a, true // nothing to hide: the value keeps its kind
	default:
		return slog.String(a.Key, masked), true
	}
}

// quotesValue reports whether err is one of the library's errors about a
// value that could not become a key, whose texts quote that value (see
// [Masker.Error]).
func quotesValue(err error) bool {
	return errors.Is(err, dedupe.ErrInvalidKey) || errors.Is(err, dedupe.ErrNoMessageID)
}

// WithAttrs returns the handler over h.WithAttrs(attrs), attrs masked: the
// message they name is remembered for the records logged through it.
func (m *maskHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	msg := m.msg
	for _, a := range attrs {
		msg.scan(a)
	}
	masked := make([]slog.Attr, 0, len(attrs))
	for _, a := range attrs {
		if !m.needs(a, msg) {
			masked = append(masked, a)
		} else if a, keep := m.attr(a, msg); keep {
			masked = append(masked, a)
		}
	}
	return &maskHandler{h: m.h.WithAttrs(masked), m: m.m, msg: msg}
}

// WithGroup returns the handler over h.WithGroup(name), which masks as m.
func (m *maskHandler) WithGroup(name string) slog.Handler {
	return &maskHandler{h: m.h.WithGroup(name), m: m.m, msg: m.msg}
}
