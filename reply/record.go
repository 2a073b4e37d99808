package reply

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/gatewaykit/dedupe"
)

// The channels of the keys a [Sender] keeps its records and locks under.
const (
	recordChannel = "dedupe.reply"
	lockChannel   = "dedupe.reply-lock"
)

// recordID returns the message id of the record and lock keys of reply slot
// of key: "{channel}:{message_id}#{slot}", or "h:" and the hex SHA-256 of
// that when it is longer than a key's message id may be (256 bytes). The
// two forms cannot meet: the first always holds a '#', the second never.
func recordID(key dedupe.Key, slot int) string {
	id := key.Channel + ":" + key.MessageID + "#" + strconv.Itoa(slot)
	if len(id) > 256 {
		sum := sha256.Sum256([]byte(id))
		return "h:" + hex.EncodeToString(sum[:])
	}
	return id
}

// recordKey is the key of the record of reply slot of key.
func recordKey(key dedupe.Key, slot int) dedupe.Key {
	return dedupe.Key{Channel: recordChannel, MessageID: recordID(key, slot)}
}

// lockKey is the key Send claims while it handles reply slot of key.
func lockKey(key dedupe.Key, slot int) dedupe.Key {
	return dedupe.Key{Channel: lockChannel, MessageID: recordID(key, slot)}
}

// state is where a reply stands in its record.
type state byte

const (
	// intended: the reply is to be sent. With attempt 0 it was never
	// sent (it was just composed, or recorded by IntendTx); with attempt
	// n > 0, send number n began and its outcome is unknown.
	intended state = 1
	// sent: the platform accepted send number attempt; id is its id.
	sent state = 2
	// notSent: the platform refused send number attempt (NotSent).
	notSent state = 3
)

// record is the value kept with the mark of a reply's record key.
type record struct {
	state   state
	attempt int
	at      int64 // unix ms when the sends since the last refusal began; 0 before the first
	first   int64 // unix ms of the first send of the token, refused ones included; 0 before it
	id      string
	body    []byte
}

// The first byte of an encoded record: version 2 holds first, version 1
// (written before it) does not, and decodes with first = at.
const (
	recordVersion   = 2
	recordVersionV1 = 1
)

// Room kept in a record for its header and the platform's message id: a
// body is at most maxBody bytes, so that its record fits in
// [dedupe.MaxResultSize].
const (
	maxHeader = 1 + 1 + 4*binary.MaxVarintLen64
	maxID     = 1024
	maxBody   = dedupe.MaxResultSize - maxHeader - maxID
)

// encode returns r's encoding: the version, the state, then attempt, at,
// first and the id's length as uvarints, the id, and the body to the end. A sent
// record whose id is too long for its room drops its body, which is no
// longer needed.
func (r record) encode() []byte {
	body := r.body
	if r.state == sent && len(r.id) > maxID {
		body = nil
	}
	b := make([]byte, 0, maxHeader+len(r.id)+len(body))
	b = append(b, recordVersion, byte(r.state))
	b = binary.AppendUvarint(b, uint64(r.attempt))
	b = binary.AppendUvarint(b, uint64(max(r.at, 0)))
	b = binary.AppendUvarint(b, uint64(max(r.first, 0)))
	b = binary.AppendUvarint(b, uint64(len(r.id)))
	b = append(b, r.id...)
	return append(b, body...)
}

// decode parses a record encode wrote, or one of version 1 (its first is
// its at: the best a record that did not keep it knows). Anything else is an
// error wrapping ErrBadRecord.
func decode(b []byte) (record, error) {
	bad := func(what string) (record, error) {
		return record{}, fmt.Errorf("%w: %s", ErrBadRecord, what)
	}
	if len(b) < 2 {
		return bad(fmt.Sprintf("%d bytes", len(b)))
	}
	if b[0] != recordVersion && b[0] != recordVersionV1 {
		return bad(fmt.Sprintf("version %d", b[0]))
	}
	v1 := b[0] == recordVersionV1
	r := record{state: state(b[1])}
	if r.state < intended || r.state > notSent {
		return bad(fmt.Sprintf("state %d", b[1]))
	}
	b = b[2:]
	var vals [4]uint64 // attempt, at, first, the id's length
	for i := range vals {
		if v1 && i == 2 {
			continue
		}
		v, n := binary.Uvarint(b)
		if n <= 0 || v > 1<<62 {
			return bad("header cut short")
		}
		vals[i], b = v, b[n:]
	}
	if v1 {
		vals[2] = vals[1]
	}
	if vals[3] > uint64(len(b)) {
		return bad("id cut short")
	}
	r.attempt, r.at, r.first = int(vals[0]), int64(vals[1]), int64(vals[2])
	r.id, b = string(b[:vals[3]]), b[vals[3]:]
	if len(b) > 0 {
		r.body = b
	}
	if r.state != intended && r.attempt == 0 {
		return bad(fmt.Sprintf("state %d before any send", r.state))
	}
	return r, nil
}
