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
