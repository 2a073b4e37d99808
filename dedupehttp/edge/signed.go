package edge

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// The query parameters of a signed URL.
const (
	paramExpires   = "expires"
	paramSignature = "sig"
)

// SignURL returns rawURL (a path such as "/queue/ID", or an absolute URL)
// with two query parameters added: expires, the Unix second after which it
// is refused, and sig, an HMAC-SHA256 under key of its path, its query and
// expires. [SignedURL] accepts it until then, from anyone who holds it: give
// a status link to a caller without a token. Sign the path the server will
// see (behind a proxy that rewrites paths, the rewritten one). key should be
// at least 32 random bytes; an empty key is an error, as is a URL that does
// not parse or already carries expires or sig.
func SignURL(key []byte, rawURL string, expires time.Time) (string, error) {
	if len(key) == 0 {
		return "", errors.New("dedupe: edge: SignURL: empty key")
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	q := u.Query()
	if q.Has(paramExpires) || q.Has(paramSignature) {
		return "", errors.New("dedupe: edge: SignURL: the URL already carries expires or sig")
	}
	q.Set(paramExpires, strconv.FormatInt(expires.Unix(), 10))
	u.RawQuery = q.Encode()
	q.Set(paramSignature, signature(key, u.EscapedPath(), q.Get(paramExpires), u.RawQuery))
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// SignedURL returns a verifier for [RequireAuth] that accepts a request whose
// URL [SignURL] signed with key and whose expiry has not passed at now()
// (time.Now when now is nil). A URL whose path, query or expiry was changed,
// or that carries two signatures, is refused; so is every request when key
// is empty.
func SignedURL(key []byte, now func() time.Time) func(*http.Request) bool {
	if now == nil {
		now = time.Now
	}
	key = append([]byte(nil), key...)
	return func(r *http.Request) bool {
		q, err := url.ParseQuery(r.URL.RawQuery)
		if len(key) == 0 || err != nil || len(q[paramSignature]) != 1 || len(q[paramExpires]) != 1 {
			return false
		}
		exp, err := strconv.ParseInt(q.Get(paramExpires), 10, 64)
		if err != nil || now().Unix() > exp {
			return false
		}
		got := q.Get(paramSignature)
		q.Del(paramSignature)
		want := signature(key, r.URL.EscapedPath(), q.Get(paramExpires), q.Encode())
		return hmac.Equal([]byte(got), []byte(want))
	}
}

// signature is the HMAC-SHA256 under key of the escaped path and the
// encoded query (which holds expires), in unpadded base64url.
func signature(key []byte, path, expires, query string) string {
	m := hmac.New(sha256.New, key)
	for _, part := range []string{path, expires, query} { // length-prefixed: no two inputs read alike
		m.Write(strconv.AppendInt(nil, int64(len(part)), 10))
		m.Write([]byte{':'})
		m.Write([]byte(part))
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
