package platform_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe/platform"
)

// The WeCom vectors of wechatpy's tests (wechatpy/wechatpy,
// tests/test_crypto.py: test_check_signature_should_ok, test_decrypt_message).
var wecomKeys = wxKeys{token: "123456", encodingAESKey: "kWxPEV2UEDyxWpmPdKC3F4dgPDmOvfKX1HGnEUDS1aR", receiver: "wx49f0ab532d5d035a"}

const wecomBody = "<xml><ToUserName><![CDATA[wx49f0ab532d5d035a]]></ToUserName>\n<Encrypt><![CDATA[RgqEoJj5A4EMYlLvWO1F86ioRjZfaex/gePD0gOXTxpsq5Yj4GNglrBb8I2BAJVODGajiFnXBu7mCPatfjsu6IHCrsTyeDXzF6Bv283dGymzxh6ydJRvZsryDyZbLTE7rhnus50qGPMfp2wASFlzEgMW9z1ef/RD8XzaFYgm7iTdaXpXaG4+BiYyolBug/gYNx410cvkKR2/nPwBiT+P4hIiOAQqGp/TywZBtDh1yCF2KOd0gpiMZ5jSw3e29mTvmUHzkVQiMS6td7vXUaWOMZnYZlF3So2SjHnwh4jYFxdgpkHHqIrH/54SNdshoQgWYEvccTKe7FS709/5t6NMxuGhcUGAPOQipvWTT4dShyqio7mlsl5noTrb++x6En749zCpQVhDpbV6GDnTbcX2e8K9QaNWHp91eBdCRxthuL0=]]></Encrypt>\n<AgentID><![CDATA[1]]></AgentID>\n</xml>"

func wecomPreset() platform.Preset {
	return platform.WeCom.WithMsgCrypt(wecomKeys.token, wecomKeys.encodingAESKey, wecomKeys.receiver)
}

func TestWeComVectors(t *testing.T) {
	p := wecomPreset()
	now := time.Unix(1411525903, 0)
	r := wxRequest(url.Values{"msg_signature": {"74d92dfeb87ba7c714f89d98870ae5eb62dff26d"}, "timestamp": {"1411525903"}, "nonce": {"461056294"}})
	for range 2 {
		plain, err := p.VerifyRequest(r, []byte(wecomBody), now)
		require.NoError(t, err)
		assert.Contains(t, string(plain), "<FromUserName><![CDATA[messense]]></FromUserName>")
		k, err := p.Extract(plain, nil)
		require.NoError(t, err)
		assert.Equal(t, "wecom:4363689963896700987", k.String())
	}
	_, err := p.VerifyRequest(r, []byte(wecomBody), now.Add(11*time.Minute))
	assert.ErrorIs(t, err, platform.ErrUnauthenticated, "stale")

	// The URL check: echostr encrypted, answered with its plaintext.
	check := url.Values{"msg_signature": {"dd6b9c95b495b3f7e2901bfbc76c664930ffdb96"}, "timestamp": {"1411443780"},
		"nonce": {"437374425"}, "echostr": {"4ByGGj+sVCYcvGeQYhaKIk1o0pQRNbRjxybjTGblXrBaXlTXeOo1+bXFXDQQb1o6co6Yh9Bv41n7hOchLF6p+Q=="}}
	echo, err := p.VerifyRequest(wxRequest(check), nil, time.Unix(1411443780, 0))
	require.NoError(t, err)
	resp, ok := p.Answer(echo)
	require.True(t, ok)
	assert.Regexp(t, `^\d+$`, string(resp))
	check.Set("nonce", "437374424") // test_check_signature_should_fail
	_, err = p.VerifyRequest(wxRequest(check), nil, time.Unix(1411443780, 0))
	assert.ErrorIs(t, err, platform.ErrUnauthenticated)
}

// wecomChange is a contact change event of WeCom's documentation (通讯录回调通知,
// 更新成员事件): several come from "sys" in one second.
const wecomChange = `<xml><ToUserName><![CDATA[toUser]]></ToUserName><FromUserName><![CDATA[sys]]></FromUserName><CreateTime>1403610513</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[change_contact]]></Event><ChangeType>update_user</ChangeType><UserID><![CDATA[zhangsan]]></UserID></xml>`

func TestWeComEvents(t *testing.T) {
	p := wecomPreset()
	now := time.Unix(1403610513, 0)
	keys := map[string]bool{}
	for _, user := range []string{"zhangsan", "lisi", "zhangsan"} {
		r, body := wecomKeys.wxDelivery(t, []byte(strings.Replace(wecomChange, "zhangsan", user, 1)), now, "msg_signature", xmlEncrypt)
		plain, err := p.VerifyRequest(r, body, now)
		require.NoError(t, err)
		k, err := p.Extract(plain, nil)
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(k.MessageID, "event:sys:1403610513:change_contact:"), k.MessageID)
		keys[k.MessageID] = true
	}
	assert.Len(t, keys, 2, "two users' changes are two keys; the redelivery of one is its key")
}

func TestWeComForgeries(t *testing.T) {
	now := time.Unix(1700000000, 0)
	p := wecomPreset()
	msg := func(i int) []byte {
		return []byte(strings.Replace(wecomChange, "zhangsan", fmt.Sprint("u", i), 1))
	}
	kinds := cryptForgeries(wecomKeys, msg, now, "msg_signature", xmlEncrypt)
	kinds["echostr of another corp"] = func(t testing.TB, i int) (*http.Request, []byte) {
		echo := wecomKeys.encrypt(t, []byte(fmt.Sprint(i)), "wwother")
		ts := fmt.Sprint(now.Unix())
		return wxRequest(url.Values{"msg_signature": {wxSign(wecomKeys.token, ts, "n", echo)}, "timestamp": {ts}, "nonce": {"n"}, "echostr": {echo}}), nil
	}
	kinds["echostr wrongly signed"] = func(t testing.TB, i int) (*http.Request, []byte) {
		echo := wecomKeys.encrypt(t, []byte(fmt.Sprint(i)), wecomKeys.receiver)
		ts := fmt.Sprint(now.Unix())
		return wxRequest(url.Values{"msg_signature": {wxSign("x", ts, "n", echo)}, "timestamp": {ts}, "nonce": {"n"}, "echostr": {echo}}), nil
	}
	refuseForgeries(t, p, now, 1000, kinds)
}
