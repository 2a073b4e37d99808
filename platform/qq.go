package platform

import (
	"fmt"
	"net/http"

	"github.com/gatewaykit/dedupe"
)

// QQ is the preset for the QQ official bot platform's webhook (HTTP callback).
// The key is the event id, the payload's top-level id, on an op 0 dispatch
// such as GROUP_AT_MESSAGE_CREATE or C2C_MESSAGE_CREATE. Each event has its own
// id, so a MESSAGE_DELETE is not taken for a copy of the message it deletes.
//
// TTL 24 h, the library's [dedupe.DefaultTTL]: the QQ bot documentation asks for an
// answer (op 12) to each callback but gives no redelivery schedule to size a
// shorter TTL from, and the NekoBot gateway keeps QQ keys for 24 h.
//
// The callback URL validation (op 13) and any op other than 0 return
// [ErrNotAMessage]. Verify the request's Ed25519 signature before trusting it;
// this preset does not.
var QQ = Preset{
	Name:      "qq",
	TTL:       dedupe.DefaultTTL,
	MessageID: qqMessageID,
}

type qqPayload struct {
	Op jsonID `json:"op"`
	ID jsonID `json:"id"`
}

func qqMessageID(body []byte, _ http.Header) (string, error) {
	var p qqPayload
	if err := decodeBody("qq", body, &p); err != nil {
		return "", err
	}
	if p.Op.kind != kindAbsent && !(p.Op.kind == kindNumber && p.Op.text == "0") {
		return "", fmt.Errorf("%w: qq op %s", ErrNotAMessage, p.Op.text)
	}
	return p.ID.require("qq event", "id")
}
