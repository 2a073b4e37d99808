package dedupehttp

import (
	"bytes"
	"net/http"
	"reflect"
	"testing"
)

// FuzzDecodeAnswer checks that decodeAnswer never panics on bytes a store
// hands back, and that what it accepts encodes back to the same bytes when
// its header has one value per name (the order of names is not kept).
func FuzzDecodeAnswer(f *testing.F) {
	f.Add(encodeAnswer(200, http.Header{"Content-Type": {"application/json"}}, []byte(`{"type":4}`)))
	f.Add(encodeAnswer(201, http.Header{"X-A": {"1", "2"}}, nil))
	f.Add([]byte{answerVersion, 0xc8, 0x01, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		status, header, body, err := decodeAnswer(b)
		if err != nil {
			return
		}
		if status < 200 || status > 999 {
			t.Fatalf("status %d accepted", status)
		}
		again := encodeAnswer(status, header, body)
		s2, h2, b2, err := decodeAnswer(again)
		if err != nil || s2 != status || !bytes.Equal(b2, body) || !reflect.DeepEqual(h2, header) {
			t.Fatalf("%q: round trip gives %d %v %q %v", b, s2, h2, b2, err)
		}
	})
}
