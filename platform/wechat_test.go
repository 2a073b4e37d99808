package platform_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
)

// The decryption sample of Tencent's WXBizMsgCrypt sample code for Official
// Accounts (Sample.py, "测试解密接口"; a copy is in choogoo/WXBizMsgCrypt,
// python3/Sample.py): a compatible-mode body, plaintext and Encrypt.
var wechatSample = struct {
	keys                   wxKeys
	timestamp, nonce, sign string
	body                   string
}{
	keys:      wxKeys{token: "spamtest", encodingAESKey: "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG", receiver: "wx2c2769f8efd9abc2"},
	timestamp: "1409735669", nonce: "1320562132", sign: "5d197aaffba7e9b25a30732f161a50dee96bd5fa",
	body: `<xml><ToUserName><![CDATA[gh_10f6c3c3ac5a]]></ToUserName><FromUserName><![CDATA[oyORnuP8q7ou2gfYjqLzSIWZf0rs]]></FromUserName><CreateTime>1409735668</CreateTime><MsgType><![CDATA[text]]></MsgType><Content><![CDATA[abcdteT]]></Content><MsgId>6054768590064713728</MsgId><Encrypt><![CDATA[hyzAe4OzmOMbd6TvGdIOO6uBmdJoD0Fk53REIHvxYtJlE2B655HuD0m8KUePWB3+LrPXo87wzQ1QLvbeUgmBM4x6F8PGHQHFVAFmOD2LdJF9FrXpbUAh0B5GIItb52sn896wVsMSHGuPE328HnRGBcrS7C41IzDWyWNlZkyyXwon8T332jisa+h6tEDYsVticbSnyU8dKOIbgU6ux5VTjg3yt+WGzjlpKn6NPhRjpA912xMezR4kw6KWwMrCVKSVCZciVGCgavjIQ6X8tCOp3yZbGpy0VxpAe+77TszTfRd5RJSVO/HTnifJpXgCSUdUue1v6h0EIBYYI1BD1DlD+C0CR8e6OewpusjZ4uBl9FyJvnhvQl+q5rv1ixrcpCumEPo5MJSgM9ehVsNPfUM669WuMyVWQLCzpu9GhglF2PE=]]></Encrypt></xml>`,
}

// The text message and subscribe event of WeChat's documentation (Receiving
// standard messages; Receiving event pushes, 关注/取消关注事件).
const (
	wechatText      = `<xml><ToUserName><![CDATA[toUser]]></ToUserName><FromUserName><![CDATA[fromUser]]></FromUserName><CreateTime>1348831860</CreateTime><MsgType><![CDATA[text]]></MsgType><Content><![CDATA[this is a test]]></Content><MsgId>1234567890123456</MsgId></xml>`
	wechatSubscribe = `<xml><ToUserName><![CDATA[toUser]]></ToUserName><FromUserName><![CDATA[FromUser]]></FromUserName><CreateTime>123456789</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[subscribe]]></Event></xml>`
)

func TestWeChatSafeModeSample(t *testing.T) {
	s := wechatSample
	p := platform.WeChat.WithMsgCrypt(s.keys.token, s.keys.encodingAESKey, s.keys.receiver)
	require.NoError(t, p.CheckSecret())
	now := time.Unix(1409735669, 0)
	r := wxRequest(url.Values{"signature": {"ignored"}, "timestamp": {s.timestamp}, "nonce": {s.nonce},
		"encrypt_type": {"aes"}, "msg_signature": {s.sign}})
	for range 2 { // a retry is the same key
		plain, err := p.VerifyRequest(r, []byte(s.body), now)
		require.NoError(t, err)
		assert.Contains(t, string(plain), "<Content><![CDATA[abcdteT]]></Content>")
		assert.NotContains(t, string(plain), "Encrypt", "the plaintext, not the body")
		k, err := p.Extract(plain, nil)
		require.NoError(t, err)
		assert.Equal(t, dedupe.Key{Channel: "wechat", MessageID: "6054768590064713728"}, k)
		_, ok := p.Answer(plain)
		assert.False(t, ok)
	}
	_, err := p.VerifyRequest(r, []byte(s.body), now.Add(11*time.Minute))
	assert.ErrorIs(t, err, platform.ErrUnauthenticated, "a replay older than the TTL")
	_, err = p.Verify([]byte(s.body), http.Header{}, now)
	assert.ErrorIs(t, err, platform.ErrUnauthenticated, "Verify cannot see the query")
	_, err = platform.WeChat.Extract([]byte(s.body), nil)
	assert.NoError(t, err, "compatible mode carries the plaintext too")
}

