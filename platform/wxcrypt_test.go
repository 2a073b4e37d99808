package platform_test

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe/platform"
)

// A WXBizMsgCrypt written apart from the preset's, from the description in
// WeCom's "加解密方案说明" (https://developer.work.weixin.qq.com/document/path/90968),
// so that the tests can make deliveries (and forgeries) the official vectors
// do not hold.

// wxKeys is one WXBizMsgCrypt configuration, as a platform holds it.
type wxKeys struct {
	token, encodingAESKey, receiver string
}

func (k wxKeys) aesKey(t testing.TB) []byte {
	key, err := base64.StdEncoding.DecodeString(k.encodingAESKey + "=")
	require.NoError(t, err)
	return key
}

// encryptRaw encrypts plain, a whole number of AES blocks, as it is.
func (k wxKeys) encryptRaw(t testing.TB, plain []byte) string {
	key := k.aesKey(t)
	block, err := aes.NewCipher(key)
	require.NoError(t, err)
	out := append([]byte(nil), plain...)
	cipher.NewCBCEncrypter(block, key[:16]).CryptBlocks(out, out)
	return base64.StdEncoding.EncodeToString(out)
}

// decrypt returns the msg and the receiver id of the ciphertext enc.
func (k wxKeys) decrypt(t testing.TB, enc string) (msg, receiver string) {
	key := k.aesKey(t)
	raw, err := base64.StdEncoding.DecodeString(enc)
	require.NoError(t, err)
	block, err := aes.NewCipher(key)
	require.NoError(t, err)
	cipher.NewCBCDecrypter(block, key[:16]).CryptBlocks(raw, raw)
	raw = raw[:len(raw)-int(raw[len(raw)-1])]
	n := binary.BigEndian.Uint32(raw[16:20])
	return string(raw[20 : 20+n]), string(raw[20+n:])
}

// encrypt encrypts msg for receiver, padded to 32 bytes.
func (k wxKeys) encrypt(t testing.TB, msg []byte, receiver string) string {
	plain := []byte("0123456789abcdef")
	plain = binary.BigEndian.AppendUint32(plain, uint32(len(msg)))
	plain = append(append(plain, msg...), receiver...)
	pad := 32 - len(plain)%32
	for range pad {
		plain = append(plain, byte(pad))
	}
	return k.encryptRaw(t, plain)
}

// wxSign is the sorted SHA-1 of parts, in hex.
func wxSign(parts ...string) string {
	s := append([]string(nil), parts...)
	sort.Strings(s)
	sum := sha1.Sum([]byte(strings.Join(s, "")))
	return hex.EncodeToString(sum[:])
}

// wxRequest is a request with query q and no header.
func wxRequest(q url.Values) *http.Request {
	return &http.Request{Method: http.MethodPost, URL: &url.URL{RawQuery: q.Encode()}, Header: http.Header{}}
}

// wxDelivery is an encrypted delivery of msg: its request and its body.
// body formats the ciphertext ("<xml><Encrypt>…" or {"encrypt":…}).
func (k wxKeys) wxDelivery(t testing.TB, msg []byte, now time.Time, sigParam string, body func(enc string) string) (*http.Request, []byte) {
	enc := k.encrypt(t, msg, k.receiver)
	ts, nonce := fmt.Sprint(now.Unix()), "1320562132"
	q := url.Values{"timestamp": {ts}, "nonce": {nonce}, sigParam: {wxSign(k.token, ts, nonce, enc)}}
	return wxRequest(q), []byte(body(enc))
}

func xmlEncrypt(enc string) string {
	return "<xml><ToUserName><![CDATA[ww1]]></ToUserName><Encrypt><![CDATA[" + enc + "]]></Encrypt></xml>"
}

func jsonEncrypt(enc string) string { return `{"encrypt":"` + enc + `"}` }

// forgeFunc makes forged delivery number i of one kind.
type forgeFunc func(t testing.TB, i int) (*http.Request, []byte)

// refuseForgeries delivers n forgeries, taking the kinds in turn, and checks
// that p refuses each with ErrUnauthenticated.
func refuseForgeries(t *testing.T, p platform.Preset, now time.Time, n int, kinds map[string]forgeFunc) {
	t.Helper()
	require.GreaterOrEqual(t, len(kinds), 10, "at least ten kinds of forgery")
	names := make([]string, 0, len(kinds))
	for name := range kinds {
		names = append(names, name)
	}
	sort.Strings(names)
	for i := range n {
		name := names[i%len(names)]
		r, body := kinds[name](t, i)
		out, err := p.VerifyRequest(r, body, now)
		require.ErrorIs(t, err, platform.ErrUnauthenticated, "%s #%d accepted", name, i)
		require.Nil(t, out, name)
	}
}

