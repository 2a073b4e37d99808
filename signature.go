package dedupe

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Segment is one part of a message in the OneBot style: a type such as "text",
// "at", "image" or "json", and the adapter's data for it. Data holds what the
// adapter decoded: strings, numbers (float64, integers or [json.Number]), nested
// maps and slices.
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
//     string "10001" are equal.
//   - face: the face id (data "id", else "face"), numbers and strings equal.
//   - json, ark: a 128-bit SHA-256 digest of the payload (data "data", else
//     "content", else the whole data) parsed and written in a canonical form:
//     object keys sorted, layout whitespace ignored, numbers by value. A payload
//     that does not parse is digested as trimmed text.
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
			buf = appendNetstring(buf, "text")
			buf = appendScalarNetstring(buf, seg.Data["text"])
		case "at":
			buf = appendNetstring(buf, "at")
			buf = appendScalarNetstring(buf, firstOf(seg.Data, "qq", "target"))
		case "face":
			buf = appendNetstring(buf, "face")
			buf = appendScalarNetstring(buf, firstOf(seg.Data, "id", "face"))
		case "json", "ark", "xml":
			buf = appendNetstring(buf, seg.Type)
			var digest [2 * digestLen]byte
			buf = appendNetstringBytes(buf, structuredDigest(digest[:0], seg.Type, seg.Data))
		case "image", "flash":
			buf = appendNetstring(buf, seg.Type)
			var id [128]byte
			buf = appendNetstringBytes(buf, appendImageID(id[:0], seg.Data))
		default: // video, record, file and unknown types
			buf = appendNetstring(buf, seg.Type)
			buf = appendNetstring(buf, "")
		}
	}
	return buf
}

// appendNetstring appends s as a netstring, "{len}:{s},".
func appendNetstring(buf []byte, s string) []byte {
	buf = appendLen(buf, len(s))
	buf = append(buf, s...)
	return append(buf, ',')
}

// appendLen appends a length and ':', the head of a netstring.
func appendLen(buf []byte, n int) []byte {
	switch {
	case n < 10:
		return append(buf, byte('0'+n), ':')
	case n < 100:
		return append(buf, byte('0'+n/10), byte('0'+n%10), ':')
	}
	return append(strconv.AppendInt(buf, int64(n), 10), ':')
}

// appendNetstringBytes is appendNetstring for a byte slice.
func appendNetstringBytes(buf, b []byte) []byte {
	buf = appendLen(buf, len(b))
	buf = append(buf, b...)
	return append(buf, ',')
}

// appendScalarNetstring appends the text form of a scalar as a netstring.
func appendScalarNetstring(buf []byte, v any) []byte {
	if s, ok := v.(string); ok {
		return appendNetstring(buf, s)
	}
	var tmp [64]byte
	return appendNetstringBytes(buf, appendScalar(tmp[:0], v))
}

// appendScalar appends the text form of an id or text value, so that the number
// 10001 and the string "10001" give the same bytes. nil gives nothing.
func appendScalar(buf []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return buf
	case string:
		return append(buf, v...)
	case json.Number:
		return appendCanonNumber(buf, string(v))
	case float64:
		return appendCanonFloat(buf, v)
	case float32:
		return appendCanonFloat(buf, float64(v))
	case bool:
		return strconv.AppendBool(buf, v)
	}
	if b, ok := appendInteger(buf, v); ok {
		return b
	}
	return fmt.Append(buf, v)
}

// appendCanonNumber appends a JSON number by value: integers as written (exact,
// "-0" as "0"), other numbers through float64 as [appendCanonFloat] writes them,
// so 1.0, 1e0 and 1 are equal. Text that is not a number is appended as is.
func appendCanonNumber(buf []byte, text string) []byte {
	if isJSONInteger(text) {
		if text == "-0" {
			text = "0"
		}
		return append(buf, text...)
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return append(buf, text...)
	}
	return appendCanonFloat(buf, f)
}

// appendCanonFloat appends f as an integer when it is integral and below 1e15
// (where every integer is exact), and in the shortest 'g' form otherwise.
func appendCanonFloat(buf []byte, f float64) []byte {
	if f == 0 {
		return append(buf, '0')
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.AppendInt(buf, int64(f), 10)
	}
	return strconv.AppendFloat(buf, f, 'g', -1, 64)
}

