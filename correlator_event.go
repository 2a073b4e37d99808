package dedupe

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/gatewaykit/dedupe/internal/canon"
)

// Identity says who delivered an [Event]: the adapter ("onebotv11", "icqq"),
// the receiving bot's account id, and the ids the platform gave this copy.
type Identity struct {
	Adapter       string
	BotID         string
	EventType     string // such as "message.group", as the adapter names it
	MessageID     string // the platform message id of this copy, if any
	NativeEventID string // an adapter's own id for notices and requests (a request flag)

	// Timestamp is when the platform says the event happened: for a message,
	// its send time (OneBot's and icqq's "time"), never the time the adapter
	// received it. Copies carry the same send time, give or take the
	// adapters' rounding, and a repeat a later one, which is how the
	// correlator tells them apart. Zero if unknown.
	Timestamp time.Time
}

// Event is one delivery of a chat event by one adapter, in the OneBot model. The
// same logical event, seen by several bots or adapters, arrives as several
// Events with different identities; an [EventCorrelator] recognises them.
//
// An Event is plain data: observing it records nothing in it; what a
// correlator concluded comes back in the [Observation].
type Event struct {
	Kind     string // "message", "notice" or "request"; others are not correlated
	Identity Identity

	MessageType string // "group" or "private", for messages
	NoticeType  string // such as "group_increase", for notices
	RequestType string // "friend" or "group", for requests
	SubType     string

	GroupID    string
	UserID     string // the sender, or the user a notice or request is about
	OperatorID string
	Comment    string // a request's verification message

	Segments []Segment // a message's content
}

// participant returns the delivery's bot and message id.
func (ev *Event) participant() Participant {
	return Participant{Adapter: ev.Identity.Adapter, BotID: ev.Identity.BotID, MessageID: ev.Identity.MessageID}
}

// windowClass returns which window applies to the event: 0 for messages, 1 for
// notices and requests. ok is false for kinds that are not correlated.
func (ev *Event) windowClass() (class int, ok bool) {
	switch ev.Kind {
	case "message":
		return 0, true
	case "notice", "request":
		return 1, true
	}
	return 0, false
}

// maxCanonicalSize bounds, in bytes, the canonical form of one event (see
// [Event.CanonicalForm]) together with the canonical forms of the JSON, ark
// and XML payloads whose digests it holds, so that computing a key takes
// bounded memory and time whatever an event holds. An event beyond it has no
// key: [EventCorrelator.Observe] refuses to correlate it, with
// [ErrTooLarge]. Chat messages are a few KiB at most.
const maxCanonicalSize = 1 << 20

// keyStatus says whether an event has a correlation key.
type keyStatus int

const (
	keyed         keyStatus = iota
	notCorrelated           // a kind that is not correlated
	tooLarge                // its canonical form is longer than maxCanonicalSize
)

// appendCanonical appends the canonical form of the event's correlation key: a
// sequence of netstrings ("{len}:{bytes},") of
//
//	message: "message", message type, session (the user id for private
//	         messages, else the group id, empty if there is none), sender
//	         user id, then the [Signature] of the segments
//	notice:  "notice", notice type, sub type, group id, user id, operator
//	         id
//	request: "request", request type, sub type, group id, user id, operator
//	         id, comment
//
// The event time is not part of the form: the correlator compares send times
// with a tolerance, as adapters round them differently.
//
// Each kind has a fixed number of fields before the signature, so no two
// different field lists give one form: a group message without a group id has
// the empty session, which no group id is. The status says whether the form is
// a key: not for other kinds, nor past maxCanonicalSize, where it stops.
func (ev *Event) appendCanonical(buf []byte) ([]byte, keyStatus) {
	return ev.appendForm(buf, nil)
}

// appendForm appends the canonical form of the event, recording what the
// image rule needs in li if it is not nil.
func (ev *Event) appendForm(buf []byte, li *looseInfo) ([]byte, keyStatus) {
	if ev.fieldsLen() > maxCanonicalSize {
		return buf, tooLarge
	}
	start := len(buf)
	switch ev.Kind {
	case "message":
		session := ev.GroupID
		if ev.MessageType == "private" {
			session = ev.UserID
		}
		buf = canon.AppendNetstring(buf, "message")
		buf = canon.AppendNetstring(buf, ev.MessageType)
		buf = canon.AppendNetstring(buf, session)
		buf = canon.AppendNetstring(buf, ev.UserID)
		buf, ok := appendSignature(buf, ev.Segments, maxCanonicalSize-(len(buf)-start), li)
		if !ok {
			return buf, tooLarge
		}
		return buf, keyed
	case "notice", "request":
		buf = canon.AppendNetstring(buf, ev.Kind)
		if ev.Kind == "notice" {
			buf = canon.AppendNetstring(buf, ev.NoticeType)
		} else {
			buf = canon.AppendNetstring(buf, ev.RequestType)
		}
		buf = canon.AppendNetstring(buf, ev.SubType)
		buf = canon.AppendNetstring(buf, ev.GroupID)
		buf = canon.AppendNetstring(buf, ev.UserID)
		buf = canon.AppendNetstring(buf, ev.OperatorID)
		if ev.Kind == "request" {
			buf = canon.AppendNetstring(buf, ev.Comment)
		}
		return buf, keyed
	}
	return buf, notCorrelated
}

// fieldsLen returns the length of the event's text fields, the part of its
// canonical form that is not read from segments.
func (ev *Event) fieldsLen() int {
	return len(ev.Kind) + len(ev.MessageType) + len(ev.NoticeType) + len(ev.RequestType) + len(ev.SubType) +
		len(ev.GroupID) + len(ev.UserID) + len(ev.OperatorID) + len(ev.Comment)
}

// CorrelationKey returns the first 128 bits of the SHA-256 of
// [Event.CanonicalForm], or the zero key for kinds that are not correlated and
// for events whose canonical form is longer than maxCanonicalSize.
func (ev *Event) CorrelationKey() CorrelationKey {
	key, _ := ev.correlationKey(nil)
	return key
}

// correlationKey returns the event's key and whether it has one. With li,
// it also fills li for the image rule, and sets its loose key if the rule
// applies to the event.
func (ev *Event) correlationKey(li *looseInfo) (CorrelationKey, keyStatus) {
	var stack [512]byte
	buf, st := ev.appendForm(stack[:0], li)
	if st != keyed {
		return CorrelationKey{}, st
	}
	if li != nil && li.eligible() {
		li.setKey(buf)
	}
	sum := sha256.Sum256(buf)
	return CorrelationKey(sum[:len(CorrelationKey{})]), keyed
}

// CanonicalForm returns, for debugging, the bytes whose digest is
// [Event.CorrelationKey]: netstrings of the kind, its fields and the content
// [Signature], such as "7:message,5:group,3:286,5:25258,4:text,7:the bot,"; ""
// for kinds that are not correlated and for events too large to correlate.
func (ev *Event) CanonicalForm() string {
	buf, st := ev.appendCanonical(nil)
	if st != keyed {
		return ""
	}
	return string(buf)
}

// CorrelationKey identifies a logical event across deliveries: a 128-bit
// digest of its canonical form; zero means "not correlated".
type CorrelationKey [16]byte

// String returns the key in hex.
func (k CorrelationKey) String() string {
	return hex.EncodeToString(k[:])
}

// IsZero reports whether k is the zero key.
func (k CorrelationKey) IsZero() bool {
	return k == CorrelationKey{}
}
