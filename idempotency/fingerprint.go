package idempotency

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"net/http"

	"github.com/gatewaykit/dedupe"
)

// DefaultFingerprint is the default fingerprint of a request (the draft's
// section 2.4, "checksum of the entire request payload", with the
// operation): its method, its path and query as sent, and the SHA-256 of
// its body, each length-prefixed. Headers are not part of it: a retry may
// differ in Date, tracing or authentication headers.
func DefaultFingerprint(r *http.Request, body []byte) []byte {
	sum := sha256.Sum256(body)
	b := make([]byte, 0, 8+len(r.Method)+len(r.URL.RequestURI())+len(sum))
	b = appendField(b, r.Method)
	b = appendField(b, r.URL.RequestURI())
	return append(b, sum[:]...)
}

func appendField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// fingerprint is the SHA-256 of what a fingerprint function returned.
type fingerprint [sha256.Size]byte

// keys are the two dedupe keys of one (scope, Idempotency-Key): main is
// claimed while the handler runs and marked with the record of its response;
// bind is marked, before the handler runs, with the fingerprint the key is
// bound to, so that a request reusing the key with another payload is told
// apart while the first is in flight.
type keys struct {
	main, bind dedupe.Key
}

// keysFor returns the keys of key in scope on channel: the message id is the
// hex SHA-256 of the length-prefixed scope and key, 64 bytes whatever their
// length, and the binding's is the same with ":fp" after it.
func keysFor(channel, scope, key string) keys {
	sum := sha256.Sum256(appendField(appendField(nil, scope), key))
	id := hex.EncodeToString(sum[:])
	return keys{
		main: dedupe.Key{Channel: channel, MessageID: id},
		bind: dedupe.Key{Channel: channel, MessageID: id + ":fp"},
	}
}

// recordVersion is the first byte of what this package stores with a key.
const recordVersion = 1

// recordOverhead is the bytes a record holds besides the response.
const recordOverhead = 1 + sha256.Size

// encodeRecord returns what is kept with a key's mark: the version, the
// fingerprint and the encoded response (internal/httpreplay), which is
// empty for a response that cannot be replayed. The binding keeps a record
// without a response.
func encodeRecord(fp fingerprint, resp []byte) []byte {
	b := make([]byte, 0, recordOverhead+len(resp))
	b = append(b, recordVersion)
	b = append(b, fp[:]...)
	return append(b, resp...)
}

// decodeRecord reads what encodeRecord wrote; ok is false for anything else.
func decodeRecord(b []byte) (fp fingerprint, resp []byte, ok bool) {
	if len(b) < recordOverhead || b[0] != recordVersion {
		return fp, nil, false
	}
	copy(fp[:], b[1:recordOverhead])
	return fp, b[recordOverhead:], true
}