// isJSONInteger reports whether s is an optional '-' followed by digits only.
func isJSONInteger(s string) bool {
	if s != "" && s[0] == '-' {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
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

// appendDigest appends the hex of the first digestLen bytes of the SHA-256 of
// b, which starts with a tag byte telling how the payload was read.
func appendDigest(buf, b []byte) []byte {
	sum := sha256.Sum256(b)
	return hex.AppendEncode(buf, sum[:digestLen])
}

// Tags of digested payloads.
const (
	tagCanonical = 'j' // parsed and written canonically
	tagRaw       = 'r' // unparsable, trimmed text
)

// structuredDigest appends the digest of the payload of a json, ark or xml
// segment, parsed and written canonically; see [Signature].
func structuredDigest(buf []byte, typ string, data map[string]any) []byte {
	payload := firstOf(data, "data", "content")
	if payload == nil {
		payload = data
	}
	cb := canonPool.Get().(*canonBuffers)
	canon := append(cb.canon[:0], tagCanonical)
	var ok bool
	s, isText := payload.(string)
	switch {
	case isText && typ == "xml":
		canon, ok = appendCanonXML(canon, s)
	case isText:
		p := jsonCanon{s: s, scratch: cb.scratch}
		canon, ok = p.parse(canon)
		cb.scratch = p.scratch
	default:
		canon, ok = appendCanonJSONValue(canon, payload, 0)
		if !ok {
			s = fmt.Sprint(payload)
		}
	}
	if !ok {
		canon = append(append(canon[:0], tagRaw), strings.TrimSpace(s)...)
	}
	buf = appendDigest(buf, canon)
	if cap(canon) <= maxPooledCanon && cap(cb.scratch) <= maxPooledCanon {
		cb.canon = canon
		canonPool.Put(cb)
	}
	return buf
}

// canonBuffers are the working buffers of a structured digest, pooled because
// the recursive parsers keep the compiler from placing them on the stack.
type canonBuffers struct {
	canon, scratch []byte
}

var canonPool = sync.Pool{New: func() any {
	return &canonBuffers{canon: make([]byte, 0, 1024), scratch: make([]byte, 0, 512)}
}}

// maxPooledCanon bounds the buffers kept in canonPool, so one huge card does
// not stay in memory.
const maxPooledCanon = 64 << 10

// The canonical form of a JSON value, used only as input to a digest. Every
// value is self-delimiting, so the form is injective:
//
//	null "n", true "t", false "f"
//	number "#{len}:{digits}" (by value; see appendCanonNumber)
//	string "s{len}:{bytes}" (escapes decoded)
//	array  "[" values "]"
//	object "{" (string value)* "}" with keys sorted bytewise, the last of
//	       duplicate keys kept
//
// XML is written in the same alphabet; see appendCanonXML.

// maxCanonDepth bounds nesting so hostile payloads cannot exhaust the stack;
// deeper payloads are digested as text.
const maxCanonDepth = 256

func appendCanonString(buf []byte, s string) []byte {
	buf = appendLen(append(buf, 's'), len(s))
	return append(buf, s...)
}

func appendCanonStringBytes(buf []byte, b []byte) []byte {
	buf = appendLen(append(buf, 's'), len(b))
	return append(buf, b...)
}

func appendCanonNumberValue(buf []byte, digits []byte) []byte {
	buf = appendLen(append(buf, '#'), len(digits))
	return append(buf, digits...)
}

// canonMember is an object member whose value's canonical form is at
// buf[lo:hi] while the object is being parsed.
type canonMember struct {
	key    string
	lo, hi int
}

// appendCanonObject writes the members, whose values are already in
// buf[start:], as a canonical object at buf[start:]. scratch is reused to hold
// the values meanwhile; the grown scratch is returned.
func appendCanonObject(buf []byte, start int, mems []canonMember, scratch []byte) (_, _ []byte) {
	vals := append(scratch[:0], buf[start:]...)
	buf = append(buf[:start], '{')
	slices.SortStableFunc(mems, func(a, b canonMember) int { return cmp.Compare(a.key, b.key) })
	for i, m := range mems {
		if i+1 < len(mems) && mems[i+1].key == m.key {
			continue // a later duplicate wins, as in encoding/json
		}
		buf = appendCanonString(buf, m.key)
		buf = append(buf, vals[m.lo-start:m.hi-start]...)
	}
	return append(buf, '}'), vals
}

// appendCanonJSONText parses s as one JSON value (RFC 8259, surrounding
// whitespace allowed) and appends its canonical form. ok is false if s is not
// valid JSON.
func appendCanonJSONText(buf []byte, s string) (_ []byte, ok bool) {
	p := jsonCanon{s: s}
	return p.parse(buf)
}

// jsonCanon is a strict JSON parser that writes the canonical form as it goes.
type jsonCanon struct {
	s       string
	i       int
	scratch []byte // for reordering object members
	esc     []byte // a decoded string that held escapes
}

// parse parses the whole input as one value and appends its canonical form.
func (p *jsonCanon) parse(buf []byte) (_ []byte, ok bool) {
	buf, ok = p.value(buf, 0)
	if !ok {
		return buf, false
	}
	p.skipSpace()
	return buf, p.i == len(p.s)
}

func (p *jsonCanon) skipSpace() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonCanon) literal(lit string) bool {
	if strings.HasPrefix(p.s[p.i:], lit) {
		p.i += len(lit)
		return true
	}
	return false
}

func (p *jsonCanon) value(buf []byte, depth int) ([]byte, bool) {
	if depth > maxCanonDepth {
		return buf, false
	}
	p.skipSpace()
	if p.i >= len(p.s) {
		return buf, false
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(buf, depth)
	case c == '[':
		p.i++
		buf = append(buf, '[')
		p.skipSpace()
		if p.i < len(p.s) && p.s[p.i] == ']' {
			p.i++
			return append(buf, ']'), true
		}
		for {
			var ok bool
			if buf, ok = p.value(buf, depth+1); !ok {
				return buf, false
			}
			p.skipSpace()
			if p.i >= len(p.s) {
				return buf, false
			}
			switch p.s[p.i] {
			case ',':
				p.i++
			case ']':
				p.i++
				return append(buf, ']'), true
			default:
				return buf, false
			}
		}
	case c == '"':
		s, esc, ok := p.str()
		if !ok {
			return buf, false
		}
		if esc != nil {
			return appendCanonStringBytes(buf, esc), true
		}
		return appendCanonString(buf, s), true
	case c == 't':
		return append(buf, 't'), p.literal("true")
	case c == 'f':
		return append(buf, 'f'), p.literal("false")
	case c == 'n':
		return append(buf, 'n'), p.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		text, ok := p.number()
		if !ok {
			return buf, false
		}
		var tmp [32]byte
		return appendCanonNumberValue(buf, appendCanonNumber(tmp[:0], text)), true
	}
	return buf, false
}

func (p *jsonCanon) object(buf []byte, depth int) ([]byte, bool) {
	p.i++ // '{'
	start := len(buf)
	var stack [8]canonMember
	mems := stack[:0]
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return append(buf, '{', '}'), true
	}
	for {
		p.skipSpace()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return buf, false
		}
		key, esc, ok := p.str()
		if !ok {
			return buf, false
		}
		if esc != nil {
			key = string(esc)
		}
		p.skipSpace()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return buf, false
		}
		p.i++
		lo := len(buf)
		if buf, ok = p.value(buf, depth+1); !ok {
			return buf, false
		}
		mems = append(mems, canonMember{key: key, lo: lo, hi: len(buf)})
		p.skipSpace()
		if p.i >= len(p.s) {
			return buf, false
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			buf, p.scratch = appendCanonObject(buf, start, mems, p.scratch)
			return buf, true
		default:
			return buf, false
		}
	}
}

