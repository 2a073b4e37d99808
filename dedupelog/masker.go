package dedupelog

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"

	"github.com/gatewaykit/dedupe"
)

// How a field can hold a message id.
const (
	holdsID   = iota + 1 // the id itself
	holdsKey             // "{platform}:{id}"
	holdsText            // text that can quote the key or the id: an error's
)

// fields are the fields of log records and the attributes of spans that can
// hold a message id, and how: the one list that [Mask] and dedupeotel's
// masking read. The package documentation lists them.
var fields = map[string]int{
	"message_id": holdsID, // the Deduper's decision record
	"key":        holdsKey,
	"error":      holdsText,
	"err":        holdsText, // the same, as reply and many programs name it
	"mark_error": holdsText, // dedupehttp: the mark after a handler panicked
	"panic":      holdsText, // dedupehttp: a handler's panic value

	"messaging.message.id": holdsID,   // dedupeotel's spans
	"exception.message":    holdsText, // a span's recorded error, and its status
}

// Fields returns the names of the fields of log records and of the
// attributes of spans that can hold a message id, sorted: those a [Masker]
// masks. Any other field passes unchanged.
func Fields() []string {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// droppedID replaces, under [Drop], a message id quoted on its own in a text.
const droppedID = "[id]"

// A Masker hides a message id in the fields that can hold one (see
// [Fields]): the one rule that [Mask] applies to log records and that
// dedupeotel's WithMask applies to span attributes, so that a message's
// records and spans match each other under [Hash]. A Masker is safe for
// concurrent use.
type Masker struct {
	mode Mode
	key  []byte
}

// NewMasker returns a Masker in mode with key, which is copied. Under [Hash]
// with a key shorter than [MinKeyLen] it drops the ids instead.
func NewMasker(mode Mode, key []byte) *Masker {
	if mode != Hash || len(key) < MinKeyLen {
		return &Masker{mode: Drop}
	}
	return &Masker{mode: Hash, key: append([]byte(nil), key...)}
}

// Mode returns how m masks: [Hash], or [Drop] (also for a [Hash] given a
// short key).
func (m *Masker) Mode() Mode { return m.mode }

// ID returns id masked: under [Hash] the hex of the first 16 bytes of its
// HMAC-SHA256 under the key (32 characters); under [Drop], ok is false: the
// field is left out.
func (m *Masker) ID(id string) (masked string, ok bool) {
	if m.mode != Hash {
		return "", false
	}
	mac := hmac.New(sha256.New, m.key)
	mac.Write([]byte(id))
	return hex.EncodeToString(mac.Sum(nil)[:16]), true
}

// Key returns the key "{platform}:{id}" masked: "{platform}:{hash}" under
// [Hash], "{platform}" under [Drop].
func (m *Masker) Key(platform, id string) string {
	if h, ok := m.ID(id); ok {
		return platform + ":" + h
	}
	return platform
}

// Text returns s with the message id hidden: each "{platform}:{id}" in it
// replaced as [Masker.Key] replaces it, then each id standing on its own
// (not inside a longer run of letters and digits) replaced by its hash, or
// by "[id]" under [Drop]. An empty id leaves s unchanged.
func (m *Masker) Text(s, platform, id string) string {
	if id == "" {
		return s
	}
	if platform != "" {
		s = replaceWord(s, platform+":"+id, m.Key(platform, id))
	}
	h, ok := m.ID(id)
	if !ok {
		h = droppedID
	}
	return replaceWord(s, id, h)
}

// hiddenDetail ends the text of an error whose details [Masker.Error] hides.
const hiddenDetail = " [detail hidden]"

// Error returns the text of err with the message id hidden, as
// [Masker.Text] hides it, except for an error that wraps
// [dedupe.ErrInvalidKey] or [dedupe.ErrNoMessageID]: such an error is about
// a value that could not become a key (an id too long, a member missing, a
// sender that is not digits), which its text quotes and no field names, so
// that no rule can find it; its text is the sentinel's followed by
// " [detail hidden]", such as "dedupe: no message id [detail hidden]".
func (m *Masker) Error(err error, platform, id string) string {
	switch {
	case errors.Is(err, dedupe.ErrInvalidKey):
		return dedupe.ErrInvalidKey.Error() + hiddenDetail
	case errors.Is(err, dedupe.ErrNoMessageID):
		return dedupe.ErrNoMessageID.Error() + hiddenDetail
	}
	return m.Text(err.Error(), platform, id)
}

// Field returns value, the value of the field or span attribute name, with
// the message id (platform, id) hidden as that field holds it (see
// [Fields]): message_id and messaging.message.id as [Masker.ID] does, key
// ("{platform}:{id}", whichever message it names) as [Masker.Key] does, the
// texts (error, err, mark_error, panic, exception.message) as [Masker.Text] does. ok is false for a
// field to leave out. A field that holds no id passes unchanged.
func (m *Masker) Field(name, value, platform, id string) (masked string, ok bool) {
	switch fields[name] {
	case holdsID:
		return m.ID(value)
	case holdsKey:
		if p, i, found := strings.Cut(value, ":"); found {
			return m.Key(p, i), true
		}
		return m.Text(value, platform, id), true
	case holdsText:
		return m.Text(value, platform, id), true
	}
	return value, true
}

// replaceWord returns s with each occurrence of old that stands on its own
// (neither preceded nor followed by an ASCII letter or digit) replaced by
// repl.
func replaceWord(s, old, repl string) string {
	if old == "" || !strings.Contains(s, old) {
		return s
	}
	var b strings.Builder
	done := 0 // s[:done] is written
	for from := 0; ; {
		i := strings.Index(s[from:], old)
		if i < 0 {
			break
		}
		i += from
		end := i + len(old)
		if (i == 0 || !wordByte(s[i-1])) && (end == len(s) || !wordByte(s[end])) {
			b.WriteString(s[done:i])
			b.WriteString(repl)
			done = end
			from = end
		} else {
			from = i + 1
		}
	}
	b.WriteString(s[done:])
	return b.String()
}

// wordByte reports whether c is an ASCII letter or digit.
func wordByte(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
