package platform_test

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe/platform"
)

// A WeCom app's callback: the signature is in the URL query, so the
// delivery is authenticated with VerifyRequest, which decrypts it; the key
// is the plaintext's MsgId. The request is wechatpy's test vector
// (tests/test_crypto.py, test_decrypt_message).
func ExamplePreset_VerifyRequest() {
	wecom := platform.WeCom.WithMsgCrypt("123456", "kWxPEV2UEDyxWpmPdKC3F4dgPDmOvfKX1HGnEUDS1aR", "wx49f0ab532d5d035a")
	r, _ := http.NewRequest(http.MethodPost,
		"https://example.com/wecom?msg_signature=74d92dfeb87ba7c714f89d98870ae5eb62dff26d&timestamp=1411525903&nonce=461056294",
		strings.NewReader(wecomBody))
	plain, err := wecom.VerifyRequest(r, []byte(wecomBody), time.Unix(1411525903, 0))
	if err != nil {
		fmt.Println(err)
		return
	}
	k, err := wecom.Extract(plain, nil)
	fmt.Println(k, err)
	// Output:
	// wecom:4363689963896700987 <nil>
}

// DingTalk takes an event subscription's push as failed unless it is
// answered with the encrypted "success": Seal makes it.
func ExamplePreset_Seal() {
	events := platform.DingTalkEvents.WithMsgCrypt("123456", "4g5j64qlyl3zvetqxz5jiocdr586fn2zvjpa8zls3ij", "dingappkey")
	answer, err := events.Seal([]byte("success"), time.Now())
	fmt.Println(strings.HasPrefix(string(answer), `{"encrypt":"`), err)
	// Output:
	// true <nil>
}

// WithMsgCrypt checks the EncodingAESKey: 43 characters, the base64 of 32
// bytes.
func ExamplePreset_WithMsgCrypt() {
	wechat := platform.WeChat.WithMsgCrypt("token", "too-short", "wxappid")
	fmt.Println(wechat.CheckSecret())
	// Output:
	// dedupe: platform: unauthenticated: wechat EncodingAESKey is 9 characters, not 43
}
