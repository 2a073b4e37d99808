package platform

import (
	"errors"

	"github.com/gatewaykit/dedupe"
)

// ErrNotAMessage reports a delivery that is part of a platform's protocol rather
// than a message: a URL verification challenge (Slack, Feishu/Lark, QQ op 13), a
// Discord PING, a OneBot heartbeat, a Slack rate-limit notice. It needs no
// deduplication and must reach the handler, which answers it.
//
// ErrNotAMessage matches [dedupe.ErrNoMessageID] too, so code that passes
// deliveries without a message id through to the handler treats these the same
// way; test for ErrNotAMessage first when the two must be told apart.
var ErrNotAMessage error = notAMessageError{}

type notAMessageError struct{}

// Error returns the text of [ErrNotAMessage].
func (notAMessageError) Error() string { return "dedupe: platform: not a message" }

// Is makes [ErrNotAMessage] match [dedupe.ErrNoMessageID].
func (notAMessageError) Is(target error) bool { return target == dedupe.ErrNoMessageID }

// ErrUnauthenticated reports a delivery that failed its preset's
// authentication ([Preset.Verify]): a missing or wrong signature or secret
// token, a signed timestamp too far from now, or a body that does not
// decrypt. It also reports every delivery to a preset whose secret cannot be
// the platform's (see [Preset.CheckSecret]). Nothing derived from such a
// delivery may be written to a store.
var ErrUnauthenticated = errors.New("dedupe: platform: unauthenticated")

// ErrNoSecret is returned by [Preset.CheckSecret] for a preset that was not
// given a secret with [Preset.WithSecret]: its deliveries are not
// authenticated.
var ErrNoSecret = errors.New("dedupe: platform: no secret")