// plainRequest signs a plain-mode request with token.
func plainRequest(token string, now time.Time, nonce string, extra url.Values) *http.Request {
	ts := fmt.Sprint(now.Unix())
	q := url.Values{"timestamp": {ts}, "nonce": {nonce}, "signature": {wxSign(token, ts, nonce)}}
	for k, v := range extra {
		q[k] = v
	}
	return wxRequest(q)
}

func TestWeChatPlainMode(t *testing.T) {
	p := platform.WeChat.WithSecret("tok")
	now := time.Unix(1348831860, 0)
	body, err := p.VerifyRequest(plainRequest("tok", now, "n1", nil), []byte(wechatText), now)
	require.NoError(t, err)
	k, err := p.Extract(body, nil)
	require.NoError(t, err)
	assert.Equal(t, "1234567890123456", k.MessageID)

	ev, err := p.Extract([]byte(wechatSubscribe), nil)
	require.NoError(t, err)
	assert.Regexp(t, `^event:FromUser:123456789:subscribe:[0-9a-f]{32}$`, ev.MessageID)
	again, _ := p.Extract([]byte(wechatSubscribe), nil)
	assert.Equal(t, ev, again, "a retry repeats the event")
	click, _ := p.Extract([]byte(strings.Replace(wechatSubscribe, "subscribe", "CLICK", 1)), nil)
	assert.NotEqual(t, ev, click)
	other, _ := p.Extract([]byte(strings.Replace(wechatSubscribe, "</xml>", "<EventKey>b</EventKey></xml>", 1)), nil)
	assert.NotEqual(t, ev, other, "two events of one user in one second")

	// The URL check: GET with echostr, answered with it.
	echo, err := p.VerifyRequest(plainRequest("tok", now, "n2", url.Values{"echostr": {"5837397520131445598"}}), nil, now)
	require.NoError(t, err)
	resp, ok := p.Answer(echo)
	assert.True(t, ok)
	assert.Equal(t, "5837397520131445598", string(resp))
	_, err = p.Extract(echo, nil)
	assert.ErrorIs(t, err, platform.ErrNotAMessage)
}

func TestWeChatExtractEdges(t *testing.T) {
	for name, c := range map[string]struct {
		body string
		want error
	}{
		"MsgId twice":         {`<xml><MsgId>1</MsgId><MsgId>2</MsgId></xml>`, dedupe.ErrInvalidKey},
		"case differs":        {`<xml><msgid>1</msgid></xml>`, dedupe.ErrNoMessageID},
		"space in MsgId":      {`<xml><MsgId> 1</MsgId></xml>`, dedupe.ErrInvalidKey},
		"MsgId zero":          {`<xml><MsgId>0</MsgId></xml>`, dedupe.ErrInvalidKey},
		"element in MsgId":    {`<xml><MsgId><a/></MsgId></xml>`, dedupe.ErrNoMessageID},
		"colon in user":       {`<xml><FromUserName>a:b</FromUserName><CreateTime>1</CreateTime><Event>x</Event></xml>`, dedupe.ErrInvalidKey},
		"no CreateTime":       {`<xml><FromUserName>a</FromUserName><Event>x</Event></xml>`, dedupe.ErrInvalidKey},
		"doctype":             {`<!DOCTYPE xml [<!ENTITY a "1">]><xml><MsgId>&a;</MsgId></xml>`, dedupe.ErrNoMessageID},
		"other root":          {`<msg><MsgId>1</MsgId></msg>`, dedupe.ErrNoMessageID},
		"two roots":           {`<xml><MsgId>1</MsgId></xml><xml/>`, dedupe.ErrNoMessageID},
		"encrypted":           {xmlEncrypt("abc"), dedupe.ErrNoMessageID},
		"namespaced":          {`<xml><a:MsgId xmlns:a="x">1</a:MsgId></xml>`, dedupe.ErrNoMessageID},
		"not XML":             {`{"MsgId":1}`, dedupe.ErrNoMessageID},
		"unclosed":            {`<xml><MsgId>1</MsgId>`, dedupe.ErrNoMessageID},
		"nested MsgId is not": {`<xml><Video><MsgId>1</MsgId></Video></xml>`, dedupe.ErrNoMessageID},
	} {
		_, err := platform.WeChat.Extract([]byte(c.body), nil)
		assert.ErrorIs(t, err, c.want, name)
	}
	k, err := platform.WeChat.Extract([]byte(`<?xml version="1.0"?><!-- c --><xml><MsgId><![CDATA[12]]></MsgId></xml>`+"\n"), nil)
	require.NoError(t, err)
	assert.Equal(t, "12", k.MessageID)
}