// number scans a JSON number and returns its text.
func (p *jsonCanon) number() (string, bool) {
	s, start := p.s, p.i
	i := p.i
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return "", false
	}
	if i < len(s) && s[i] == '.' {
		i++
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			return "", false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			return "", false
		}
	}
	p.i = i
	return s[start:i], true
}

// str scans a JSON string at p.i. A string without escapes is returned as a
// substring of the input, without allocating; one with escapes is decoded into
// esc, which is valid until the next call. Lone surrogates decode to U+FFFD, as
// in encoding/json.
func (p *jsonCanon) str() (s string, esc []byte, ok bool) {
	in := p.s
	i := p.i + 1
	start := i
	for i < len(in) && in[i] != '"' && in[i] != '\\' {
		if in[i] < 0x20 {
			return "", nil, false
		}
		i++
	}
	if i >= len(in) {
		return "", nil, false
	}
	if in[i] == '"' {
		p.i = i + 1
		return in[start:i], nil, true
	}
	out := append(p.esc[:0], in[start:i]...)
	defer func() { p.esc = out[:0] }()
	for i < len(in) {
		c := in[i]
		switch {
		case c == '"':
			p.i = i + 1
			return "", out, true
		case c < 0x20:
			return "", nil, false
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(in) {
			return "", nil, false
		}
		switch e := in[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(in, i+2)
			if !ok {
				return "", nil, false
			}
			i += 6
			if r >= 0xD800 && r < 0xDC00 { // high surrogate: try to pair it
				if lo, ok := hex4(in, i+2); ok && i+1 < len(in) && in[i] == '\\' && in[i+1] == 'u' && lo >= 0xDC00 && lo < 0xE000 {
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					i += 6
				} else {
					r = 0xFFFD
				}
			} else if r >= 0xDC00 && r < 0xE000 {
				r = 0xFFFD
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return "", nil, false
		}
		i += 2
	}
	return "", nil, false
}

// hex4 decodes the four hex digits at s[i:i+4].
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		d, ok := hexVal(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// appendCanonJSONValue appends the canonical form of a decoded JSON value, as
// encoding/json or an adapter built it. It gives the same bytes as
// appendCanonJSONText on the value's JSON text.
func appendCanonJSONValue(buf []byte, v any, depth int) ([]byte, bool) {
	if depth > maxCanonDepth {
		return buf, false
	}
	switch v := v.(type) {
	case nil:
		return append(buf, 'n'), true
	case bool:
		if v {
			return append(buf, 't'), true
		}
		return append(buf, 'f'), true
	case string:
		return appendCanonString(buf, v), true
	case json.Number:
		if _, ok := (&jsonCanon{s: string(v)}).number(); !ok {
			return buf, false
		}
		var tmp [32]byte
		return appendCanonNumberValue(buf, appendCanonNumber(tmp[:0], string(v))), true
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return buf, false
		}
		var tmp [32]byte
		return appendCanonNumberValue(buf, appendCanonFloat(tmp[:0], v)), true
	case float32:
		return appendCanonJSONValue(buf, float64(v), depth)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		var tmp [32]byte
		return appendCanonNumberValue(buf, appendScalar(tmp[:0], v)), true
	case []any:
		buf = append(buf, '[')
		for _, e := range v {
			var ok bool
			if buf, ok = appendCanonJSONValue(buf, e, depth+1); !ok {
				return buf, false
			}
		}
		return append(buf, ']'), true
	case map[string]any:
		var stack [16]string
		keys := stack[:0]
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf = append(buf, '{')
		for _, k := range keys {
			buf = appendCanonString(buf, k)
			var ok bool
			if buf, ok = appendCanonJSONValue(buf, v[k], depth+1); !ok {
				return buf, false
			}
		}
		return append(buf, '}'), true
	case json.RawMessage:
		return appendCanonJSONText(buf, string(v))
	}
	// Anything else (structs, typed maps): through its JSON text.
	b, err := json.Marshal(v)
	if err != nil {
		return buf, false
	}
	return appendCanonJSONText(buf, string(b))
}

// appendCanonXML parses s as XML and appends a canonical form in the alphabet
// of the JSON one: an element is "<" name attributes ">" content "/", a name is
// a string of "{namespace}local", attributes are name-value string pairs sorted
// by name, text is a string, trimmed, and text that is only whitespace,
// comments, processing instructions and directives are dropped. Entities are
// decoded, so "&amp;" and "&#38;" are equal. ok is false if s is not
// well-formed XML.
func appendCanonXML(buf []byte, s string) (_ []byte, ok bool) {
	d := xml.NewDecoder(strings.NewReader(s))
	d.Strict = true
	depth := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return buf, depth == 0
		}
		if err != nil {
			return buf, false
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if depth++; depth > maxCanonDepth {
				return buf, false
			}
			buf = append(buf, '<')
			buf = appendCanonString(buf, xmlName(t.Name))
			attrs := slices.Clone(t.Attr)
			slices.SortFunc(attrs, func(a, b xml.Attr) int {
				return cmp.Or(cmp.Compare(a.Name.Space, b.Name.Space), cmp.Compare(a.Name.Local, b.Name.Local))
			})
			for _, a := range attrs {
				buf = appendCanonString(buf, xmlName(a.Name))
				buf = appendCanonString(buf, a.Value)
			}
			buf = append(buf, '>')
		case xml.EndElement:
			depth--
			buf = append(buf, '/')
		case xml.CharData:
			if text := bytes.TrimSpace(t); len(text) > 0 {
				buf = appendCanonString(buf, string(text))
			}
		}
	}
}

