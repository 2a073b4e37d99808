package dedupewatermill

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/ThreeDotsLabs/watermill/message"
)

// codecVersion is the first byte of an encoded list of produced messages.
const codecVersion = 1

// errCorrupt reports a kept result that is not a list of messages encoded by
// encode.
var errCorrupt = errors.New("kept produced messages are corrupt")

// encode returns msgs as bytes, each message's UUID, metadata (by name) and
// payload length-prefixed, exactly (no field is re-encoded as text); nil for
// no message, so that the key is marked without a result.
func encode(msgs []*message.Message) ([]byte, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	b := []byte{codecVersion}
	b = binary.AppendUvarint(b, uint64(len(msgs)))
	for i, m := range msgs {
		if m == nil {
			return nil, fmt.Errorf("dedupewatermill: produced message %d is nil", i)
		}
		b = appendBytes(b, []byte(m.UUID))
		names := make([]string, 0, len(m.Metadata))
		for name := range m.Metadata {
			names = append(names, name)
		}
		slices.Sort(names)
		b = binary.AppendUvarint(b, uint64(len(names)))
		for _, name := range names {
			b = appendBytes(b, []byte(name))
			b = appendBytes(b, []byte(m.Metadata[name]))
		}
		b = appendBytes(b, m.Payload)
	}
	return b, nil
}

func appendBytes(b, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

// decode returns the messages encode wrote into b; none for an empty b (a
// mark kept without a result).
func decode(b []byte) ([]*message.Message, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if b[0] != codecVersion {
		return nil, fmt.Errorf("%w: version %d", errCorrupt, b[0])
	}
	r := reader{b: b[1:]}
	n := r.count()
	msgs := make([]*message.Message, 0, n)
	for range n {
		m := message.NewMessage(string(r.bytes()), nil)
		for range r.count() {
			name := string(r.bytes())
			m.Metadata.Set(name, string(r.bytes()))
		}
		m.Payload = r.bytes()
		if r.err != nil {
			break
		}
		msgs = append(msgs, m)
	}
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%w: %d bytes after the last message", errCorrupt, len(r.b))
	}
	if r.err != nil {
		return nil, r.err
	}
	return msgs, nil
}

// reader reads what encode wrote; its first error sticks and every later
// read returns nothing.
type reader struct {
	b   []byte
	err error
}

// count reads a count, which cannot exceed the bytes left (each item takes
// at least one).
func (r *reader) count() int {
	if r.err != nil {
		return 0
	}
	n, k := binary.Uvarint(r.b)
	if k <= 0 || n > uint64(len(r.b)-k) {
		r.err = fmt.Errorf("%w: bad count", errCorrupt)
		return 0
	}
	r.b = r.b[k:]
	return int(n)
}

// bytes reads a length-prefixed byte string, a copy.
func (r *reader) bytes() []byte {
	if r.err != nil {
		return nil
	}
	n, k := binary.Uvarint(r.b)
	if k <= 0 || n > uint64(len(r.b)-k) {
		r.err = fmt.Errorf("%w: bad length", errCorrupt)
		return nil
	}
	p := slices.Clone(r.b[k : k+int(n)])
	r.b = r.b[k+int(n):]
	return p
}