func TestWeChatForgeries(t *testing.T) {
	now := time.Unix(1700000000, 0)
	t.Run("plain mode", func(t *testing.T) {
		p := platform.WeChat.WithSecret("tok")
		body := func(i int) []byte { return []byte(strings.Replace(wechatText, "1234567890123456", fmt.Sprint(i+1), 1)) }
		refuseForgeries(t, p, now, 1000, map[string]forgeFunc{
			"wrong token": func(_ testing.TB, i int) (*http.Request, []byte) {
				return plainRequest("other", now, "n", nil), body(i)
			},
			"stale timestamp": func(_ testing.TB, i int) (*http.Request, []byte) {
				return plainRequest("tok", now.Add(-11*time.Minute), "n", nil), body(i)
			},
			"future timestamp": func(_ testing.TB, i int) (*http.Request, []byte) {
				return plainRequest("tok", now.Add(11*time.Minute), "n", nil), body(i)
			},
			"no query": func(_ testing.TB, i int) (*http.Request, []byte) { return wxRequest(nil), body(i) },
			"another nonce": func(_ testing.TB, i int) (*http.Request, []byte) {
				r := plainRequest("tok", now, "n", nil)
				q := r.URL.Query()
				q.Set("nonce", fmt.Sprint("m", i))
				return wxRequest(q), body(i)
			},
			"signature twice": func(_ testing.TB, i int) (*http.Request, []byte) {
				r := plainRequest("tok", now, "n", nil)
				q := r.URL.Query()
				q.Add("signature", "00")
				return wxRequest(q), body(i)
			},
			"body not XML": func(_ testing.TB, i int) (*http.Request, []byte) {
				return plainRequest("tok", now, "n", nil), []byte(fmt.Sprintf(`echostr\n%d`, i))
			},
			"echostr with a body": func(_ testing.TB, i int) (*http.Request, []byte) {
				return plainRequest("tok", now, "n", url.Values{"echostr": {fmt.Sprint(i)}}), body(i)
			},
			"echostr wrongly signed": func(_ testing.TB, i int) (*http.Request, []byte) {
				return plainRequest("other", now, "n", url.Values{"echostr": {fmt.Sprint(i)}}), nil
			},
			"echostr not an identifier": func(_ testing.TB, i int) (*http.Request, []byte) {
				return plainRequest("tok", now, "n", url.Values{"echostr": {fmt.Sprintf("<script>%d", i)}}), nil
			},
			"timestamp not a number": func(_ testing.TB, i int) (*http.Request, []byte) {
				q := url.Values{"timestamp": {"1e9"}, "nonce": {"n"}, "signature": {wxSign("tok", "1e9", "n")}}
				return wxRequest(q), body(i)
			},
		})
	})
	t.Run("safe mode", func(t *testing.T) {
		k := wxKeys{token: "tok", encodingAESKey: wechatSample.keys.encodingAESKey, receiver: "wxappid"}
		p := platform.WeChat.WithMsgCrypt(k.token, k.encodingAESKey, k.receiver)
		msg := func(i int) []byte { return []byte(strings.Replace(wechatText, "1234567890123456", fmt.Sprint(i+1), 1)) }
		kinds := cryptForgeries(k, msg, now, "msg_signature", xmlEncrypt)
		kinds["downgrade to plain mode"] = func(_ testing.TB, i int) (*http.Request, []byte) {
			return plainRequest("tok", now, "n", nil), msg(i)
		}
		refuseForgeries(t, p, now, 1000, kinds)
		r, body := k.wxDelivery(t, msg(41), now, "msg_signature", xmlEncrypt)
		plain, err := p.VerifyRequest(r, body, now)
		require.NoError(t, err, "the real delivery beside the forgeries")
		key, err := p.Extract(plain, nil)
		require.NoError(t, err)
		assert.Equal(t, "42", key.MessageID)
	})
}

