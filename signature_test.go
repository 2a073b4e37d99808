package dedupe

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe/internal/canon"
)

func seg(typ string, kv ...any) Segment {
	d := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		d[kv[i].(string)] = kv[i+1]
	}
	return Segment{Type: typ, Data: d}
}

func segs(s ...Segment) []Segment { return s }

const md5Hex = "dbb3746f0128c88f07ceb6f23812f987"

// TestSignatureRules checks each rule of the content signature: pairs of
// renderings that must give one signature, and pairs that must not.
func TestSignatureRules(t *testing.T) {
	long := strings.Repeat("x", 300)
	card := `{"app":"com.tencent.miniapp","meta":{"id":1234,"title":"hello 世界"},"ver":"1.0"}`
	tests := []struct {
		name  string
		a, b  []Segment
		equal bool
	}{
		// text
		{"text same", segs(seg("text", "text", "hi")), segs(seg("text", "text", "hi")), true},
		{"text differs", segs(seg("text", "text", "hi")), segs(seg("text", "text", "hi!")), false},
		{"text whole, not a 256-char prefix", segs(seg("text", "text", long+"a")), segs(seg("text", "text", long+"b")), false},
		{"text with separator is not two texts", segs(seg("text", "text", "a|t:b")), segs(seg("text", "text", "a"), seg("text", "text", "b")), false},
		{"text with netstring inside is not two texts", segs(seg("text", "text", "1:a,4:text,1:b,")), segs(seg("text", "text", "1:a,"), seg("text", "text", "1:b,")), false},
		{"text whitespace matters", segs(seg("text", "text", "a b")), segs(seg("text", "text", "a  b")), false},
		{"text is not at", segs(seg("text", "text", "111")), segs(seg("at", "qq", "111")), false},

		// at
		{"at number equals string", segs(seg("at", "qq", 10001)), segs(seg("at", "qq", "10001")), true},
		{"at json.Number equals float64", segs(seg("at", "qq", json.Number("10001"))), segs(seg("at", "qq", float64(10001))), true},
		{"at qq equals target", segs(seg("at", "qq", "10001")), segs(seg("at", "target", "10001")), true},
		{"at qq wins over target", segs(seg("at", "qq", "1", "target", "2")), segs(seg("at", "qq", "1")), true},
		{"at different targets", segs(seg("at", "qq", "10001")), segs(seg("at", "qq", "10002")), false},
		{"at all", segs(seg("at", "qq", "all")), segs(seg("at", "qq", "all")), true},
		{"at big id exact", segs(seg("at", "qq", json.Number("123456789012345678"))), segs(seg("at", "qq", "123456789012345678")), true},

		// face
		{"face number equals string", segs(seg("face", "id", 14)), segs(seg("face", "id", "14")), true},
		{"face id equals face", segs(seg("face", "id", "14")), segs(seg("face", "face", 14)), true},
		{"face differs", segs(seg("face", "id", 14)), segs(seg("face", "id", 15)), false},

		// json, ark
		{"json string equals object", segs(seg("json", "data", card)), segs(seg("json", "data", map[string]any{"ver": "1.0", "meta": map[string]any{"title": "hello 世界", "id": json.Number("1234")}, "app": "com.tencent.miniapp"})), true},
		{"json key order and whitespace", segs(seg("json", "data", card)), segs(seg("json", "data", "{\n  \"ver\" : \"1.0\",\n  \"meta\" : {\"title\": \"hello \\u4e16\\u754c\", \"id\": 1234},\n\t\"app\":\"com.tencent.miniapp\"\n}\n")), true},
		{"json numbers by value", segs(seg("json", "data", `{"a":1.0,"b":1e2}`)), segs(seg("json", "data", `{"b":100,"a":1}`)), true},
		{"json float64 object", segs(seg("json", "data", `{"a":1.5}`)), segs(seg("json", "data", map[string]any{"a": 1.5})), true},
		{"json escapes decoded", segs(seg("json", "data", `{"a":"\u003c\/b\u003e"}`)), segs(seg("json", "data", `{"a":"</b>"}`)), true},
		{"json value differs", segs(seg("json", "data", `{"a":1}`)), segs(seg("json", "data", `{"a":2}`)), false},
		{"json string is not number", segs(seg("json", "data", `{"a":"1"}`)), segs(seg("json", "data", `{"a":1}`)), false},
		{"json array order matters", segs(seg("json", "data", `[1,2]`)), segs(seg("json", "data", `[2,1]`)), false},
		{"json unparsable hashed as trimmed text", segs(seg("json", "data", "  {oops ")), segs(seg("json", "data", "{oops")), true},
		{"json unparsable differs", segs(seg("json", "data", "{oops")), segs(seg("json", "data", "{oops!")), false},
		{"json trailing garbage is unparsable", segs(seg("json", "data", `{"a":1} x`)), segs(seg("json", "data", `{"a":1}`)), false},
		{"json content field", segs(seg("json", "content", card)), segs(seg("json", "data", card)), true},
		{"ark whole data", segs(seg("ark", "template_id", 23, "kv", []any{map[string]any{"key": "#DESC#", "value": "x"}})), segs(seg("ark", "kv", []any{map[string]any{"value": "x", "key": "#DESC#"}}, "template_id", "23")), false},
		{"ark whole data, numbers by value", segs(seg("ark", "template_id", 23, "kv", []any{})), segs(seg("ark", "kv", []any{}, "template_id", 23.0)), true},
		{"json is not ark", segs(seg("json", "data", card)), segs(seg("ark", "data", card)), false},

		// xml
		{"xml attribute order and layout", segs(seg("xml", "data", `<?xml version="1.0" encoding="utf-8"?><msg a="1" b="2"><item>hi</item></msg>`)), segs(seg("xml", "data", "<msg b=\"2\" a=\"1\">\n  <item> hi </item>\n  <!-- c -->\n</msg>")), true},
		{"xml entities decoded", segs(seg("xml", "data", `<m t="&amp;">&lt;</m>`)), segs(seg("xml", "data", `<m t="&#38;">&#60;</m>`)), true},
		{"xml text differs", segs(seg("xml", "data", `<m>a</m>`)), segs(seg("xml", "data", `<m>b</m>`)), false},
		{"xml unclosed is unparsable", segs(seg("xml", "data", ` <m>a `)), segs(seg("xml", "data", `<m>a`)), true},
		{"xml unparsable differs", segs(seg("xml", "data", `<m>a`)), segs(seg("xml", "data", `<m>b`)), false},

		// image, flash
		{"image md5 case-insensitive", segs(seg("image", "md5", strings.ToUpper(md5Hex))), segs(seg("image", "md5", md5Hex)), true},
		{"image md5 equals md5 in file name", segs(seg("image", "md5", md5Hex, "url", "https://gchat.qpic.cn/x")), segs(seg("image", "file", strings.ToUpper(md5Hex)+".jpg", "url", "https://multimedia.nt.qq.com.cn/download?fileid=abc&rkey=1")), true},
		{"image md5 in GUID file name", segs(seg("image", "file", "{DBB3746F-0128-C88F-07CE-B6F23812F987}.jpg")), segs(seg("image", "md5", md5Hex)), true},
		{"image md5 in id field", segs(seg("image", "file_id", "/"+md5Hex+"-1-2")), segs(seg("image", "md5", md5Hex)), true},
		{"image md5 wins over url", segs(seg("image", "md5", md5Hex, "url", "https://a.example/1")), segs(seg("image", "md5", md5Hex, "url", "https://b.example/2")), true},
		{"image md5 differs", segs(seg("image", "md5", md5Hex)), segs(seg("image", "md5", "0"+md5Hex[1:])), false},
		{"image sha1", segs(seg("image", "sha1", "ABCDEF")), segs(seg("image", "sha1", "abcdef")), true},
		{"image sha1 is not md5", segs(seg("image", "sha1", md5Hex)), segs(seg("image", "md5", md5Hex)), false},
		{"image 31 hex digits are not an md5", segs(seg("image", "file", md5Hex[:31]+".jpg", "url", "https://a.example/1")), segs(seg("image", "file", md5Hex[:31]+".png", "url", "https://a.example/2")), false},
		{"image url normalised", segs(seg("image", "file", "image", "url", "https://Multimedia.NT.qq.com.cn:443/download?rkey=0.65&fileid=dbb3746f0128&appid=1407#x")), segs(seg("image", "url", "http://multimedia.nt.qq.com.cn/download?fileid=dbb3746f0128&rkey=0.69")), true},
		{"image url identity params kept and sorted", segs(seg("image", "url", "https://h.example/p?fid=2&fileid=1&md5=ABC")), segs(seg("image", "url", "https://h.example/p?md5=abc&fileid=1&x=9&fid=2")), true},
		{"image url fileid differs", segs(seg("image", "url", "https://h.example/p?fileid=1")), segs(seg("image", "url", "https://h.example/p?fileid=2")), false},
		{"image url path differs", segs(seg("image", "url", "https://h.example/a")), segs(seg("image", "url", "https://h.example/b")), false},
		{"image url non-default port kept", segs(seg("image", "url", "https://h.example:8443/a")), segs(seg("image", "url", "https://h.example/a")), false},
		{"image url user info and fragment dropped", segs(seg("image", "url", "https://u:p@h.example/a?fileid=1#frag")), segs(seg("image", "url", "https://h.example/a?fileid=1")), true},
		{"image url percent-encoding of values", segs(seg("image", "url", "https://h.example/a?fileid=a%2Db%3D")), segs(seg("image", "url", "https://h.example/a?fileid=a-b%3d")), true},
		{"image url parameter names fold case", segs(seg("image", "url", "https://h.example/a?FileID=1")), segs(seg("image", "url", "https://h.example/a?fileid=1")), true},
		{"image url fileid value keeps case", segs(seg("image", "url", "https://h.example/a?fileid=Ab")), segs(seg("image", "url", "https://h.example/a?fileid=ab")), false},
		{"image url ipv6 host and port", segs(seg("image", "url", "http://[::1]:80/a")), segs(seg("image", "url", "https://[::1]/a")), true},
		{"image url empty path", segs(seg("image", "url", "https://h.example")), segs(seg("image", "url", "https://h.example/")), true},
		{"image url without scheme is raw", segs(seg("image", "url", "h.example/a")), segs(seg("image", "url", "h.example/a?rkey=1")), false},
		{"image http url in file", segs(seg("image", "file", "https://h.example/a?rkey=1")), segs(seg("image", "url", "https://H.example/a")), true},
		{"image url-only is not md5", segs(seg("image", "url", "https://h.example/a")), segs(seg("image", "md5", md5Hex)), false},
		{"image without identity is the type alone", segs(seg("image", "file", "image")), segs(seg("image")), true},
		{"flash is not image", segs(seg("flash", "md5", md5Hex)), segs(seg("image", "md5", md5Hex)), false},

		// type only
		{"video type only", segs(seg("video", "file", "https://v.example/1.mp4")), segs(seg("video", "file", "protobuf://2")), true},
		{"record type only", segs(seg("record", "file", "a.amr")), segs(seg("record", "url", "b")), true},
		{"file type only", segs(seg("file", "name", "a")), segs(seg("file", "name", "b")), true},
		{"video is not record", segs(seg("video")), segs(seg("record")), false},
		{"unknown type only", segs(seg("poke", "id", 1)), segs(seg("poke", "id", 2)), true},
		{"unknown types differ", segs(seg("poke")), segs(seg("dice")), false},

		// reply, empty, order
		{"reply left out", segs(seg("reply", "id", "1"), seg("text", "text", "hi")), segs(seg("text", "text", "hi")), true},
		{"reply ids differ", segs(seg("reply", "id", "1"), seg("text", "text", "hi")), segs(seg("reply", "id", "2"), seg("text", "text", "hi")), true},
		{"empty messages", nil, segs(), true},
		{"empty is not empty text", nil, segs(seg("text", "text", "")), false},
		{"segment order matters", segs(seg("face", "id", 1), seg("text", "text", "a")), segs(seg("text", "text", "a"), seg("face", "id", 1)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := Signature(tt.a), Signature(tt.b)
			assert.Equal(t, tt.equal, a == b, "Signature equal\n a: %q\n b: %q", a, b)
		})
	}
}

