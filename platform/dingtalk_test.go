package platform_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
)

// dingtalkRobotBody is the HTTP body of DingTalk's "接收消息的消息协议" (Receive
// messages, https://open.dingtalk.com/document/isvapp/receive-message).
const dingtalkRobotBody = `{"conversationId":"xxx","atUsers":[{"dingtalkId":"xxx","staffId":"xxx"}],"chatbotCorpId":"dinge8a565xxxx","chatbotUserId":"$:LWCP_v1:$Cxxxxx","msgId":"msg0xxxxx","senderNick":"杨xx","isAdmin":true,"senderStaffId":"user123","sessionWebhookExpiredTime":1613635652738,"createAt":1613630252678,"senderCorpId":"dinge8a565xxxx","conversationType":"2","senderId":"$:LWCP_v1:$Ff09GIxxxxx","conversationTitle":"机器人测试-TEST","isInAtList":true,"sessionWebhook":"https://oapi.dingtalk.com/robot/sendBySession?session=xxxxx","text":{"content":" 你好"},"msgtype":"text"}`

// dingtalkSign signs the headers as the page says: base64(HMAC-SHA256(secret, timestamp+"\n"+secret)).
func dingtalkSign(secret string, now time.Time) http.Header {
	ts := fmt.Sprint(now.UnixMilli())
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "\n" + secret))
	return http.Header{"Timestamp": {ts}, "Sign": {base64.StdEncoding.EncodeToString(mac.Sum(nil))}}
}

func TestDingTalkRobot(t *testing.T) {
	p := platform.DingTalk.WithSecret("SECappsecret")
	now := time.UnixMilli(1613630252678)
	h := dingtalkSign("SECappsecret", now)
	r := &http.Request{URL: &url.URL{}, Header: h}
	body, err := p.VerifyRequest(r, []byte(dingtalkRobotBody), now.Add(59*time.Minute))
	require.NoError(t, err)
	k, err := p.Extract(body, nil)
	require.NoError(t, err)
	assert.Equal(t, dedupe.Key{Channel: "dingtalk", MessageID: "msg0xxxxx"}, k)
	_, err = p.Verify([]byte(dingtalkRobotBody), h, now.Add(61*time.Minute))
	assert.ErrorIs(t, err, platform.ErrUnauthenticated, "more than an hour from now")

	body = func(i int) []byte {
		return []byte(strings.Replace(dingtalkRobotBody, "msg0xxxxx", fmt.Sprint("msg", i), 1))
	}(0)
	forged := func(f func(h http.Header, i int)) forgeFunc {
		return func(_ testing.TB, i int) (*http.Request, []byte) {
			h := dingtalkSign("SECappsecret", now)
			f(h, i)
			return &http.Request{URL: &url.URL{}, Header: h}, body
		}
	}
	refuseForgeries(t, p, now, 1000, map[string]forgeFunc{
		"wrong secret": func(_ testing.TB, i int) (*http.Request, []byte) {
			return &http.Request{URL: &url.URL{}, Header: dingtalkSign(fmt.Sprint("SEC", i), now)}, body
		},
		"stale timestamp": func(_ testing.TB, i int) (*http.Request, []byte) {
			return &http.Request{URL: &url.URL{}, Header: dingtalkSign("SECappsecret", now.Add(-time.Hour-time.Duration(i+1)*time.Second))}, body
		},
		"future timestamp": func(_ testing.TB, i int) (*http.Request, []byte) {
			return &http.Request{URL: &url.URL{}, Header: dingtalkSign("SECappsecret", now.Add(time.Hour+time.Duration(i+1)*time.Second))}, body
		},
		"no sign":             forged(func(h http.Header, _ int) { h.Del("Sign") }),
		"no timestamp":        forged(func(h http.Header, _ int) { h.Del("Timestamp") }),
		"sign not base64":     forged(func(h http.Header, i int) { h.Set("Sign", fmt.Sprint("%%", i)) }),
		"sign URL-encoded":    forged(func(h http.Header, _ int) { h.Set("Sign", url.QueryEscape(h.Get("Sign")+"+/")) }),
		"sign short":          forged(func(h http.Header, _ int) { h.Set("Sign", h.Get("Sign")[:20]) }),
		"another timestamp":   forged(func(h http.Header, i int) { h.Set("Timestamp", fmt.Sprint(now.UnixMilli()+int64(i)+1)) }),
		"timestamp negative":  forged(func(h http.Header, _ int) { h.Set("Timestamp", "-1") }),
		"timestamp too long":  forged(func(h http.Header, _ int) { h.Set("Timestamp", "16136302526780") }),
		"sign of another app": forged(func(h http.Header, i int) { h.Set("Sign", dingtalkSign(fmt.Sprint(i), now).Get("Sign")) }),
	})
}