// cryptForgeries are the forgeries of a WXBizMsgCrypt delivery: msg(i) is
// the plaintext, body formats the ciphertext, sigParam names the signature.
func cryptForgeries(k wxKeys, msg func(i int) []byte, now time.Time, sigParam string, body func(string) string) map[string]forgeFunc {
	other := wxKeys{token: "not-the-token", encodingAESKey: "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C", receiver: k.receiver}
	ts := fmt.Sprint(now.Unix())
	signed := func(t testing.TB, enc string, ts string) (*http.Request, []byte) {
		q := url.Values{"timestamp": {ts}, "nonce": {"7"}, sigParam: {wxSign(k.token, ts, "7", enc)}}
		return wxRequest(q), []byte(body(enc))
	}
	return map[string]forgeFunc{
		"wrong token": func(t testing.TB, i int) (*http.Request, []byte) {
			enc := k.encrypt(t, msg(i), k.receiver)
			q := url.Values{"timestamp": {ts}, "nonce": {"7"}, sigParam: {wxSign(other.token, ts, "7", enc)}}
			return wxRequest(q), []byte(body(enc))
		},
		"wrong AES key": func(t testing.TB, i int) (*http.Request, []byte) {
			return signed(t, other.encrypt(t, msg(i), k.receiver), ts)
		},
		"wrong receiver id": func(t testing.TB, i int) (*http.Request, []byte) {
			return signed(t, k.encrypt(t, msg(i), k.receiver+"x"), ts)
		},
		"tampered ciphertext": func(t testing.TB, i int) (*http.Request, []byte) {
			enc := k.encrypt(t, msg(i), k.receiver)
			r, _ := signed(t, enc, ts)
			raw, _ := base64.StdEncoding.DecodeString(enc)
			raw[i%len(raw)] ^= 1 << (i % 8)
			return r, []byte(body(base64.StdEncoding.EncodeToString(raw)))
		},
		"bad padding": func(t testing.TB, i int) (*http.Request, []byte) {
			plain := append([]byte("0123456789abcdef\x00\x00\x00\x01x"), k.receiver...)
			for len(plain)%32 != 0 {
				plain = append(plain, byte(33+i%200)) // pad bytes out of 1..32
			}
			return signed(t, k.encryptRaw(t, plain), ts)
		},
		"length past the end": func(t testing.TB, i int) (*http.Request, []byte) {
			plain := []byte("0123456789abcdef\x7f\xff\xff\xff")
			plain = append(append(plain, msg(i)...), k.receiver...)
			pad := 32 - len(plain)%32
			for range pad {
				plain = append(plain, byte(pad))
			}
			return signed(t, k.encryptRaw(t, plain), ts)
		},
		"truncated ciphertext": func(t testing.TB, i int) (*http.Request, []byte) {
			raw, _ := base64.StdEncoding.DecodeString(k.encrypt(t, msg(i), k.receiver))
			return signed(t, base64.StdEncoding.EncodeToString(raw[:len(raw)-1-i%15]), ts)
		},
		"stale timestamp": func(t testing.TB, i int) (*http.Request, []byte) {
			return signed(t, k.encrypt(t, msg(i), k.receiver), fmt.Sprint(now.Add(-25*time.Hour).Unix()))
		},
		"future timestamp": func(t testing.TB, i int) (*http.Request, []byte) {
			return signed(t, k.encrypt(t, msg(i), k.receiver), fmt.Sprint(now.Add(25*time.Hour).Unix()))
		},
		"no signature": func(t testing.TB, i int) (*http.Request, []byte) {
			r, b := signed(t, k.encrypt(t, msg(i), k.receiver), ts)
			q := r.URL.Query()
			q.Del(sigParam)
			return wxRequest(q), b
		},
		"signature twice": func(t testing.TB, i int) (*http.Request, []byte) {
			enc := k.encrypt(t, msg(i), k.receiver)
			q := url.Values{"timestamp": {ts}, "nonce": {"7"}, sigParam: {"0000", wxSign(k.token, ts, "7", enc)}}
			return wxRequest(q), []byte(body(enc))
		},
		"another nonce": func(t testing.TB, i int) (*http.Request, []byte) {
			r, b := signed(t, k.encrypt(t, msg(i), k.receiver), ts)
			q := r.URL.Query()
			q.Set("nonce", fmt.Sprint(i))
			return wxRequest(q), b
		},
		"plaintext not the expected format": func(t testing.TB, i int) (*http.Request, []byte) {
			return signed(t, k.encrypt(t, []byte(fmt.Sprintf("garbage %d", i)), k.receiver), ts)
		},
		"no encrypted body": func(t testing.TB, i int) (*http.Request, []byte) {
			q := url.Values{"timestamp": {ts}, "nonce": {"7"}, sigParam: {wxSign(k.token, ts, "7", "")}}
			return wxRequest(q), msg(i)
		},
	}
}
