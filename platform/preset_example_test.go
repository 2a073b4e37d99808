package platform_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// A Feishu app with an Encrypt Key sends events encrypted and signed, but
// its request URL check encrypted and unsigned: give the preset the
// Verification Token too, and it accepts the check only with that token,
// answering it itself.
func ExamplePreset_WithVerificationToken() {
	encryptKey, verificationToken := "encrypt-key", "xxxxxx" // from the app's 加密策略 page
	feishu := platform.Feishu.WithSecret(encryptKey).WithVerificationToken(verificationToken)

	s := platformtest.NewSigner("feishu", encryptKey) // encrypts as Feishu does
	check := s.Encrypt([]byte(`{"challenge":"ajls384kdjx98XX","token":"xxxxxx","type":"url_verification"}`))
	now := time.Now()
	body, err := feishu.Verify(check, nil, now) // no X-Lark-Signature
	fmt.Println(err)
	answer, ok := feishu.Answer(body)
	fmt.Println(string(answer), ok)

	forged := s.Encrypt([]byte(`{"challenge":"x","token":"guess","type":"url_verification"}`))
	_, err = feishu.Verify(forged, nil, now)
	fmt.Println(errors.Is(err, platform.ErrUnauthenticated))
	// Output:
	// <nil>
	// {"challenge":"ajls384kdjx98XX"} true
	// true
}

// Two OneBot bots post to one endpoint, each signing with its own secret: a
// body captured from one and replayed under the other's X-Self-ID fails the
// other's secret, so it cannot take that bot's message ids.
func ExamplePreset_WithBotSecrets() {
	a := platformtest.NewSigner("onebot", "secret-of-bot-111") // signs as go-cqhttp does
	b := platformtest.NewSigner("onebot", "secret-of-bot-222")
	bots := platform.OneBot.WithBotSecrets(map[string]string{"111": a.Secret(), "222": b.Secret()})

	body := []byte(`{"post_type":"message","message_type":"group","message_id":7,"raw_message":"hi"}`)
	h := a.Sign(body, time.Now())
	h.Set("X-Self-ID", "111")
	got, err := bots.Verify(body, h, time.Now())
	k, _ := bots.Extract(got, h)
	fmt.Println(k, err)

	h.Set("X-Self-ID", "222") // the same body, replayed as the other bot
	_, err = bots.Verify(body, h, time.Now())
	fmt.Println(errors.Is(err, platform.ErrUnauthenticated))
	// Output:
	// onebot:111:7 <nil>
	// true
}
