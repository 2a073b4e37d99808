package httpreplay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
)

// Version is the format version, the first byte of what [Encode] returns.
const Version = 1

// MaxSize is the default and largest limit of an encoded response: 64 KiB,
// the root package's MaxResultSize (a test of package dedupehttp holds them
// equal; this package sits under the root and cannot name it).
const MaxSize = 64 << 10

// Errors of the codec.
var (
	ErrCorrupt  = errors.New("httpreplay: corrupt recorded response")
	ErrTooLarge = errors.New("httpreplay: response too large to record")
)

// Response is a recorded HTTP response: what a replay sends again.
type Response struct {
	Status int         // the final status, 101 or 200 to 999
	Header http.Header // the kept headers, canonical names, none [Forbidden]
	Body   []byte
}

// Encode returns resp in the replay format, at most limit bytes (limit <= 0
// or over [MaxSize]: MaxSize): the version byte, then
// uvarints and length-prefixed strings for the status, each header value
// (names sorted, values in order) and the body. A larger response is refused
// with an error wrapping [ErrTooLarge]; a status or header that
// [Decode] would refuse, with [ErrCorrupt].
func Encode(resp Response, limit int) ([]byte, error) {
	return encode(resp, Config{Limit: limit}.limit())
}

func encode(resp Response, limit int) ([]byte, error) {
	if !validStatus(resp.Status) {
		return nil, fmt.Errorf("%w: status %d", ErrCorrupt, resp.Status)
	}
	for name, vs := range resp.Header {
		if err := checkField(name, vs); err != nil {
			return nil, err
		}
	}
	n := headSize(resp.Status, resp.Header) + bodySize(len(resp.Body))
	if n > limit {
		return nil, tooLarge(n, limit)
	}
	b := make([]byte, 0, n)
	b = append(b, Version)
	b = binary.AppendUvarint(b, uint64(resp.Status))
	b = binary.AppendUvarint(b, uint64(pairs(resp.Header)))
	for _, name := range sortedNames(resp.Header) {
		for _, v := range resp.Header[name] {
			b = appendString(b, name)
			b = appendString(b, v)
		}
	}
	b = appendString(b, string(resp.Body))
	return b, nil
}

// Decode reads a response that [Encode] wrote. Bytes it cannot read (another
// version, cut short or followed by more, a status out of range, a header
// name that is not a token or is [Forbidden], a value with a control
// character, a number not in its shortest form, headers out of order) give an error wrapping [ErrCorrupt]; Decode never panics.
func Decode(b []byte) (Response, error) {
	if len(b) == 0 {
		return Response{}, fmt.Errorf("%w: empty", ErrCorrupt)
	}
	if b[0] != Version {
		return Response{}, fmt.Errorf("%w: format version %d, want %d", ErrCorrupt, b[0], Version)
	}
	d := decoder{b: b[1:]}
	status := d.uvarint("status")
	if d.err == nil && !validStatus(int(min(status, 1000))) {
		d.fail("status %d", status)
	}
	resp := Response{Status: int(min(status, 1000)), Header: make(http.Header)}
	count := d.uvarint("header count")
	if d.err == nil && count > uint64(len(d.b)/2) { // a pair takes 2 bytes at least
		d.fail("%d headers in %d bytes", count, len(d.b))
	}
	prev := ""
	for i := uint64(0); i < count && d.err == nil; i++ {
		prev = d.header(&resp, prev)
	}
	if body := d.bytes("body"); len(body) > 0 {
		resp.Body = slices.Clone(body)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d bytes after the body", len(d.b))
	}
	if d.err != nil {
		return Response{}, d.err
	}
	return resp, nil
}

// Replay writes resp to w: its headers over w's, a Content-Length for its
// body where the status allows one, its status and its body.
func (resp Response) Replay(w http.ResponseWriter) error {
	h := w.Header()
	for name, vs := range resp.Header {
		h[name] = slices.Clone(vs)
	}
	if bodyAllowed(resp.Status) {
		h.Set("Content-Length", strconv.Itoa(len(resp.Body)))
	}
	w.WriteHeader(resp.Status)
	if len(resp.Body) == 0 {
		return nil
	}
	_, err := w.Write(resp.Body)
	return err
}

// decoder reads the fields of an encoded response; the first error stops it.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
	}
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || n != uvarintLen(v) { // one encoding per response
		d.fail("%s: bad uvarint", what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(what string) []byte {
	n := d.uvarint(what + " length")
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("%s of %d bytes in %d", what, n, len(d.b))
		return nil
	}
	s := d.b[:n]
	d.b = d.b[n:]
	return s
}

// header reads one header value into resp; its name must not sort before
// prev, the name read before it, as Encode sorts them. It returns the name.
func (d *decoder) header(resp *Response, prev string) string {
	name, value := string(d.bytes("header name")), string(d.bytes("header value"))
	if d.err != nil {
		return ""
	}
	if err := checkField(name, []string{value}); err != nil {
		d.err = err
		return ""
	}
	if name < prev {
		d.fail("header %s after %s", name, prev)
		return ""
	}
	resp.Header[name] = append(resp.Header[name], value)
	return name
}

// checkField returns an error wrapping ErrCorrupt unless name is a canonical
// header name that may be replayed and every value is a valid field value.
func checkField(name string, vs []string) error {
	if !validToken(name) || http.CanonicalHeaderKey(name) != name || Forbidden(name) {
		return fmt.Errorf("%w: header name %q", ErrCorrupt, name)
	}
	for _, v := range vs {
		if !validValue(v) {
			return fmt.Errorf("%w: header %s value %q", ErrCorrupt, name, v)
		}
	}
	return nil
}

// validToken reports whether s is an RFC 9110 token.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			continue
		}
		switch c {
		case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
			continue
		}
		return false
	}
	return true
}

// validValue reports whether v is a field value net/http sends: no control
// character but tab.
func validValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// validStatus reports whether code is a final status that a recording
// holds: 101 or 200 to 999 (net/http panics outside 100 to 999).
func validStatus(code int) bool {
	return code == http.StatusSwitchingProtocols || code >= 200 && code <= 999
}

// bodyAllowed reports whether a response with status code may have a body.
func bodyAllowed(code int) bool {
	return code >= 200 && code != http.StatusNoContent && code != http.StatusNotModified
}

func tooLarge(n, limit int) error {
	return fmt.Errorf("httpreplay: response of %d bytes encoded, over %d: %w", n, limit, ErrTooLarge)
}

// headSize is the encoded size of the version, status and header.
func headSize(status int, h http.Header) int {
	n := 1 + uvarintLen(uint64(status)) + uvarintLen(uint64(pairs(h)))
	for name, vs := range h {
		for _, v := range vs {
			n += bodySize(len(name)) + bodySize(len(v))
		}
	}
	return n
}

// bodySize is the encoded size of a string of n bytes.
func bodySize(n int) int { return uvarintLen(uint64(n)) + n }

func uvarintLen(v uint64) int {
	var tmp [binary.MaxVarintLen64]byte
	return binary.PutUvarint(tmp[:], v)
}

func pairs(h http.Header) int {
	n := 0
	for _, vs := range h {
		n += len(vs)
	}
	return n
}

func sortedNames(h http.Header) []string {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
