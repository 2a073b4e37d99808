package dedupetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
)

// The tests of what callers send: key forms, invalid keys, closed stores and
// cancelled contexts.

func testKeyForms(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	base := s.key().MessageID
	keys := keyForms(base)
	for i, k := range keys {
		if err := k.Validate(); err != nil {
			t.Fatalf("test key %d invalid: %v", i, err)
		}
		for _, m := range keys[:i] {
			wantExists(t, st, m, true, "for an earlier key")
		}
		wantExists(t, st, k, false, "before its Mark")
		mark(t, st, k, s.d(10*time.Minute))
		wantExists(t, st, k, true, "after Mark")
	}
	wantExists(t, st, dedupe.Key{Channel: "web", MessageID: base}, false, "for a prefix of a marked id")
}

// keyForms returns valid keys of every form whose message ids start with
// base: ids with ':', channels that differ in case, multibyte text, the
// longest channel and id, and text that SQL, JSON or a pattern would take
// for syntax.
func keyForms(base string) []dedupe.Key {
	return []dedupe.Key{
		{Channel: "web", MessageID: base + ":a:b"},
		{Channel: "web", MessageID: base + ":a"},
		{Channel: "Web", MessageID: base + ":a"},
		{Channel: "qq", MessageID: base + "-消息-😀"},
		{Channel: "discord", MessageID: base + "-" + strings.Repeat("9", maxMessageIDLen-len(base)-1)},
		{Channel: strings.Repeat("c", maxChannelLen), MessageID: base},
		{Channel: "sql", MessageID: base + "'; DROP TABLE x; --"},
		{Channel: "pct", MessageID: base + "%_*?[]{}"},
		{Channel: "json", MessageID: base + `"],["x\\u0000<&>` + "\u2028"},
	}
}

func invalidKeys() []dedupe.Key {
	return []dedupe.Key{
		{},
		{Channel: "telegram"},
		{MessageID: "1"},
		{Channel: "a:b", MessageID: "1"},
		{Channel: "ok", MessageID: "nul\x00byte"},
		{Channel: "ok", MessageID: "bad\xffutf8"},
		{Channel: "ok", MessageID: "new\nline"},
		{Channel: "ok", MessageID: strings.Repeat("x", maxMessageIDLen+1)},
		{Channel: strings.Repeat("c", maxChannelLen+1), MessageID: "1"},
	}
}

func testInvalidKeys(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	ctx := context.Background()
	for _, k := range invalidKeys() {
		_, err := st.Exists(ctx, k)
		wantErr(t, err, dedupe.ErrInvalidKey, fmt.Sprintf("Exists(%q)", k))
		wantErr(t, st.Mark(ctx, k, time.Hour), dedupe.ErrInvalidKey, fmt.Sprintf("Mark(%q)", k))
		status, err := st.Claim(ctx, dedupe.NewClaim(k), time.Hour)
		wantErr(t, err, dedupe.ErrInvalidKey, fmt.Sprintf("Claim(%q)", k))
		if status == dedupe.Claimed {
			t.Fatalf("Claim(%q) returned a claim with an error", k)
		}
		bad := dedupe.Claim{Key: k, Token: "0123456789abcdef"}
		wantErr(t, st.Release(ctx, bad), dedupe.ErrInvalidKey, fmt.Sprintf("Release(%q)", k))
		wantErr(t, st.Extend(ctx, bad, time.Hour), dedupe.ErrInvalidKey, fmt.Sprintf("Extend(%q)", k))
	}
	// The valid prefix of an overlong id was not stored.
	trunc := dedupe.Key{Channel: "ok", MessageID: strings.Repeat("x", maxMessageIDLen)}
	wantExists(t, st, trunc, false, "for the truncation of a refused key")
	// The store still works.
	k := s.key()
	mark(t, st, k, s.d(10*time.Minute))
	wantExists(t, st, k, true, "after refused keys")
}

func testClosed(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	k := s.key()
	c := claim(t, st, k, s.d(10*time.Minute), dedupe.Claimed)
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx := context.Background()
	_, err := st.Exists(ctx, k)
	wantErr(t, err, dedupe.ErrClosed, "Exists after Close")
	wantErr(t, st.Mark(ctx, k, time.Hour), dedupe.ErrClosed, "Mark after Close")
	_, err = st.Claim(ctx, dedupe.NewClaim(s.key()), time.Hour)
	wantErr(t, err, dedupe.ErrClosed, "Claim after Close")
	wantErr(t, st.Extend(ctx, c, time.Hour), dedupe.ErrClosed, "Extend after Close")
	wantErr(t, st.Release(ctx, c), dedupe.ErrClosed, "Release after Close")
	if st.Backend() == "" {
		t.Error("Backend() after Close is empty")
	}
}

func testCancelledContext(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	k := s.key()
	held := claim(t, st, s.key(), s.d(10*time.Minute), dedupe.Claimed)

	_, err := st.Exists(ctx, k)
	wantErr(t, err, context.Canceled, "Exists with a cancelled context")
	wantErr(t, st.Mark(ctx, k, time.Hour), context.Canceled, "Mark with a cancelled context")
	wantExists(t, st, k, false, "after a cancelled Mark")
	_, err = st.Claim(ctx, dedupe.NewClaim(k), time.Hour)
	wantErr(t, err, context.Canceled, "Claim with a cancelled context")
	claim(t, st, k, s.d(10*time.Minute), dedupe.Claimed) // the cancelled Claim took nothing
	wantErr(t, st.Extend(ctx, held, time.Hour), context.Canceled, "Extend with a cancelled context")
	wantErr(t, st.Release(ctx, held), context.Canceled, "Release with a cancelled context")
	claim(t, st, held.Key, s.d(10*time.Minute), dedupe.InFlight) // the cancelled Release dropped nothing

	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	_, err = st.Exists(expired, k)
	wantErr(t, err, context.DeadlineExceeded, "Exists past its deadline")
}

// The longest channel and message id a [dedupe.Key] may hold, in bytes.
const (
	maxChannelLen   = 64
	maxMessageIDLen = 256
)
