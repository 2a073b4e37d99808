package platformtest_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// wechatText is the text message of WeChat's "Receiving standard messages"
// (https://developers.weixin.qq.com/doc/offiaccount/Message_Management/Receiving_standard_messages.html).
const wechatText = `<xml><ToUserName><![CDATA[toUser]]></ToUserName><FromUserName><![CDATA[fromUser]]></FromUserName><CreateTime>1348831860</CreateTime><MsgType><![CDATA[text]]></MsgType><Content><![CDATA[this is a test]]></Content><MsgId>1234567890123456</MsgId></xml>`

// TestSignQuery delivers a message encrypted by the Signers of the three
// WXBizMsgCrypt platforms to their presets: the Signer's own preset accepts
// and keys it, another seed's refuses it, and so does the preset once the
// timestamp is older than the TTL.
func TestSignQuery(t *testing.T) {
	now := time.Unix(1764763200, 0)
	for _, c := range []struct {
		preset platform.Preset
		msg    string
		key    string
	}{
		{platform.WeChat, wechatText, "wechat:1234567890123456"},
		{platform.WeCom, wechatText, "wecom:1234567890123456"},
		{platform.DingTalkEvents, `{"EventType":"user_add_org","TimeStamp":"1764763200000","UserId":["user1"],"CorpId":"dingcorp"}`, ""},
	} {
		t.Run(c.preset.Name, func(t *testing.T) {
			s := platformtest.NewSigner(c.preset.Name, "seed-"+c.preset.Name)
			p := s.Preset(c.preset)
			require.NoError(t, p.CheckSecret())
			q, body := s.SignQuery([]byte(c.msg), now)
			q2, body2 := s.SignQuery([]byte(c.msg), now)
			assert.Equal(t, q, q2, "deterministic")
			assert.Equal(t, body, body2, "deterministic")
			r := &http.Request{Method: http.MethodPost, URL: &url.URL{RawQuery: q.Encode()}, Header: http.Header{}}
			plain, err := p.VerifyRequest(r, body, now)
			require.NoError(t, err)
			assert.Equal(t, c.msg, string(plain))
			k, err := p.Extract(plain, nil)
			require.NoError(t, err)
			if c.key != "" {
				assert.Equal(t, c.key, k.String())
			}
			_, err = platformtest.NewSigner(c.preset.Name, "other").Preset(c.preset).VerifyRequest(r, body, now)
			assert.ErrorIs(t, err, platform.ErrUnauthenticated, "another seed")
			_, err = p.VerifyRequest(r, body, now.Add(c.preset.TTL+time.Minute))
			assert.ErrorIs(t, err, platform.ErrUnauthenticated, "stale")
		})
	}
}

// TestSignDingTalk signs a DingTalk robot's headers.
func TestSignDingTalk(t *testing.T) {
	now := time.Unix(1764763200, 0)
	s := platformtest.NewSigner("dingtalk", "SECdemo")
	body := []byte(`{"msgId":"msg0xxxxx","msgtype":"text","text":{"content":"hi"}}`)
	r := &http.Request{Method: http.MethodPost, URL: &url.URL{}, Header: s.Sign(body, now)}
	_, err := s.Preset(platform.DingTalk).VerifyRequest(r, body, now)
	require.NoError(t, err)
	_, err = platform.DingTalk.WithSecret("SECother").VerifyRequest(r, body, now)
	assert.ErrorIs(t, err, platform.ErrUnauthenticated)
}
