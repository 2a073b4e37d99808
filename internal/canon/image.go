package canon

import (
	"cmp"
	"net/url"
	"slices"
	"strings"
)

// AppendImageID appends the identity of an image or flash segment's data: the
// content digest ("md5:" or "sha1:" and the data's "md5", else "sha1"), else an
// MD5 embedded in a file name or id field ("file", "filename", "file_name",
// "file_id", "fileid", "fid", "id"; 32 hex digits, or a {GUID}), else "url:"
// and the normalised URL (data "url", or a "file" that is an http URL), else
// nothing. Hex digests are lower-cased. Only string fields are read.
func AppendImageID(buf []byte, data map[string]any) []byte {
	f := readImageFields(data)
	if out, ok := f.appendDigest(buf); ok {
		return out
	}
	if out, ok := f.appendURL(buf); ok {
		return out
	}
	return buf
}

// AppendImageKeyID appends the identity [AppendImageID] gives and reports
// whether it is a digest. url is the image's URL as given, trimmed (data
// "url", or a "file" that is an http URL), or "" if it has none: the URL
// identity is [AppendImageURLID] of it, which is computed here only when it is
// the identity appended.
func AppendImageKeyID(buf []byte, data map[string]any) (_ []byte, digest bool, url string) {
	f := readImageFields(data)
	url = f.rawURL()
	if out, ok := f.appendDigest(buf); ok {
		return out, true, url
	}
	if url != "" {
		return AppendImageURLID(buf, url), false, url
	}
	return buf, false, ""
}

// AppendImageURLID appends the URL identity of an image whose URL, as
// [AppendImageKeyID] returns it, is url: "url:" and the normalised URL.
func AppendImageURLID(buf []byte, url string) []byte {
	buf = append(buf, "url:"...)
	return AppendNormalizedURL(buf, url)
}

// imageFields are the string fields of an image segment's data that name
// the image.
type imageFields struct {
	md5, sha1, url string
	named          [7]string // file, filename, file_name, file_id, fileid, fid, id
}

func readImageFields(data map[string]any) imageFields {
	// One pass over the few fields, rather than a lookup for each candidate.
	var f imageFields
	for k, v := range data {
		s, ok := v.(string)
		if !ok {
			continue
		}
		switch k {
		case "md5":
			f.md5 = s
		case "sha1":
			f.sha1 = s
		case "url":
			f.url = s
		case "file":
			f.named[0] = s
		case "filename":
			f.named[1] = s
		case "file_name":
			f.named[2] = s
		case "file_id":
			f.named[3] = s
		case "fileid":
			f.named[4] = s
		case "fid":
			f.named[5] = s
		case "id":
			f.named[6] = s
		}
	}
	return f
}

// appendDigest appends the image's digest identity, if it has one.
func (f *imageFields) appendDigest(buf []byte) ([]byte, bool) {
	for _, d := range [...]struct{ name, v string }{{"md5", f.md5}, {"sha1", f.sha1}} {
		if d.v != "" {
			buf = append(buf, d.name...)
			buf = append(buf, ':')
			if isHex(d.v) {
				return appendLowerASCII(buf, d.v), true
			}
			return append(buf, d.v...), true
		}
	}
	for _, s := range f.named {
		if md5, ok := embeddedMD5(s); ok {
			buf = append(buf, "md5:"...)
			return appendLowerASCII(buf, md5), true
		}
	}
	return buf, false
}

// appendURL appends the image's URL identity, if it has one.
func (f *imageFields) appendURL(buf []byte) ([]byte, bool) {
	if u := f.rawURL(); u != "" {
		return AppendImageURLID(buf, u), true
	}
	return buf, false
}

// rawURL returns the image's URL as given, trimmed, or "".
func (f *imageFields) rawURL() string {
	u := f.url
	if u == "" && hasHTTPScheme(f.named[0]) {
		u = f.named[0]
	}
	return strings.TrimSpace(u)
}

func hasHTTPScheme(s string) bool {
	return len(s) > 8 && (strings.EqualFold(s[:7], "http://") || strings.EqualFold(s[:8], "https://"))
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

// AppendNormalizedURL appends raw without its scheme, user info, default port
// (80 for http, 443 for https), fragment and volatile query parameters, with
// the host lower-cased and the identity parameters (fileid, file_id, md5, fid;
// names compared case-insensitively, values percent-decoded) sorted. Text
// without "scheme://" and a host is appended as is.
func AppendNormalizedURL(buf []byte, raw string) []byte {
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
	return appendIdentityQuery(buf, query)
}

// appendIdentityQuery appends the identity parameters of a query, sorted, as
// "?k=v&k=v", or nothing if there are none.
func appendIdentityQuery(buf []byte, query string) []byte {
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
