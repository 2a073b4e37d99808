package platform_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
)

// FuzzMsgCryptDecrypt signs whatever ciphertext the fuzzer makes up with the
// right token, so that it reaches decryption, for WeCom (XML) and DingTalk's
// events (JSON): it is accepted only when it decrypts, with valid padding,
// to a plaintext for the right receiver id in the platform's format, and
// never panics.
func FuzzMsgCryptDecrypt(f *testing.F) {
	f.Add(strings.Split(strings.Split(wecomBody, "<![CDATA[")[2], "]]>")[0])
	f.Add(dingtalkEncrypt)
	f.Add("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
	f.Add("")
	now := time.Unix(1700000000, 0)
	ts := "1700000000"
	f.Fuzz(func(t *testing.T, enc string) {
		for _, c := range []struct {
			keys   wxKeys
			p      platform.Preset
			body   func(string) string
			format func([]byte) bool
		}{
			{wecomKeys, wecomPreset(), xmlEncrypt, func(b []byte) bool { return strings.Contains(string(b), "<xml") }},
			{dingtalkKeys, dingtalkEventsPreset(), jsonEncrypt, func(b []byte) bool { return strings.Contains(string(b), "{") }},
		} {
			if strings.ContainsAny(enc, "<]&\"\\") {
				continue // the fuzzer's text would change the body's XML or JSON, not the ciphertext
			}
			q := url.Values{"msg_signature": {wxSign(c.keys.token, ts, "n", enc)}, "timestamp": {ts}, "nonce": {"n"}}
			plain, err := c.p.VerifyRequest(wxRequest(q), []byte(c.body(enc)), now)
			if err != nil {
				require.ErrorIs(t, err, platform.ErrUnauthenticated)
				require.Nil(t, plain)
				continue
			}
			msg, receiver := c.keys.decrypt(t, enc)
			require.Equal(t, c.keys.receiver, receiver, "accepted a plaintext for another receiver")
			require.Equal(t, msg, string(plain))
			require.True(t, c.format(plain))
		}
	})
}

// FuzzWeChatVerify makes up the query and body of a WeChat delivery: plain
// mode accepts it only when its signature is the token's over its timestamp
// and nonce, safe mode only when msg_signature also covers its Encrypt; an
// echostr is answered only when signed. Nothing panics.
func FuzzWeChatVerify(f *testing.F) {
	f.Add("timestamp=1700000000&nonce=n&signature=00", []byte(wechatText))
	f.Add("timestamp=1409735669&nonce=1320562132&msg_signature=5d197aaffba7e9b25a30732f161a50dee96bd5fa", []byte(wechatSample.body))
	f.Add("timestamp=1700000000&nonce=n&signature=00&echostr=1", []byte{})
	now := time.Unix(1700000000, 0)
	plain := platform.WeChat.WithSecret("tok")
	safe := platform.WeChat.WithMsgCrypt("tok", wechatSample.keys.encodingAESKey, "wxappid")
	f.Fuzz(func(t *testing.T, rawQuery string, body []byte) {
		r := &http.Request{URL: &url.URL{RawQuery: rawQuery}, Header: http.Header{}}
		q, qerr := url.ParseQuery(rawQuery)
		for i, p := range []platform.Preset{plain, safe} {
			got, err := p.VerifyRequest(r, body, now)
			if err != nil {
				require.ErrorIs(t, err, platform.ErrUnauthenticated)
				continue
			}
			require.NoError(t, qerr)
			if i == 0 || q.Has("echostr") {
				require.Equal(t, wxSign("tok", q.Get("timestamp"), q.Get("nonce")), strings.ToLower(q.Get("signature")))
			} else {
				require.NotEmpty(t, q.Get("msg_signature"), "safe mode accepted a delivery without msg_signature")
			}
			if _, ok := p.Answer(got); ok {
				require.True(t, q.Has("echostr"), "answered what is not a URL check")
			}
			_, _ = p.Extract(got, nil)
		}
	})
}

// FuzzWXExtract reads whatever XML the fuzzer makes up as WeChat and WeCom
// do: no panic, a key only when valid, the same key every time.
func FuzzWXExtract(f *testing.F) {
	for _, s := range []string{wechatText, wechatSubscribe, wecomChange, `<xml><MsgId>1</MsgId><MsgId>1</MsgId></xml>`,
		`<?xml version="1.0"?><xml><MsgId><![CDATA[1]]></MsgId></xml>`, "echostr\n1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, p := range []platform.Preset{platform.WeChat, platform.WeCom} {
			k, err := p.Extract(body, nil)
			k2, err2 := p.Extract(body, nil)
			require.Equal(t, k, k2)
			require.Equal(t, err == nil, err2 == nil)
			if err == nil {
				require.NoError(t, k.Validate())
				continue
			}
			require.True(t, errors.Is(err, dedupe.ErrNoMessageID) || errors.Is(err, dedupe.ErrInvalidKey), "%v", err)
		}
	})
}

// FuzzDingTalkVerify makes up a robot's timestamp and sign headers: accepted
// only when sign is the HMAC of the timestamp and the timestamp is within
// the hour.
func FuzzDingTalkVerify(f *testing.F) {
	now := time.UnixMilli(1613630252678)
	h := dingtalkSign("SECappsecret", now)
	f.Add(h.Get("Timestamp"), h.Get("Sign"))
	f.Add("1613630252678", "00")
	f.Add("-1", "")
	p := platform.DingTalk.WithSecret("SECappsecret")
	f.Fuzz(func(t *testing.T, ts, sign string) {
		_, err := p.Verify([]byte(dingtalkRobotBody), http.Header{"Timestamp": {ts}, "Sign": {sign}}, now)
		if err != nil {
			require.ErrorIs(t, err, platform.ErrUnauthenticated)
			return
		}
		mac := hmac.New(sha256.New, []byte("SECappsecret"))
		mac.Write([]byte(ts + "\nSECappsecret"))
		got, derr := base64.StdEncoding.DecodeString(sign)
		require.NoError(t, derr)
		require.Equal(t, mac.Sum(nil), got, "accepted a sign that is not the timestamp's")
	})
}

// FuzzDingTalkEventsExtract keys whatever plaintext the fuzzer makes up.
func FuzzDingTalkEventsExtract(f *testing.F) {
	f.Add([]byte(`{"EventType":"user_add_org","UserId":["u1"]}`))
	f.Add([]byte(`{"EventType":"check_url"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		k, err := platform.DingTalkEvents.Extract(body, nil)
		if err == nil {
			require.NoError(t, k.Validate())
			return
		}
		require.True(t, errors.Is(err, dedupe.ErrNoMessageID) || errors.Is(err, dedupe.ErrInvalidKey), "%v", err)
	})
}