// TestDingTalkRobotSecondsRefused signs 100 robot deliveries with the
// AppSecret, as DingTalk's sign is computed, but over a timestamp in seconds
// within the hour: DingTalk's timestamp is "消息发送的时间戳，单位是毫秒" (in
// milliseconds), so each is refused. Before, a 10-digit timestamp was read
// as seconds, and 100 of 100 passed.
func TestDingTalkRobotSecondsRefused(t *testing.T) {
	const secret = "SECappsecret-of-the-robot"
	p := platform.DingTalk.WithSecret(secret)
	now := time.UnixMilli(1613630252678)
	accepted := 0
	for i := range 100 {
		ts := fmt.Sprint(now.Add(time.Duration(i-50) * 36 * time.Second).Unix())
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts + "\n" + secret))
		h := http.Header{"Timestamp": {ts}, "Sign": {base64.StdEncoding.EncodeToString(mac.Sum(nil))}}
		_, err := p.VerifyRequest(&http.Request{URL: &url.URL{}, Header: h}, []byte(dingtalkRobotBody), now)
		if err == nil {
			accepted++
		} else {
			assert.ErrorIs(t, err, platform.ErrUnauthenticated)
			assert.ErrorContains(t, err, "milliseconds")
		}
	}
	assert.Zero(t, accepted, "deliveries with a timestamp in seconds accepted, of 100")
	_, err := p.Verify([]byte(dingtalkRobotBody), dingtalkSign(secret, now), now)
	assert.NoError(t, err, "the same in milliseconds")
}

// The callback test data of DingTalk's documentation (回调接口本地调试方案; the
// same vector is in the SDKs' tests, e.g. zgs225/dingtalk_crypto): token
// 123456, the aes_key and suiteKey below, and a check_create_suite_url.
var dingtalkKeys = wxKeys{token: "123456", encodingAESKey: "4g5j64qlyl3zvetqxz5jiocdr586fn2zvjpa8zls3ij", receiver: "suite4xxxxxxxxxxxxxxx"}

const dingtalkEncrypt = "1a3NBxmCFwkCJvfoQ7WhJHB+iX3qHPsc9JbaDznE1i03peOk1LaOQoRz3+nlyGNhwmwJ3vDMG+OzrHMeiZI7gTRWVdUBmfxjZ8Ej23JVYa9VrYeJ5as7XM/ZpulX8NEQis44w53h1qAgnC3PRzM7Zc/D6Ibr0rgUathB6zRHP8PYrfgnNOS9PhSBdHlegK+AGGanfwjXuQ9+0pZcy0w9lQ=="

func dingtalkEventsPreset() platform.Preset {
	return platform.DingTalkEvents.WithMsgCrypt(dingtalkKeys.token, dingtalkKeys.encodingAESKey, dingtalkKeys.receiver)
}