func xmlName(n xml.Name) string {
	if n.Space == "" {
		return n.Local
	}
	return "{" + n.Space + "}" + n.Local
}

// appendImageID appends the identity of an image or flash segment; see
// [Signature]. It appends nothing when the segment has no identity.
func appendImageID(buf []byte, data map[string]any) []byte {
	// One pass over the few fields, rather than a lookup for each candidate.
	var md5, sha1, u string
	var named [7]string // file, filename, file_name, file_id, fileid, fid, id
	for k, v := range data {
		s, ok := v.(string)
		if !ok {
			continue
		}
		switch k {
		case "md5":
			md5 = s
		case "sha1":
			sha1 = s
		case "url":
			u = s
		case "file":
			named[0] = s
		case "filename":
			named[1] = s
		case "file_name":
			named[2] = s
		case "file_id":
			named[3] = s
		case "fileid":
			named[4] = s
		case "fid":
			named[5] = s
		case "id":
			named[6] = s
		}
	}
	for _, d := range [...]struct{ name, v string }{{"md5", md5}, {"sha1", sha1}} {
		if d.v != "" {
			buf = append(buf, d.name...)
			buf = append(buf, ':')
			if isHex(d.v) {
				return appendLowerASCII(buf, d.v)
			}
			return append(buf, d.v...)
		}
	}
	for _, s := range named {
		if md5, ok := embeddedMD5(s); ok {
			buf = append(buf, "md5:"...)
			return appendLowerASCII(buf, md5)
		}
	}
	if u == "" && hasHTTPScheme(named[0]) {
		u = named[0]
	}
	if u = strings.TrimSpace(u); u != "" {
		buf = append(buf, "url:"...)
		return appendNormalizedURL(buf, u)
	}
	return buf
}

