package dedupe

import (
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A payload that is one JSON value is known by the value, any other by its
// bytes, and the two never meet: the forms hashed are tagged.
func TestPayloadFingerprint(t *testing.T) {
	same := [][2]string{
		{`{"a":1,"b":[true,null]}`, " {\"b\" : [ true, null ],\n\"a\":1} "},
		{`100`, `1E2`},
		{`"\u00e9"`, `"é"`},
	}
	for _, p := range same {
		assert.Equal(t, payloadFingerprint([]byte(p[0])), payloadFingerprint([]byte(p[1])), "%s and %s", p[0], p[1])
	}
	differ := [][2]string{
		{`{"a":1}`, `{"a":2}`},
		{`{"a":1}`, `{"a":"1"}`},
		{`not json {`, `not json  {`},
		{``, ` `},
		{`[1]`, `[1]]`}, // JSON and the same bytes that are not JSON
	}
	for _, p := range differ {
		assert.NotEqual(t, payloadFingerprint([]byte(p[0])), payloadFingerprint([]byte(p[1])), "%q and %q", p[0], p[1])
	}
	raw := sha256.Sum256([]byte("rnot json {"))
	assert.Equal(t, raw[:16], payloadFingerprint([]byte("not json {")).slice(), "bytes that are not JSON: tag r")
}

func (fp fingerprint) slice() []byte { return fp[:] }

// unframe reads only what framed wrote: shorter results and results with
// another head are results alone.
func TestPayloadFrame(t *testing.T) {
	d := &Deduper{settings: defaultSettings()}
	d.pay.check = true
	fp := payloadFingerprint([]byte("x"))
	for _, res := range [][]byte{nil, {}, []byte("answer"), make([]byte, MaxResultSize-payloadOverhead)} {
		got, inner, ok := unframe(d.framed(t.Context(), Key{}, &fp, res))
		assert.True(t, ok)
		assert.Equal(t, fp, got)
		if len(res) == 0 {
			assert.Nil(t, inner)
		} else {
			assert.Equal(t, res, inner)
		}
	}
	for _, kept := range [][]byte{nil, []byte(payloadMagic), []byte(payloadMagic + "short"), []byte("\xffDP\x02" + string(fp[:]))} {
		_, inner, ok := unframe(kept)
		assert.False(t, ok, "%q", kept)
		assert.Equal(t, kept, inner)
	}
}
