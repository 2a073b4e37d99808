package dedupehttp_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// wecomVectorBody is wechatpy's WeCom test message (wechatpy/wechatpy,
// tests/test_crypto.py, test_decrypt_message).
const wecomVectorBody = "<xml><ToUserName><![CDATA[wx49f0ab532d5d035a]]></ToUserName>\n<Encrypt><![CDATA[RgqEoJj5A4EMYlLvWO1F86ioRjZfaex/gePD0gOXTxpsq5Yj4GNglrBb8I2BAJVODGajiFnXBu7mCPatfjsu6IHCrsTyeDXzF6Bv283dGymzxh6ydJRvZsryDyZbLTE7rhnus50qGPMfp2wASFlzEgMW9z1ef/RD8XzaFYgm7iTdaXpXaG4+BiYyolBug/gYNx410cvkKR2/nPwBiT+P4hIiOAQqGp/TywZBtDh1yCF2KOd0gpiMZ5jSw3e29mTvmUHzkVQiMS6td7vXUaWOMZnYZlF3So2SjHnwh4jYFxdgpkHHqIrH/54SNdshoQgWYEvccTKe7FS709/5t6NMxuGhcUGAPOQipvWTT4dShyqio7mlsl5noTrb++x6En749zCpQVhDpbV6GDnTbcX2e8K9QaNWHp91eBdCRxthuL0=]]></Encrypt>\n<AgentID><![CDATA[1]]></AgentID>\n</xml>"

// TestWeComMiddleware serves WeCom's deliveries through New: the real one
// once, its redelivery as a duplicate with the first answer, the URL check
// answered by the middleware, and 1,000 forgeries with 401, none reaching the
// store or the handler.
func TestWeComMiddleware(t *testing.T) {
	p := platform.WeCom.WithMsgCrypt("123456", "kWxPEV2UEDyxWpmPdKC3F4dgPDmOvfKX1HGnEUDS1aR", "wx49f0ab532d5d035a")
	var calls atomic.Int32
	var seen []string
	d := dedupe.New(nil)
	h := dedupehttp.New(d, p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		seen = append(seen, string(b))
		_, _ = io.WriteString(w, "reply")
	}), dedupehttp.WithLogger(quiet), dedupehttp.WithClock(func() time.Time { return time.Unix(1411525903, 0) }))
	deliverQ := func(query, body string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/wecom?"+query, strings.NewReader(body)))
		return w
	}
	const q = "msg_signature=74d92dfeb87ba7c714f89d98870ae5eb62dff26d&timestamp=1411525903&nonce=461056294"
	first := deliverQ(q, wecomVectorBody)
	assert.Equal(t, http.StatusOK, first.Code)
	assert.Equal(t, "reply", first.Body.String())
	require.Len(t, seen, 1)
	assert.Contains(t, seen[0], "<MsgId>4363689963896700987</MsgId>", "the handler reads the plaintext")
	again := deliverQ(q, wecomVectorBody)
	assert.Equal(t, "replayed", again.Header().Get(dedupehttp.HeaderVerdict))
	assert.Equal(t, "reply", again.Body.String(), "the redelivery gets the first answer")

	// The URL check, a GET, is answered by the middleware with the echostr's plaintext.
	check := httptest.NewRequest(http.MethodGet, "/wecom?msg_signature=dd6b9c95b495b3f7e2901bfbc76c664930ffdb96&timestamp=1411443780&nonce=437374425&echostr="+
		"4ByGGj%2BsVCYcvGeQYhaKIk1o0pQRNbRjxybjTGblXrBaXlTXeOo1%2BbXFXDQQb1o6co6Yh9Bv41n7hOchLF6p%2BQ%3D%3D", nil)
	w := httptest.NewRecorder()
	dedupehttp.New(d, p, http.NotFoundHandler(), dedupehttp.WithLogger(quiet),
		dedupehttp.WithClock(func() time.Time { return time.Unix(1411443780, 0) })).ServeHTTP(w, check)
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Regexp(t, `^\d+$`, w.Body.String())
	assert.Equal(t, "text/plain; charset=utf-8", w.Header().Get("Content-Type"), "the bare echostr, as WeCom expects")

	for i := range 1000 {
		var query, body string
		switch i % 4 {
		case 0: // wrong token
			query = "msg_signature=" + sha1hex("x", "1411525903", "n", fmt.Sprint(i)) + "&timestamp=1411525903&nonce=n"
			body = "<xml><Encrypt>" + fmt.Sprint(i) + "</Encrypt></xml>"
		case 1: // the real signature over another body
			query, body = q, strings.Replace(wecomVectorBody, "Rgq", "Rgp", 1)
		case 2: // no query
			body = wecomVectorBody
		case 3: // stale
			query = "msg_signature=" + sha1hex("123456", "1", "n", "AAAA") + "&timestamp=1&nonce=n"
			body = "<xml><Encrypt>AAAA</Encrypt></xml>"
		}
		w := deliverQ(query, body)
		require.Equal(t, http.StatusUnauthorized, w.Code, "forgery %d", i)
	}
	assert.EqualValues(t, 1, calls.Load())
	assert.EqualValues(t, 1000, h.Stats().Unauthenticated)
}