func hasHTTPScheme(s string) bool {
	return len(s) > 8 && (strings.EqualFold(s[:7], "http://") || strings.EqualFold(s[:8], "https://"))
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if _, ok := hexVal(s[i]); !ok {
			return false
		}
	}
	return s != ""
}

func appendLowerASCII(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf = append(buf, c)
	}
	return buf
}

// embeddedMD5 finds an MD5 in a file name or id: a run of exactly 32 hex digits,
// or a GUID (8-4-4-4-12 hex digits), which is how older QQ clients name image
// files. The digest is returned without dashes, in its original case.
func embeddedMD5(s string) (string, bool) {
	// runs holds the last five maximal hex runs, to recognise a GUID.
	var runs [5][2]int
	n := 0
	for i := 0; i < len(s); {
		if _, ok := hexVal(s[i]); !ok {
			i++
			continue
		}
		j := i
		for j < len(s) {
			if _, ok := hexVal(s[j]); !ok {
				break
			}
			j++
		}
		if j-i == 32 {
			return s[i:j], true
		}
		copy(runs[:], runs[1:])
		runs[4] = [2]int{i, j}
		if n++; n >= 5 && isGUID(s, runs) {
			var b strings.Builder
			for _, r := range runs {
				b.WriteString(s[r[0]:r[1]])
			}
			return b.String(), true
		}
		i = j
	}
	return "", false
}