// TestSignatureForm pins the readable form of signatures.
func TestSignatureForm(t *testing.T) {
	tests := []struct {
		segs []Segment
		want string
	}{
		{nil, ""},
		{segs(seg("text", "text", "hi")), "4:text,2:hi,"},
		{segs(seg("reply", "id", 9), seg("at", "qq", 10001), seg("text", "text", " hi")), "2:at,5:10001,4:text,3: hi,"},
		{segs(seg("face", "id", 14.0)), "4:face,2:14,"},
		{segs(seg("image", "md5", strings.ToUpper(md5Hex))), "5:image,36:md5:" + md5Hex + ","},
		{segs(seg("image", "url", "https://A.example:443/p?rkey=1&fileid=F")), "5:image,24:url:a.example/p?fileid=F,"},
		{segs(seg("video", "file", "x")), "5:video,0:,"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Signature(tt.segs), "Signature(%v)", tt.segs)
	}
	// json digests are 32 hex digits
	got := Signature(segs(seg("json", "data", `{"a":1}`)))
	assert.True(t, strings.HasPrefix(got, "4:json,32:"), "json signature = %q, want a 32-digit digest", got)
	assert.Len(t, got, len("4:json,32:")+33, "json signature, want a 32-digit digest")
}

// TestEventCanonicalForm checks the fields of each kind's key.
func TestEventCanonicalForm(t *testing.T) {
	ts := func(ms int64) Identity { return Identity{Adapter: "a", BotID: "1", Timestamp: timeMS(ms)} }
	msg := func(mt, group, user, text string) *Event {
		return &Event{Kind: "message", MessageType: mt, GroupID: group, UserID: user, Segments: segs(seg("text", "text", text))}
	}
	tests := []struct {
		name  string
		a, b  *Event
		equal bool
	}{
		{"message ids and bots do not count", msg("group", "1", "2", "x"), &Event{Kind: "message", Identity: Identity{Adapter: "icqq", BotID: "9", MessageID: "m", Timestamp: timeMS(5)}, MessageType: "group", GroupID: "1", UserID: "2", Segments: segs(seg("text", "text", "x"))}, true},
		{"sender counts", msg("group", "1", "2", "x"), msg("group", "1", "3", "x"), false},
		{"session counts", msg("group", "1", "2", "x"), msg("group", "4", "2", "x"), false},
		{"private session is the user", msg("private", "", "2", "x"), msg("private", "7", "2", "x"), true},
		{"private is not group", msg("private", "", "2", "x"), msg("group", "2", "2", "x"), false},
		{"group without group id is not the sender's group", msg("group", "", "2", "x"), msg("group", "2", "2", "x"), false},
		{"group without group id is not a private message", msg("group", "", "2", "x"), msg("private", "", "2", "x"), false},
		{"groups without group id", msg("group", "", "2", "x"), msg("group", "", "2", "x"), true},
		{"field boundaries", msg("group", "1", "23", "x"), msg("group", "12", "3", "x"), false},
		{"field into content", msg("group", "1", "2", "4:text,1:x,"), &Event{Kind: "message", MessageType: "group", GroupID: "1", UserID: "2", Segments: segs(seg("text", "text", "4:text,1:x,"))}, true},
		{"notice same second", &Event{Kind: "notice", NoticeType: "group_increase", GroupID: "1", UserID: "2", Identity: ts(1000)}, &Event{Kind: "notice", NoticeType: "group_increase", GroupID: "1", UserID: "2", Identity: ts(1999)}, true},
		{"notice send time does not count (compared with a tolerance)", &Event{Kind: "notice", NoticeType: "group_increase", GroupID: "1", UserID: "2", Identity: ts(1000)}, &Event{Kind: "notice", NoticeType: "group_increase", GroupID: "1", UserID: "2", Identity: ts(60000)}, true},
		{"request send time does not count", &Event{Kind: "request", RequestType: "friend", UserID: "2", Identity: ts(1000)}, &Event{Kind: "request", RequestType: "friend", UserID: "2"}, true},
		{"notice operator counts", &Event{Kind: "notice", NoticeType: "group_increase", OperatorID: "1"}, &Event{Kind: "notice", NoticeType: "group_increase", OperatorID: "2"}, false},
		{"notice sub type counts", &Event{Kind: "notice", NoticeType: "group_increase", SubType: "approve"}, &Event{Kind: "notice", NoticeType: "group_increase", SubType: "invite"}, false},
		{"notice is not request", &Event{Kind: "notice", NoticeType: "friend"}, &Event{Kind: "request", RequestType: "friend"}, false},
		{"request comment counts", &Event{Kind: "request", RequestType: "friend", UserID: "2", Comment: "hi"}, &Event{Kind: "request", RequestType: "friend", UserID: "2", Comment: "hey"}, false},
		{"request flag does not count", &Event{Kind: "request", RequestType: "friend", Identity: Identity{NativeEventID: "f1"}}, &Event{Kind: "request", RequestType: "friend", Identity: Identity{NativeEventID: "f2"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fa, fb := tt.a.CanonicalForm(), tt.b.CanonicalForm()
			assert.Equal(t, tt.equal, fa == fb, "forms equal\n a: %q\n b: %q", fa, fb)
			ka, kb := tt.a.CorrelationKey(), tt.b.CorrelationKey()
			assert.Equal(t, fa == fb, ka == kb, "keys equal as the forms are")
		})
	}

	ev := msg("group", "286", "25258", "the bot")
	assert.Equal(t, "7:message,5:group,3:286,5:25258,4:text,7:the bot,", ev.CanonicalForm(), "CanonicalForm")
	k := ev.CorrelationKey()
	assert.False(t, k.IsZero(), "CorrelationKey = %v", k)
	assert.Len(t, k.String(), 32, "CorrelationKey")
	meta := &Event{Kind: "meta_event"}
	assert.Empty(t, meta.CanonicalForm(), "meta_event has a key")
	assert.True(t, meta.CorrelationKey().IsZero(), "meta_event has a key")
}

// FuzzSignature checks that Signature never panics, is deterministic, and does
// not depend on JSON key order or layout: a valid JSON payload, its compact
// and indented re-encodings (keys sorted by encoding/json) and its decoded
// value all give one signature. The JSON parser itself is fuzzed in
// internal/canon.
func FuzzSignature(f *testing.F) {
	seeds := []string{
		``, `hello`, `{"app":"com.tencent.miniapp","meta":{"id":1,"title":"x"},"ver":"1.0"}`,
		`[1, 2.50, -0, 1e3, "a\u00e9\ud800", {"b":null,"a":true}]`, `{"a":1,"a":2}`, `"\ud83d\ude00"`,
		`<msg a="1" b="2"><i>x</i></msg>`, `<?xml version="1.0"?><a>&amp;</a>`, `<a><b></a>`,
		md5Hex + ".jpg", "{DBB3746F-0128-C88F-07CE-B6F23812F987}", `https://H.example:443/p?rkey=1&fileid=F#f`,
		`1e400`, `{"":[[[[]]]]}`, "\xff", `{"a":"<&>"}`,
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		msg := segs(seg("reply", "id", s), seg("text", "text", s), seg("at", "qq", s), seg("face", "id", s),
			seg("json", "data", s), seg("ark", "data", s), seg("xml", "data", s),
			seg("image", "file", s, "url", s), seg("flash", "md5", s), seg(s, "x", s))
		a, b := Signature(msg), Signature(msg)
		require.Equal(t, a, b, "not deterministic")
		ev := &Event{Kind: "message", MessageType: "group", GroupID: s, UserID: s, Segments: msg}
		require.Equal(t, ev.CorrelationKey(), ev.CorrelationKey(), "key not deterministic")

		deep := strings.Count(s, "[")+strings.Count(s, "{") > canon.MaxDepth
		if deep || !json.Valid([]byte(s)) || !utf8.ValidString(s) {
			return
		}
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		var v any
		require.NoError(t, dec.Decode(&v), "encoding/json")
		compact, err := json.Marshal(v)
		if err != nil {
			return // numbers such as 1e400 that encoding/json cannot write back
		}
		var indented bytes.Buffer
		require.NoError(t, json.Indent(&indented, compact, "\n ", "\t"))
		want := Signature(segs(seg("json", "data", s)))
		others := []any{string(compact), indented.String()}
		switch v.(type) {
		case map[string]any, []any: // a decoded string payload would be taken as JSON text
			others = append(others, v)
		}
		for _, other := range others {
			require.Equal(t, want, Signature(segs(seg("json", "data", other))), "signature of %q differs for the equivalent %#v", s, other)
		}
	})
}

