package httpreplay

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sample() Response {
	return Response{
		Status: http.StatusCreated,
		Header: http.Header{
			"Content-Type": {"application/json"},
			"Vary":         {"Accept", "Accept-Language"},
		},
		Body: []byte(`{"ok":true}`),
	}
}

// TestEncodeRoundTrip: Decode gives back what Encode took, and Encode is
// deterministic (names sorted, values in order), starting with the version.
func TestEncodeRoundTrip(t *testing.T) {
	for _, resp := range []Response{
		sample(),
		{Status: http.StatusOK, Header: http.Header{}},
		{Status: http.StatusNoContent, Header: http.Header{"Etag": {`"x"`}}},
		{Status: 999, Header: http.Header{}, Body: bytes.Repeat([]byte{0}, 300)},
	} {
		b, err := Encode(resp, 0)
		require.NoError(t, err)
		assert.Equal(t, byte(Version), b[0])
		got, err := Decode(b)
		require.NoError(t, err)
		assert.Equal(t, resp, got)
		again, err := Encode(got, 0)
		require.NoError(t, err)
		assert.Equal(t, b, again)
	}
}

// TestEncodeRefuses: a response over the limit wraps ErrTooLarge; one
// Decode would refuse is refused with ErrCorrupt.
func TestEncodeRefuses(t *testing.T) {
	_, err := Encode(Response{Status: 200, Body: make([]byte, MaxSize)}, 0)
	assert.ErrorIs(t, err, ErrTooLarge)
	_, err = Encode(sample(), 10)
	assert.ErrorIs(t, err, ErrTooLarge)
	for _, resp := range []Response{
		{Status: 99},
		{Status: 1000},
		{Status: 200, Header: http.Header{"Set-Cookie": {"a=b"}}},
		{Status: 200, Header: http.Header{"content-type": {"x"}}},
		{Status: 200, Header: http.Header{"X-A": {"a\nb"}}},
	} {
		_, err := Encode(resp, 0)
		assert.ErrorIs(t, err, ErrCorrupt, "%+v", resp)
	}
}

// TestDecodeCorrupt: every prefix of a valid encoding, a trailing byte,
// another version, each malformed field and a second encoding of a response
// (a long uvarint, unsorted headers) is refused with ErrCorrupt.
func TestDecodeCorrupt(t *testing.T) {
	good, err := Encode(sample(), 0)
	require.NoError(t, err)
	for i := range good {
		_, err := Decode(good[:i])
		assert.ErrorIs(t, err, ErrCorrupt, "prefix %d", i)
	}
	_, err = Decode(append(good, 0))
	assert.ErrorIs(t, err, ErrCorrupt)

	pair := func(name, value string) []byte {
		b := []byte{Version, 200, 0, 1}
		b = appendString(b, name)
		b = appendString(b, value)
		return appendString(b, "")
	}
	unsorted := []byte{Version, 200, 2}
	for _, s := range []string{"X-B", "1", "X-A", "2", ""} {
		unsorted = appendString(unsorted, s)
	}
	for name, b := range map[string][]byte{
		"headers unsorted":   unsorted,
		"version 0":          {0, 200, 1, 0, 0},
		"version 2":          {2, 200, 1, 0, 0},
		"status 99":          {Version, 99, 0, 0},
		"status 100":         {Version, 100, 0, 0},
		"huge status":        {Version, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0},
		"long uvarint":       {Version, 200, 1, 0x80, 0x00, 0},
		"bad uvarint":        {Version, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"huge header count":  {Version, 200, 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 0},
		"body past the end":  {Version, 200, 1, 0, 5, 'a'},
		"set-cookie":         pair("Set-Cookie", "a=b"),
		"date":               pair("Date", "today"),
		"content-length":     pair("Content-Length", "3"),
		"not canonical":      pair("content-type", "x"),
		"not a token":        pair("X A", "x"),
		"empty name":         pair("", "x"),
		"value with newline": pair("X-A", "a\r\nSet-Cookie: a=b"),
		"value with NUL":     pair("X-A", "a\x00"),
	} {
		_, err := Decode(b)
		assert.ErrorIs(t, err, ErrCorrupt, name)
	}
}

// FuzzDecode: Decode never panics, and what it accepts encodes back to the
// same bytes and replays without a panic.
func FuzzDecode(f *testing.F) {
	good, _ := Encode(sample(), 0)
	f.Add(good)
	f.Add([]byte{Version, 200, 0, 0})
	f.Add([]byte{Version, 0xc8, 0x01, 1, 3, 'X', '-', 'A', 1, 'v', 2, 'h', 'i'})
	f.Fuzz(func(t *testing.T, b []byte) {
		resp, err := Decode(b)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		again, err := Encode(resp, len(b))
		require.NoError(t, err)
		require.Equal(t, b, again)
		w := newDiscardWriter()
		require.NoError(t, resp.Replay(w))
	})
}

// discardWriter is a ResponseWriter that checks WriteHeader's argument as
// net/http does and drops everything.
type discardWriter struct{ h http.Header }

func newDiscardWriter() *discardWriter { return &discardWriter{h: http.Header{}} }

func (w *discardWriter) Header() http.Header { return w.h }

func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }

func (w *discardWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic("invalid status")
	}
}