// TestWeChatSeal seals a passive reply and reads it back as WeChat would.
func TestWeChatSeal(t *testing.T) {
	k := wechatSample.keys
	p := platform.WeChat.WithMsgCrypt(k.token, k.encodingAESKey, k.receiver)
	now := time.Unix(1700000000, 0)
	reply := []byte(`<xml><ToUserName><![CDATA[u]]></ToUserName><MsgType><![CDATA[text]]></MsgType></xml>`)
	sealed, err := p.Seal(reply, now)
	require.NoError(t, err)
	m := regexp.MustCompile(`^<xml><Encrypt><!\[CDATA\[([^\]]+)\]\]></Encrypt><MsgSignature><!\[CDATA\[([0-9a-f]{40})\]\]></MsgSignature><TimeStamp>(\d+)</TimeStamp><Nonce><!\[CDATA\[(\w+)\]\]></Nonce></xml>$`).FindStringSubmatch(string(sealed))
	require.NotNil(t, m, string(sealed))
	assert.Equal(t, wxSign(k.token, m[3], m[4], m[1]), m[2])
	plain, err := p.VerifyRequest(wxRequest(url.Values{"msg_signature": {m[2]}, "timestamp": {m[3]}, "nonce": {m[4]}}), sealed, now)
	require.NoError(t, err)
	assert.Equal(t, reply, plain)
	_, err = platform.WeChat.WithSecret("tok").Seal(reply, now)
	assert.ErrorIs(t, err, platform.ErrUnauthenticated, "plain mode has nothing to seal with")
}

func TestMsgCryptSecrets(t *testing.T) {
	good := wechatSample.keys.encodingAESKey
	for name, p := range map[string]platform.Preset{
		"short key":     platform.WeCom.WithMsgCrypt("t", good[:42], "id"),
		"key not b64":   platform.WeCom.WithMsgCrypt("t", strings.Repeat("!", 43), "id"),
		"no token":      platform.WeCom.WithMsgCrypt("", good, "id"),
		"no receiver":   platform.WeCom.WithMsgCrypt("t", good, ""),
		"other preset":  platform.LINE.WithMsgCrypt("t", good, "id"),
		"WithSecret":    platform.WeCom.WithSecret("t"),
		"events secret": platform.DingTalkEvents.WithSecret("t"),
	} {
		assert.ErrorIs(t, p.CheckSecret(), platform.ErrUnauthenticated, name)
		_, err := p.VerifyRequest(wxRequest(nil), []byte(`<xml/>`), time.Now())
		assert.ErrorIs(t, err, platform.ErrUnauthenticated, name)
		_, err = p.VerifyRequest(nil, []byte(`<xml/>`), time.Now())
		assert.ErrorIs(t, err, platform.ErrUnauthenticated, name)
	}
}

// TestVerifyRequestOtherPresets checks that VerifyRequest is Verify for a
// preset that signs in headers, and passes a delivery through for a preset
// without a secret.
func TestVerifyRequestOtherPresets(t *testing.T) {
	p := platform.DingTalk.WithSecret("s")
	now := time.Now()
	r := &http.Request{URL: &url.URL{RawQuery: "a=b"}, Header: dingtalkSign("s", now)}
	got, err := p.VerifyRequest(r, []byte(dingtalkRobotBody), now)
	require.NoError(t, err)
	assert.Equal(t, dingtalkRobotBody, string(got))
	r.Header = http.Header{}
	_, err = p.VerifyRequest(r, []byte(dingtalkRobotBody), now)
	assert.ErrorIs(t, err, platform.ErrUnauthenticated)
	got, err = platform.WeCom.VerifyRequest(r, []byte("<xml/>"), now)
	require.NoError(t, err, "no secret: not authenticated, as Verify")
	assert.Equal(t, "<xml/>", string(got))
}
