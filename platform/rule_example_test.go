package platform_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gatewaykit/dedupe/platform"
)

// A gateway adds a webhook source from its configuration file: the id is a
// member of the body, the signature an HMAC-SHA256 of "{timestamp}.{body}"
// in hex, the timestamp a header, checked within 5 minutes.
func ExampleNewPreset() {
	config := []byte(`{
		"name": "billing",
		"id": "/event/id",
		"timestamp": "header:X-Billing-Timestamp",
		"tolerance": "5m",
		"ttl": "72h",
		"ack_budget": "5s",
		"signature": {"header": "X-Billing-Signature", "signed": "{timestamp}.{body}", "encoding": "hex", "prefix": "v1="}
	}`)
	var r platform.Rule
	if err := json.Unmarshal(config, &r); err != nil {
		fmt.Println(err)
		return
	}
	p, err := platform.NewPreset(r)
	if err != nil {
		fmt.Println(err)
		return
	}
	p = p.WithSecret("billing-signing-secret")

	// A delivery, signed as the sender does.
	body := []byte(`{"event":{"id":"ev_42","type":"invoice.paid"}}`)
	now := time.Unix(1764448112, 0)
	mac := hmac.New(sha256.New, []byte("billing-signing-secret"))
	mac.Write([]byte("1764448112."))
	mac.Write(body)
	h := http.Header{}
	h.Set("X-Billing-Timestamp", "1764448112")
	h.Set("X-Billing-Signature", "v1="+hex.EncodeToString(mac.Sum(nil)))

	got, err := p.Verify(body, h, now)
	k, _ := p.Extract(got, h)
	fmt.Println(k, err, p.TTL)

	_, err = p.Verify(body, h, now.Add(6*time.Minute)) // replayed later
	fmt.Println(errors.Is(err, platform.ErrUnauthenticated))

	r.Signature.Encoding = "base32"
	_, err = platform.NewPreset(r)
	fmt.Println(err)
	// Output:
	// billing:ev_42 <nil> 72h0m0s
	// true
	// dedupe: platform: invalid rule "billing": signature.encoding "base32" is unknown: hex or base64
}

// GitHub's preset is a Rule; its JSON is what a configuration file holds.
func ExampleGitHubRule() {
	b, _ := json.Marshal(platform.GitHubRule)
	fmt.Println(string(b))
	// Output:
	// {"name":"github","id":"header:X-GitHub-Delivery","unsigned_id":true,"signature":{"header":"X-Hub-Signature-256","encoding":"hex","prefix":"sha256="},"ttl":"96h0m0s","ack_budget":"5s"}
}