func sha1hex(parts ...string) string {
	sort.Strings(parts)
	sum := sha1.Sum([]byte(strings.Join(parts, "")))
	return hex.EncodeToString(sum[:])
}

// TestEchostrPlainText answers the URL checks of WeChat and WeCom, signed by
// platformtest, through New and NewAsync with the bare echostr as
// text/plain: WeChat's Access overview says to return echostr "原样返回"
// (as it is), and WeCom's 回调配置 (https://developer.work.weixin.qq.com/document/path/90930)
// to answer the decrypted msg "不能加引号，不能带bom头，不能带换行符" (no quotes,
// no BOM, no newline). Neither the store nor the handler is reached.
func TestEchostrPlainText(t *testing.T) {
	for _, name := range []string{"wechat", "wecom"} {
		s := platformtest.NewSigner(name, "echo-token")
		token, _, _ := s.MsgCrypt()
		p := s.Preset(map[string]platform.Preset{"wechat": platform.WeChat, "wecom": platform.WeCom}[name])
		ts := strconv.FormatInt(platformNow.Unix(), 10)
		q := url.Values{"timestamp": {ts}, "nonce": {"42"}}
		want := "1234567890123456789"
		if name == "wechat" {
			q.Set("echostr", want)
			q.Set("signature", sha1hex(token, ts, "42"))
		} else { // WeCom's echostr is encrypted: the answer is its plaintext
			signed, body := s.SignQuery([]byte(want), platformNow)
			q = signed
			_, enc, _ := strings.Cut(string(body), "<Encrypt><![CDATA[")
			enc, _, _ = strings.Cut(enc, "]]>")
			q.Set("echostr", enc)
		}
		store := &countingStore{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
		d := dedupe.New(store)
		clock := dedupehttp.WithClock(func() time.Time { return platformNow })
		a := dedupehttp.NewAsync(d, dedupehttp.FromPreset(p), http.NotFoundHandler(), clock, dedupehttp.WithLogger(quiet))
		t.Cleanup(func() { _ = a.Close(context.Background()) })
		for mode, h := range map[string]http.Handler{
			"middleware": dedupehttp.New(d, p, http.NotFoundHandler(), clock, dedupehttp.WithLogger(quiet)),
			"async":      a,
		} {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/hook?"+q.Encode(), nil))
			assert.Equal(t, http.StatusOK, w.Code, name+"/"+mode)
			assert.Equal(t, want, w.Body.String(), name+"/"+mode)
			assert.Equal(t, "text/plain; charset=utf-8", w.Header().Get("Content-Type"), name+"/"+mode)
		}
		assert.Zero(t, store.calls.Load(), name)
	}
}