func timeMS(ms int64) time.Time { return time.UnixMilli(1_700_000_000_000 + ms) }

// TestSignatureHostileValues checks that segments holding Go values JSON
// cannot hold, or maps that contain themselves, give a stable signature
// instead of recursing without end (a self-referencing map used to overflow
// the stack through fmt).
func TestSignatureHostileValues(t *testing.T) {
	self := map[string]any{"app": "x"}
	self["self"] = self
	loop := []any{"a", nil}
	loop[1] = loop
	type card struct {
		Title string
		Next  *card
	}
	ring := &card{Title: "a"}
	ring.Next = ring
	msgs := map[string][]Segment{
		"json map containing itself":    segs(seg("json", "data", self)),
		"ark data containing itself":    segs(seg("ark", "kv", loop, "self", self)),
		"at target containing itself":   segs(seg("at", "qq", self)),
		"text that is a struct ring":    segs(seg("text", "text", ring)),
		"face id that is a function":    segs(seg("face", "id", func() {})),
		"json struct ring":              segs(seg("json", "data", ring)),
		"json channel":                  segs(seg("json", "data", make(chan int))),
		"xml data that is not a string": segs(seg("xml", "data", self)),
	}
	seen := map[string]string{}
	for name, msg := range msgs {
		a, b := Signature(msg), Signature(msg)
		require.Equal(t, a, b, "%s: not stable", name)
		other, ok := seen[a]
		assert.False(t, ok, "%s and %s give one signature %q", name, other, a)
		seen[a] = name
	}
	other := map[string]any{"app": "y"}
	other["self"] = other
	assert.NotEqual(t, Signature(segs(seg("json", "data", self))), Signature(segs(seg("json", "data", other))), "what was read before the limit counts")
}
