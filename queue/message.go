package queue

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gatewaykit/dedupe"
)

// messageVersion is the version of the encoding of [Message.MarshalBinary].
const messageVersion = 1

// wireMessage is the encoding of a [Message]: JSON, versioned, with the body
// in base64.
type wireMessage struct {
	V         int    `json:"v"`
	ID        string `json:"id"`
	Channel   string `json:"ch"`
	MessageID string `json:"mid"`
	Method    string `json:"m"`
	Target    string `json:"t"`
	Host      string `json:"h,omitempty"`
	Header    Header `json:"hd,omitempty"`
	Body      []byte `json:"b"`
	TraceID   string `json:"tr,omitempty"`
	Accepted  int64  `json:"at"` // Unix nanoseconds
}

// MarshalBinary encodes m for a [Queue] that stores bytes. The encoding is
// versioned: a later version of this package reads what an earlier one
// wrote.
func (m Message) MarshalBinary() ([]byte, error) {
	return json.Marshal(wireMessage{
		V: messageVersion, ID: m.ID, Channel: m.Key.Channel, MessageID: m.Key.MessageID,
		Method: m.Method, Target: m.Target, Host: m.Host, Header: m.Header,
		Body: m.Body, TraceID: m.TraceID, Accepted: m.Accepted.UnixNano(),
	})
}

// UnmarshalBinary decodes what [Message.MarshalBinary] encoded into m. It
// refuses an unknown version, and a message without an id or a valid key.
func (m *Message) UnmarshalBinary(b []byte) error {
	var w wireMessage
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("dedupe: queue: message: %w", err)
	}
	if w.V != messageVersion {
		return fmt.Errorf("dedupe: queue: message: version %d, want %d", w.V, messageVersion)
	}
	if w.ID == "" {
		return errors.New("dedupe: queue: message: no id")
	}
	k := dedupe.Key{Channel: w.Channel, MessageID: w.MessageID}
	if err := k.Validate(); err != nil {
		return fmt.Errorf("dedupe: queue: message %s: %w", w.ID, err)
	}
	*m = Message{
		ID: w.ID, Key: k, Method: w.Method, Target: w.Target, Host: w.Host,
		Header: w.Header, Body: w.Body, TraceID: w.TraceID, Accepted: time.Unix(0, w.Accepted),
	}
	return nil
}

// NewReceipt returns a new random receipt for a [Delivery]: 128 bits from
// crypto/rand in base32. Queue implementations call it in Take.
func NewReceipt() string { return rand.Text() }
