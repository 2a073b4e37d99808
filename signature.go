package dedupe

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"

	"github.com/gatewaykit/dedupe/internal/canon"
)

// Segment is one part of a message in the OneBot style: a type such as "text",
// "at", "image" or "json", and the adapter's data for it. Data holds what the
// adapter decoded: strings, numbers (float64, integers or [encoding/json.Number]),
// nested maps and slices.
type Segment struct {
	Type string
	Data map[string]any
}

// Signature returns the content signature of a message: what must be equal for
// two deliveries to carry the same content, whichever adapter rendered them. It
// is a sequence of netstrings ("{len}:{bytes},"), a type and a value for each
// segment, so no two different lists of signatures give one string. The value
// of each segment type is:
//
//   - text: the whole text, as written.
//   - at: the target (data "qq", else "target"); the number 10001 and the
//     string "10001" are equal. In text, at and face, a value that is not a
//     string, number or bool is written by the bounded walk of json data.
//   - face: the face id (data "id", else "face"), numbers and strings equal.
//   - json, ark: a 128-bit SHA-256 digest of the payload (data "data", else
//     "content", else the whole data) parsed and written in a canonical form:
//     object keys sorted, layout whitespace ignored, numbers by value, and a
//     decoded payload (maps, slices) equal to its JSON text. Text that does
//     not parse, or nests deeper than 256 levels, is digested as trimmed
//     text. A decoded payload is read to at most 256 levels and 16,384
//     values; past a limit a fixed marker stands for what was not read, so a
//     map that contains itself has a signature too. Go values JSON cannot
//     hold (structs, functions) are read by type name and a bounded
//     reflection walk, never through their methods or fmt.
//   - xml: likewise, the XML parsed and written canonically: attributes sorted,
//     whitespace between elements and around text dropped, comments and
//     processing instructions ignored.
//   - image, flash: the content digest (data "md5", else "sha1"), else an MD5
//     embedded in the file name or id fields ("file", "filename", "file_name",
//     "file_id", "fileid", "fid", "id"; 32 hex digits, or a {GUID}), else the
//     normalised URL (data "url", or a "file" that is an http URL: scheme,
//     default port, user info and fragment dropped, host lower-cased, and only
//     the identity query parameters fileid, file_id, md5 and fid kept, sorted),
//     else nothing. Hex digests (md5, sha1) compare case-insensitively; ids
//     and paths do not.
//   - video, record, file and unknown types: nothing; the type alone.
//   - reply: left out entirely, since adapters disagree on whether to send it.
//
// An empty message has the empty signature. Signature is deterministic and safe
// for concurrent use.
func Signature(segs []Segment) string {
	return string(appendSignature(nil, segs))
}

// appendSignature appends the signature of segs to buf. It is the hot path of
// every message key, so the common segment types append without allocating.
func appendSignature(buf []byte, segs []Segment) []byte {
	for i := range segs {
		seg := &segs[i]
		switch seg.Type {
		case "reply":
			continue
		case "text":
			buf = canon.AppendNetstring(buf, "text")
			buf = canon.AppendScalarNetstring(buf, seg.Data["text"])
		case "at":
			buf = canon.AppendNetstring(buf, "at")
			buf = canon.AppendScalarNetstring(buf, firstOf(seg.Data, "qq", "target"))
		case "face":
			buf = canon.AppendNetstring(buf, "face")
			buf = canon.AppendScalarNetstring(buf, firstOf(seg.Data, "id", "face"))
		case "json", "ark", "xml":
			buf = canon.AppendNetstring(buf, seg.Type)
			var digest [2 * digestLen]byte
			buf = canon.AppendNetstringBytes(buf, structuredDigest(digest[:0], seg.Type, seg.Data))
		case "image", "flash":
			buf = canon.AppendNetstring(buf, seg.Type)
			var id [128]byte
			buf = canon.AppendNetstringBytes(buf, canon.AppendImageID(id[:0], seg.Data))
		default: // video, record, file and unknown types
			buf = canon.AppendNetstring(buf, seg.Type)
			buf = canon.AppendNetstring(buf, "")
		}
	}
	return buf
}

// firstOf returns the first of keys present in data with a non-nil value.
func firstOf(data map[string]any, keys ...string) any {
	for _, k := range keys {
		if v, ok := data[k]; ok && v != nil {
			return v
		}
	}
	return nil
}

// digestLen is the number of bytes of SHA-256 kept in a segment digest.
const digestLen = 16

// Tags of digested payloads: the first byte of what is digested tells how the
// payload was read.
const (
	tagCanonical = 'j' // parsed and written canonically
	tagRaw       = 'r' // unparsable, trimmed text
)

// structuredDigest appends the hex of the first digestLen bytes of the SHA-256
// of the payload of a json, ark or xml segment, parsed and written
// canonically; see [Signature].
func structuredDigest(buf []byte, typ string, data map[string]any) []byte {
	payload := firstOf(data, "data", "content")
	if payload == nil {
		payload = data
	}
	cb := canonPool.Get().(*[]byte)
	form := append((*cb)[:0], tagCanonical)
	var ok bool
	s, isText := payload.(string)
	switch {
	case isText && typ == "xml":
		form, ok = canon.AppendXML(form, s)
	case isText:
		form, ok = canon.AppendJSONText(form, s)
	default:
		form, ok = canon.AppendJSONValue(form, payload), true
	}
	if !ok {
		form = append(append(form[:0], tagRaw), strings.TrimSpace(s)...)
	}
	sum := sha256.Sum256(form)
	buf = hex.AppendEncode(buf, sum[:digestLen])
	if cap(form) <= maxPooledForm {
		*cb = form
		canonPool.Put(cb)
	}
	return buf
}

// canonPool holds the buffers canonical forms are written to, because the
// recursive writers keep the compiler from placing them on the stack.
var canonPool = sync.Pool{New: func() any {
	b := make([]byte, 0, 1024)
	return &b
}}

// maxPooledForm bounds the buffers kept in canonPool, so one huge card does
// not stay in memory.
const maxPooledForm = 64 << 10
