package dedupelog

import (
	"context"
	"log/slog"
	"sync/atomic"
)

// Decision is the message of the one record a [dedupe.Deduper] logs per
// decision (see the package documentation for its fields).
const Decision = "dedupe: decision"

// Level returns a handler that passes the Deduper's decision records to h at
// level instead of debug, so that a handler at info level keeps them without
// also keeping every other debug record. Other records pass unchanged.
func Level(h slog.Handler, level slog.Leveler) slog.Handler {
	return &levelHandler{h: h, level: level}
}

type levelHandler struct {
	h     slog.Handler
	level slog.Leveler
}

// Enabled reports whether h takes records at l, or decision records if l is
// debug (the Deduper asks for debug before building one).
func (l *levelHandler) Enabled(ctx context.Context, lv slog.Level) bool {
	return l.h.Enabled(ctx, lv) || lv == slog.LevelDebug && l.h.Enabled(ctx, l.level.Level())
}

// Handle passes r to h, a decision record at the handler's level.
func (l *levelHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelDebug && r.Message == Decision {
		r.Level = l.level.Level()
	}
	if !l.h.Enabled(ctx, r.Level) {
		return nil
	}
	return l.h.Handle(ctx, r)
}

// WithAttrs returns the handler over h.WithAttrs(attrs).
func (l *levelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &levelHandler{h: l.h.WithAttrs(attrs), level: l.level}
}

// WithGroup returns the handler over h.WithGroup(name).
func (l *levelHandler) WithGroup(name string) slog.Handler {
	return &levelHandler{h: l.h.WithGroup(name), level: l.level}
}

// SampleDuplicates returns a handler that passes to h one decision record in
// every whose result is "duplicate" (the first, the every+1-th, …), adding
// the field sample_every=every to each it passes, so that a pipeline can
// count them back. A platform that redelivers in bursts otherwise fills the
// log with records of messages already processed. Other records pass
// unchanged; every ≤ 1 returns h. The count is shared by the handlers
// derived with WithAttrs and WithGroup.
func SampleDuplicates(h slog.Handler, every int) slog.Handler {
	if every <= 1 {
		return h
	}
	return &sampleHandler{h: h, every: uint64(every), n: new(atomic.Uint64)}
}

type sampleHandler struct {
	h     slog.Handler
	every uint64
	n     *atomic.Uint64
}

// Enabled reports whether h takes records at level.
func (s *sampleHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return s.h.Enabled(ctx, level)
}

// Handle passes r to h, unless it is a duplicate's decision record left out
// by the sampling.
func (s *sampleHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message != Decision || attr(r, "result") != "duplicate" {
		return s.h.Handle(ctx, r)
	}
	if (s.n.Add(1)-1)%s.every != 0 {
		return nil
	}
	r = r.Clone()
	r.AddAttrs(slog.Uint64("sample_every", s.every))
	return s.h.Handle(ctx, r)
}

// WithAttrs returns the handler over h.WithAttrs(attrs), sharing the count.
func (s *sampleHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &sampleHandler{h: s.h.WithAttrs(attrs), every: s.every, n: s.n}
}

// WithGroup returns the handler over h.WithGroup(name), sharing the count.
func (s *sampleHandler) WithGroup(name string) slog.Handler {
	return &sampleHandler{h: s.h.WithGroup(name), every: s.every, n: s.n}
}

// attr returns the string value of r's top-level field name, or "".
func attr(r slog.Record, name string) string {
	var v string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == name {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}