func TestDingTalkEventsVector(t *testing.T) {
	p := dingtalkEventsPreset()
	now := time.UnixMilli(1445827045067)
	r := wxRequest(url.Values{"signature": {"5a65ceeef9aab2d149439f82dc191dd6c5cbe2c0"}, "timestamp": {"1445827045067"}, "nonce": {"nEXhMP4r"}})
	plain, err := p.VerifyRequest(r, []byte(jsonEncrypt(dingtalkEncrypt)), now)
	require.NoError(t, err)
	assert.JSONEq(t, `{"EventType":"check_create_suite_url","Random":"LPIdSnlF","TestSuiteKey":"suite4xxxxxxxxxxxxxxx"}`, string(plain))
	_, err = p.Extract(plain, nil)
	assert.ErrorIs(t, err, platform.ErrNotAMessage)
	_, err = p.VerifyRequest(r, []byte(jsonEncrypt(dingtalkEncrypt)), now.Add(25*time.Hour))
	assert.ErrorIs(t, err, platform.ErrUnauthenticated, "stale")
	_, err = platform.DingTalkEvents.WithMsgCrypt("123456", dingtalkKeys.encodingAESKey, "dingappkey").
		VerifyRequest(r, []byte(jsonEncrypt(dingtalkEncrypt)), now)
	assert.ErrorIs(t, err, platform.ErrUnauthenticated, "a plaintext for another receiver")
}

// TestDingTalkEventsCheckURL answers the URL check with the encrypted
// "success", which the test decrypts and checks as DingTalk does.
func TestDingTalkEventsCheckURL(t *testing.T) {
	p := dingtalkEventsPreset()
	now := time.Now()
	r, body := dingtalkKeys.wxDelivery(t, []byte(`{"EventType":"check_url"}`), now, "msg_signature", jsonEncrypt)
	plain, err := p.VerifyRequest(r, body, now)
	require.NoError(t, err)
	resp, ok := p.Answer(plain)
	require.True(t, ok)
	var m map[string]string
	require.NoError(t, json.Unmarshal(resp, &m))
	assert.Equal(t, wxSign(dingtalkKeys.token, m["timeStamp"], m["nonce"], m["encrypt"]), m["msg_signature"])
	msg, receiver := dingtalkKeys.decrypt(t, m["encrypt"])
	assert.Equal(t, "success", msg)
	assert.Equal(t, dingtalkKeys.receiver, receiver)
}

func TestDingTalkEventsKeys(t *testing.T) {
	p := dingtalkEventsPreset()
	now := time.Now()
	key := func(event string) string {
		r, body := dingtalkKeys.wxDelivery(t, []byte(event), now, "msg_signature", jsonEncrypt)
		plain, err := p.VerifyRequest(r, body, now)
		require.NoError(t, err)
		k, err := p.Extract(plain, nil)
		require.NoError(t, err)
		return k.MessageID
	}
	add := `{"EventType":"user_add_org","TimeStamp":"1445827045067","UserId":["u1"],"CorpId":"ding1"}`
	first := key(add)
	assert.Regexp(t, `^user_add_org:[0-9a-f]{32}$`, first)
	assert.Equal(t, first, key(add), "a retry, encrypted anew, is the same key")
	assert.NotEqual(t, first, key(strings.Replace(add, "u1", "u2", 1)))
	for name, c := range map[string]struct {
		body string
		want error
	}{
		"no EventType": {`{"TimeStamp":"1"}`, dedupe.ErrNoMessageID},
		"encrypted":    {jsonEncrypt("abc"), dedupe.ErrNoMessageID},
		"colon":        {`{"EventType":"a:b"}`, dedupe.ErrInvalidKey},
		"twice":        {`{"EventType":"a","EventType":"b"}`, dedupe.ErrInvalidKey},
		"not JSON":     {`<xml/>`, dedupe.ErrNoMessageID},
	} {
		_, err := p.Extract([]byte(c.body), nil)
		assert.ErrorIs(t, err, c.want, name)
	}
}

func TestDingTalkEventsForgeries(t *testing.T) {
	now := time.Unix(1700000000, 0)
	msg := func(i int) []byte { return []byte(fmt.Sprintf(`{"EventType":"user_add_org","UserId":["u%d"]}`, i)) }
	kinds := cryptForgeries(dingtalkKeys, msg, now, "msg_signature", jsonEncrypt)
	kinds["body not JSON"] = func(t testing.TB, i int) (*http.Request, []byte) {
		r, body := dingtalkKeys.wxDelivery(t, msg(i), now, "msg_signature", jsonEncrypt)
		return r, append(body, '}')
	}
	refuseForgeries(t, dingtalkEventsPreset(), now, 1000, kinds)
}
