package platform

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"
)

// Discord is the preset for Discord interactions received at an Interactions
// Endpoint URL. The key is the interaction's id, a snowflake such as
// "1187654321098765432", kept exact (a float64 would lose its last digits).
//
// TTL 1 h: Discord does not redeliver an interaction; it needs an answer within
// 3 seconds and the interaction token stays valid for 15 minutes (Discord
// developer docs, Receiving and Responding to interactions). Copies come from
// proxies and gateway retries within that time, and a copy arriving later could
// not be answered anyway. Snowflakes never repeat, so the TTL only bounds
// memory.
//
// AckBudget 2 s: the initial response is due within 3 seconds (Receiving and
// Responding, "Responding to an interaction"); the last second is left for
// the network and the answer.
//
// Secret: the application's Public Key, 64 hex digits, from the developer
// portal. Discord signs each request with Ed25519 over
// "{X-Signature-Timestamp}{body}" and sends the hex signature in
// X-Signature-Ed25519; an endpoint must refuse a bad one with 401, and
// Discord tests that it does (Discord developer docs, Receiving and Responding
// to interactions, "Security and Authorization"). [Preset.Verify] also refuses
// a timestamp further than the TTL from now: a replay older than the TTL would
// no longer be caught as a duplicate.
//
// A PING (type 1), which Discord sends to check the endpoint, returns
// [ErrNotAMessage].
//
// Replay is set: the answer is the interaction's response (type 4, a
// message; 5, deferred; 7, an update; 9, a modal), which Discord shows to
// the user, so a copy is answered with the first answer.
var Discord = Preset{
	Name:        "discord",
	TTL:         time.Hour,
	AckBudget:   2 * time.Second,
	Replay:      true,
	MessageID:   discordMessageID,
	newVerifier: newDiscordVerifier,
}

var discordFields = [...]string{"type", "id"}

func discordMessageID(body []byte, _ http.Header) (string, error) {
	var v [len(discordFields)][]byte
	if err := decodeBody("discord", body, discordFields[:], v[:]); err != nil {
		return "", err
	}
	if parseID(v[0]).isNumber("1") {
		return "", fmt.Errorf("%w: discord PING", ErrNotAMessage)
	}
	return parseID(v[1]).require("discord interaction", "id")
}

type discordVerifier struct{ key ed25519.PublicKey }

func newDiscordVerifier(secret string) (verifier, error) {
	key, err := hex.DecodeString(secret)
	if err != nil || len(key) != ed25519.PublicKeySize {
		return nil, unauthenticated("discord", "secret is not a public key of 64 hex digits")
	}
	return discordVerifier{key}, nil
}

func (v discordVerifier) verify(p *Preset, body []byte, h http.Header, now time.Time) ([]byte, error) {
	return verifyEd25519(p, "discord", v.key, body, h, now)
}

// verifyEd25519 checks the Ed25519 signature, in X-Signature-Ed25519, of
// "{X-Signature-Timestamp}{body}": the scheme of Discord and QQ.
func verifyEd25519(p *Preset, name string, key ed25519.PublicKey, body []byte, h http.Header, now time.Time) ([]byte, error) {
	ts := h.Get("X-Signature-Timestamp")
	if err := checkTimestamp(name, "X-Signature-Timestamp", ts, now, replayWindow(p)); err != nil {
		return nil, err
	}
	sig, err := hex.DecodeString(h.Get("X-Signature-Ed25519"))
	if err != nil || len(sig) != ed25519.SignatureSize {
		return nil, unauthenticated(name, "request has no Ed25519 signature of 128 hex digits in X-Signature-Ed25519")
	}
	msg := make([]byte, 0, len(ts)+len(body))
	msg = append(append(msg, ts...), body...)
	if !ed25519.Verify(key, msg, sig) {
		return nil, unauthenticated(name, "X-Signature-Ed25519 does not match the body")
	}
	return body, nil
}