func isGUID(s string, runs [5][2]int) bool {
	for k, want := range [5]int{8, 4, 4, 4, 12} {
		r := runs[k]
		if r[1]-r[0] != want {
			return false
		}
		if k > 0 && (r[0] != runs[k-1][1]+1 || s[r[0]-1] != '-') {
			return false
		}
	}
	return true
}

// appendNormalizedURL appends raw without its scheme, user info, default port
// (80 for http, 443 for https), fragment and volatile query parameters, with
// the host lower-cased and the identity parameters (fileid, file_id, md5, fid;
// names compared case-insensitively, values percent-decoded) sorted. Text
// without "scheme://" and a host is appended as is.
func appendNormalizedURL(buf []byte, raw string) []byte {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || scheme == "" || strings.ContainsAny(scheme, "/?#") {
		return append(buf, raw...)
	}
	rest, _, _ = strings.Cut(rest, "#")
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	authority, rest := rest[:end], rest[end:]
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		authority = authority[at+1:]
	}
	host, port := authority, ""
	if i := strings.LastIndexByte(authority, ':'); i >= 0 && !strings.Contains(authority[i:], "]") {
		host, port = authority[:i], authority[i+1:]
	}
	if host == "" {
		return append(buf, raw...)
	}
	buf = appendLowerASCII(buf, host)
	if port != "" && !(port == "443" && strings.EqualFold(scheme, "https")) && !(port == "80" && strings.EqualFold(scheme, "http")) {
		buf = append(buf, ':')
		buf = append(buf, port...)
	}
	path, query, _ := strings.Cut(rest, "?")
	if path == "" {
		path = "/"
	}
	buf = append(buf, path...)

	var stack [4]string
	keep := stack[:0]
	for query != "" {
		var kv string
		kv, query, _ = strings.Cut(query, "&")
		k, _, _ := strings.Cut(kv, "=")
		if isImageURLParam(k) {
			keep = append(keep, kv)
		}
	}
	slices.SortFunc(keep, func(a, b string) int {
		ka, va, _ := strings.Cut(a, "=")
		kb, vb, _ := strings.Cut(b, "=")
		return cmp.Or(compareFold(ka, kb), cmp.Compare(va, vb))
	})
	for i, kv := range keep {
		if i == 0 {
			buf = append(buf, '?')
		} else {
			buf = append(buf, '&')
		}
		k, v, _ := strings.Cut(kv, "=")
		buf = appendLowerASCII(buf, k)
		buf = append(buf, '=')
		if strings.ContainsAny(v, "%+") {
			if dec, err := url.QueryUnescape(v); err == nil {
				v = dec
			}
		}
		if strings.EqualFold(k, "md5") && isHex(v) {
			buf = appendLowerASCII(buf, v)
		} else {
			buf = appendQueryEscaped(buf, v)
		}
	}
	return buf
}

// isImageURLParam reports whether k names a query parameter that identifies
// an image's content across renderings of its URL; all others (rkey, appid,
// ...) are volatile.
func isImageURLParam(k string) bool {
	for _, p := range [...]string{"fileid", "file_id", "md5", "fid"} {
		if strings.EqualFold(k, p) {
			return true
		}
	}
	return false
}

// compareFold compares ASCII strings ignoring case.
func compareFold(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		ca, cb := a[i], b[i]
		if ca >= 'A' && ca <= 'Z' {
			ca += 'a' - 'A'
		}
		if cb >= 'A' && cb <= 'Z' {
			cb += 'a' - 'A'
		}
		if ca != cb {
			return cmp.Compare(ca, cb)
		}
	}
	return cmp.Compare(len(a), len(b))
}

// appendQueryEscaped appends v escaped for a query, leaving unreserved
// characters as they are.
func appendQueryEscaped(buf []byte, v string) []byte {
	const hexDigits = "0123456789ABCDEF"
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~':
			buf = append(buf, c)
		default:
			buf = append(buf, '%', hexDigits[c>>4], hexDigits[c&15])
		}
	}
	return buf
}
