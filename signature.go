package dedupe

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"

	"github.com/gatewaykit/dedupe/internal/canon"
)

// Segment is one part of a message in the OneBot style: a type ("text", "at",
// "image", "json", …) and the data the adapter decoded for it.
type Segment struct {
	Type string
	Data map[string]any
}

// Signature returns the content signature of a message: what must be equal for
// two deliveries to carry the same content, whichever adapter rendered them. It
// is a sequence of netstrings ("{len}:{bytes},"), a type and a value a segment:
//
//   - text: the whole text. at: the target ("qq", else "target"); face: the id
//     ("id", else "face"); numbers and their strings are equal.
//   - json, ark: a 128-bit SHA-256 digest of the payload ("data", else
//     "content", else the whole data) in canonical form: keys sorted,
//     whitespace ignored, numbers by value, decoded maps equal to their text.
//     At most 256 levels and 16,384 values are read; a marker stands for the
//     rest, so a map that contains itself has a signature too. Other Go values
//     are read by type name and a bounded reflection walk, never through fmt.
//   - xml: the XML in canonical form (attributes sorted, layout whitespace,
//     comments and processing instructions dropped).
//   - image, flash: the digest ("md5", else "sha1"), else an MD5 or {GUID} in
//     the file name or id fields, else the normalised URL (scheme, default port,
//     user info and fragment dropped, host lower-cased, only the query
//     parameters fileid, file_id, md5 and fid kept), else nothing.
//   - reply: left out, since adapters disagree on sending it; video, record,
//     file and unknown types: the type alone.
//
// The signature and the canonical forms of the payloads it digests are bounded
// together by 1 MiB: reading stops there, and the signature
// of a message beyond it is "!" and the form read so far, which no message
// read whole has; an [EventCorrelator] does not correlate such a message.
//
// Signature is deterministic and safe for concurrent use.
func Signature(segs []Segment) string {
	form, ok := appendSignature(nil, segs, maxCanonicalSize, nil)
	if !ok {
		return "!" + string(form)
	}
	return string(form)
}

// appendSignature appends the signature of segs to buf. It is the hot path of
// every message key, so the common segment types append without allocating.
// ok is false, and the signature cut, when the signature and the canonical
// forms of its payloads would take more than room bytes. With li, the
// identities of the images and where they are in buf, and the number of other
// segments, are recorded for the image rule.
func appendSignature(buf []byte, segs []Segment, room int, li *looseInfo) (_ []byte, ok bool) {
	start, spent := len(buf), 0 // spent: bytes of payload forms digested
	for i := range segs {
		seg := &segs[i]
		other := true // a segment other than images (replies continue)
		switch seg.Type {
		case "reply":
			continue
		case "text":
			text := seg.Data["text"]
			if s, isText := text.(string); isText && len(buf)-start+spent+len(s) > room {
				return buf, false // refused before it is copied
			}
			buf = canon.AppendNetstring(buf, "text")
			buf = canon.AppendScalarNetstring(buf, text)
		case "at":
			buf = canon.AppendNetstring(buf, "at")
			buf = canon.AppendScalarNetstring(buf, firstOf(seg.Data, "qq", "target"))
		case "face":
			buf = canon.AppendNetstring(buf, "face")
			buf = canon.AppendScalarNetstring(buf, firstOf(seg.Data, "id", "face"))
		case "json", "ark", "xml":
			buf = canon.AppendNetstring(buf, seg.Type)
			var digest [2 * digestLen]byte
			d, n, ok := structuredDigest(digest[:0], seg.Type, seg.Data, room-(len(buf)-start+spent))
			if !ok {
				return buf, false
			}
			spent += n
			buf = canon.AppendNetstringBytes(buf, d)
		case "image", "flash":
			other = false
			buf = canon.AppendNetstring(buf, seg.Type)
			if li != nil {
				var ib [128]byte
				id, digest, url := canon.AppendImageKeyID(ib[:0], seg.Data)
				start := len(buf)
				buf = canon.AppendNetstringBytes(buf, id)
				li.addImage(id, digest, url, start, len(buf))
				break
			}
			var id [128]byte
			buf = canon.AppendNetstringBytes(buf, canon.AppendImageID(id[:0], seg.Data))
		default: // video, record, file and unknown types
			buf = canon.AppendNetstring(buf, seg.Type)
			buf = canon.AppendNetstring(buf, "")
		}
		if len(buf)-start+spent > room {
			return buf, false
		}
		if other && li != nil {
			li.others++
		}
	}
	return buf, true
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
// canonically; see [Signature]. It returns the length of the form digested,
// and ok false, having digested nothing, if the payload or its form is longer
// than room bytes.
func structuredDigest(buf []byte, typ string, data map[string]any, room int) (_ []byte, n int, ok bool) {
	payload := firstOf(data, "data", "content")
	if payload == nil {
		payload = data
	}
	s, isText := payload.(string)
	if isText && len(s) >= room {
		return buf, 0, false
	}
	cb := canonPool.Get().(*[]byte)
	form := append((*cb)[:0], tagCanonical)
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
	if n = len(form); n <= room {
		sum := sha256.Sum256(form)
		buf = hex.AppendEncode(buf, sum[:digestLen])
	}
	if cap(form) <= maxPooledForm {
		*cb = form
		canonPool.Put(cb)
	}
	return buf, n, n <= room
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
