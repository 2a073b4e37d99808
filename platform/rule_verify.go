package platform

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe"
)

// A ruleSpec is a Rule checked by compileRule, ready to verify and key
// deliveries.
type ruleSpec struct {
	name                 string
	ttl, ack, tolerance  time.Duration
	idHeader             string  // the id's header, or ""
	idPointer            pointer // the id's place in the body, when idHeader is ""
	tsHeader             string  // the timestamp's header, or ""
	tsEntry              string  // the prefix of the timestamp's entry in the signature header, or ""
	header, prefix, sep  string
	ed25519, base64      bool
	secretEnc, secretPre string
	unsignedID           bool   // Rule.UnsignedID
	parts                []part // the signed content
}

// A part of a signed content's template: literal text, or a placeholder.
type part struct {
	kind byte // 'l' literal, 'b' body, 't' timestamp, 'i' id
	text string
}

// compileRule checks r and returns its spec.
func compileRule(r Rule) (*ruleSpec, error) {
	s := &ruleSpec{name: r.Name, ttl: r.TTL, ack: r.AckBudget, tolerance: r.Tolerance, unsignedID: r.UnsignedID}
	if err := (dedupe.Key{Channel: r.Name, MessageID: "1"}).Validate(); err != nil {
		return nil, ruleError(r.Name, "name", "is not a key channel: %v", err)
	}
	if err := s.compileID(r.ID); err != nil {
		return nil, err
	}
	if err := s.compileSignature(r.Signature); err != nil {
		return nil, err
	}
	if err := s.compileTimestamp(r.Timestamp); err != nil {
		return nil, err
	}
	if err := s.compileTemplate(r.Signature.Signed); err != nil {
		return nil, err
	}
	return s, s.compileDurations(r.Timestamp != "")
}

func (s *ruleSpec) compileID(id string) error {
	switch {
	case id == "":
		return ruleError(s.name, "id", `is empty: write "header:" and a header's name, or a JSON Pointer such as "/id"`)
	case strings.HasPrefix(id, "header:"):
		if s.idHeader = headerSource(id); !validHeaderName(s.idHeader) {
			return ruleError(s.name, "id", "%q does not name a header", id)
		}
		s.idHeader = http.CanonicalHeaderKey(s.idHeader)
		return nil
	}
	p, err := parsePointer(id)
	if err != nil {
		return ruleError(s.name, "id", "%q: %v", id, err)
	}
	s.idPointer = p
	return nil
}

func (s *ruleSpec) compileSignature(sig SignatureRule) error {
	if !validHeaderName(sig.Header) {
		return ruleError(s.name, "signature.header", "%q is not a header name", sig.Header)
	}
	s.header, s.prefix, s.sep = http.CanonicalHeaderKey(sig.Header), sig.Prefix, sig.Separator
	switch sig.Algorithm {
	case "", "hmac-sha256":
	case "ed25519":
		s.ed25519 = true
	default:
		return ruleError(s.name, "signature.algorithm", "%q is unknown: hmac-sha256 or ed25519", sig.Algorithm)
	}
	switch sig.Encoding {
	case "hex":
	case "base64":
		s.base64 = true
	case "":
		return ruleError(s.name, "signature.encoding", "is missing: hex or base64")
	default:
		return ruleError(s.name, "signature.encoding", "%q is unknown: hex or base64", sig.Encoding)
	}
	switch {
	case sig.Separator != "" && sig.Separator != " " && sig.Separator != ",":
		return ruleError(s.name, "signature.separator", `%q is neither " " nor ","`, sig.Separator)
	case sig.Separator != "" && strings.Contains(sig.Prefix, sig.Separator):
		return ruleError(s.name, "signature.prefix", "%q holds the separator %q", sig.Prefix, sig.Separator)
	case strings.ContainsAny(sig.Prefix, " \t\r\n"):
		return ruleError(s.name, "signature.prefix", "%q holds a space", sig.Prefix)
	}
	s.secretEnc, s.secretPre = sig.SecretEncoding, sig.SecretPrefix
	switch sig.SecretEncoding {
	case "", "text":
		if s.ed25519 {
			return ruleError(s.name, "signature.secret_encoding", "must be base64 or hex for an ed25519 public key")
		}
	case "base64", "hex":
	default:
		return ruleError(s.name, "signature.secret_encoding", "%q is unknown: text, base64 or hex", sig.SecretEncoding)
	}
	return nil
}

func (s *ruleSpec) compileTimestamp(ts string) error {
	switch {
	case ts == "":
	case strings.HasPrefix(ts, "header:"):
		if s.tsHeader = headerSource(ts); !validHeaderName(s.tsHeader) {
			return ruleError(s.name, "timestamp", "%q does not name a header", ts)
		}
	case strings.HasPrefix(ts, "signature:"):
		s.tsEntry = strings.TrimPrefix(ts, "signature:")
		switch {
		case s.sep == "":
			return ruleError(s.name, "timestamp", "%q needs a signature.separator between the entries", ts)
		case s.tsEntry == "" || strings.Contains(s.tsEntry, s.sep) || strings.ContainsAny(s.tsEntry, " \t"):
			return ruleError(s.name, "timestamp", "%q does not name an entry's prefix, such as signature:t=", ts)
		case strings.HasPrefix(s.tsEntry, s.prefix) || strings.HasPrefix(s.prefix, s.tsEntry):
			return ruleError(s.name, "timestamp", "%q and the signatures' prefix %q overlap", ts, s.prefix)
		}
	default:
		return ruleError(s.name, "timestamp", `%q is neither "header:Name" nor "signature:prefix"`, ts)
	}
	return nil
}

// compileTemplate parses the signed content's template.
func (s *ruleSpec) compileTemplate(t string) error {
	if t == "" {
		t = "{body}"
	}
	seen := map[byte]bool{}
	for rest := t; rest != ""; {
		i := strings.IndexAny(rest, "{}")
		if i < 0 {
			s.parts = append(s.parts, part{'l', rest})
			break
		}
		if i > 0 {
			s.parts = append(s.parts, part{'l', rest[:i]})
		}
		end := strings.IndexByte(rest[i:], '}')
		if rest[i] == '}' || end < 0 {
			return ruleError(s.name, "signature.signed", "%q has a brace outside a placeholder", t)
		}
		name := rest[i+1 : i+end]
		kind := map[string]byte{"body": 'b', "timestamp": 't', "id": 'i'}[name]
		switch {
		case kind == 0:
			return ruleError(s.name, "signature.signed", "%q: unknown placeholder {%s}: {body}, {timestamp} or {id}", t, name)
		case seen[kind]:
			return ruleError(s.name, "signature.signed", "%q has {%s} twice", t, name)
		case kind == 't' && s.tsHeader == "" && s.tsEntry == "":
			return ruleError(s.name, "signature.signed", "%q signs {timestamp}, but the rule has no timestamp", t)
		case kind == 'i' && s.idHeader == "":
			return ruleError(s.name, "signature.signed", "%q signs {id}, which must then be a header", t)
		}
		seen[kind] = true
		s.parts = append(s.parts, part{kind: kind})
		rest = rest[i+end+1:]
	}
	switch {
	case !seen['b']:
		return ruleError(s.name, "signature.signed", "%q does not sign {body}", t)
	case (s.tsHeader != "" || s.tsEntry != "") && !seen['t']:
		return ruleError(s.name, "signature.signed", "%q does not sign {timestamp}: an unsigned timestamp proves nothing", t)
	case s.idHeader != "" && !seen['i'] && !s.unsignedID:
		return ruleError(s.name, "signature.signed", "%q does not sign {id}, the header %s: a captured delivery would run again under any new id (sign {id}, or set unsigned_id for a sender that signs none)", t, s.idHeader)
	case s.unsignedID && (s.idHeader == "" || seen['i']):
		return ruleError(s.name, "unsigned_id", "is set, but the id is signed")
	}
	return nil
}

func (s *ruleSpec) compileDurations(timestamp bool) error {
	switch {
	case s.ttl < 0:
		return ruleError(s.name, "ttl", "%s is negative", s.ttl)
	case s.ack < 0:
		return ruleError(s.name, "ack_budget", "%s is negative", s.ack)
	case s.tolerance < 0:
		return ruleError(s.name, "tolerance", "%s is negative", s.tolerance)
	case s.tolerance != 0 && !timestamp:
		return ruleError(s.name, "tolerance", "is set, but the rule has no timestamp")
	}
	if s.ttl == 0 {
		s.ttl = dedupe.DefaultTTL
	}
	if s.tolerance == 0 {
		s.tolerance = s.ttl
	}
	if s.tolerance > s.ttl {
		return ruleError(s.name, "tolerance", "%s exceeds the TTL %s: a replay older than the TTL would pass", s.tolerance, s.ttl)
	}
	return nil
}

// preset returns the Preset of s.
func (s *ruleSpec) preset() Preset {
	return Preset{
		Name:        s.name,
		TTL:         s.ttl,
		AckBudget:   s.ack,
		MessageID:   ruleMessageID(s.name, s.idHeader, s.idPointer),
		newVerifier: s.newVerifier,
	}
}

// ruleVerifier checks the deliveries of a ruleSpec with one secret.
type ruleVerifier struct {
	s   *ruleSpec
	key []byte // the HMAC key, or the Ed25519 public key
}

func (s *ruleSpec) newVerifier(secret string) (verifier, error) {
	secret, _ = strings.CutPrefix(secret, s.secretPre)
	var (
		key = []byte(secret)
		err error
	)
	switch s.secretEnc {
	case "base64":
		key, err = base64.StdEncoding.DecodeString(secret)
	case "hex":
		key, err = hex.DecodeString(secret)
	}
	switch {
	case err != nil:
		return nil, unauthenticated(s.name, "secret is not "+s.secretEnc)
	case len(key) == 0:
		return nil, unauthenticated(s.name, "secret is empty")
	case s.ed25519 && len(key) != ed25519.PublicKeySize:
		return nil, unauthenticated(s.name, fmt.Sprintf("secret is not an Ed25519 public key of %d bytes", ed25519.PublicKeySize))
	case !s.ed25519 && len(key) < MinSecretSize:
		return nil, unauthenticated(s.name, fmt.Sprintf("secret is %d bytes, fewer than the %d of an HMAC key that cannot be guessed (MinSecretSize)", len(key), MinSecretSize))
	}
	return ruleVerifier{s, key}, nil
}

func (v ruleVerifier) verify(_ *Preset, body []byte, h http.Header, now time.Time) ([]byte, error) {
	s := v.s
	sigs, ts, err := s.entries(h.Get(s.header))
	if err != nil {
		return nil, err
	}
	if s.tsHeader != "" {
		ts = h.Get(s.tsHeader)
	}
	if s.tsHeader != "" || s.tsEntry != "" {
		if err := checkTimestamp(s.name, s.timestampName(), ts, now, s.tolerance); err != nil {
			return nil, err
		}
	}
	var id string
	if s.idHeader != "" {
		if id = h.Get(s.idHeader); id == "" && s.signsID() {
			return nil, unauthenticated(s.name, "request has no "+s.idHeader)
		}
	}
	if !v.match(sigs, body, ts, id) {
		return nil, unauthenticated(s.name, s.header+" does not match the body")
	}
	return body, nil
}

// timestampName names the signed timestamp in errors.
func (s *ruleSpec) timestampName() string {
	if s.tsHeader != "" {
		return s.tsHeader
	}
	return s.tsEntry + " in " + s.header
}

func (s *ruleSpec) signsID() bool {
	for _, p := range s.parts {
		if p.kind == 'i' {
			return true
		}
	}
	return false
}

// entries splits the signature header v: the signatures with the prefix
// (without it), and the timestamp's entry (without its prefix) when the
// timestamp is one.
func (s *ruleSpec) entries(v string) (sigs []string, ts string, err error) {
	if v == "" {
		return nil, "", unauthenticated(s.name, "request has no "+s.header)
	}
	all := []string{v}
	if s.sep != "" {
		all = strings.Split(v, s.sep)
	}
	tsSeen := false
	for _, e := range all {
		e = strings.TrimSpace(e)
		if s.tsEntry != "" && strings.HasPrefix(e, s.tsEntry) {
			if tsSeen {
				return nil, "", unauthenticated(s.name, s.header+" has two "+s.tsEntry+" entries")
			}
			ts, tsSeen = e[len(s.tsEntry):], true
		} else if sig, ok := strings.CutPrefix(e, s.prefix); ok && e != "" {
			if len(sigs) == MaxSignatures {
				return nil, "", unauthenticated(s.name, fmt.Sprintf("%s holds more than %d signatures", s.header, MaxSignatures))
			}
			sigs = append(sigs, sig)
		}
	}
	if len(sigs) == 0 {
		return nil, "", unauthenticated(s.name, fmt.Sprintf("%s has no signature with the prefix %q", s.header, s.prefix))
	}
	return sigs, ts, nil
}

// match reports whether one of sigs signs the content of body, ts and id.
func (v ruleVerifier) match(sigs []string, body []byte, ts, id string) bool {
	s := v.s
	msg := s.content(make([]byte, 0, len(body)+len(ts)+len(id)+16), body, ts, id)
	if s.ed25519 {
		for _, sig := range sigs {
			if b, ok := s.decode(sig, ed25519.SignatureSize); ok && ed25519.Verify(v.key, msg, b) {
				return true
			}
		}
		return false
	}
	mac := hmac.New(sha256.New, v.key)
	mac.Write(msg)
	want := mac.Sum(nil)
	ok := false
	for _, sig := range sigs { // every one, in constant time
		if s.base64 {
			b, good := s.decode(sig, sha256.Size)
			ok = subtle.ConstantTimeCompare(b, want) == 1 && good || ok
		} else {
			ok = equalHex(sig, want) || ok
		}
	}
	return ok
}

// decode decodes a signature of n bytes.
func (s *ruleSpec) decode(sig string, n int) ([]byte, bool) {
	var (
		b   []byte
		err error
	)
	if s.base64 {
		if base64.StdEncoding.DecodedLen(len(sig)) > n+2 {
			return nil, false
		}
		b, err = base64.StdEncoding.DecodeString(sig)
	} else {
		if len(sig) != 2*n {
			return nil, false
		}
		b, err = hex.DecodeString(sig)
	}
	return b, err == nil && len(b) == n
}

// content appends the signed content to dst.
func (s *ruleSpec) content(dst, body []byte, ts, id string) []byte {
	for _, p := range s.parts {
		switch p.kind {
		case 'l':
			dst = append(dst, p.text...)
		case 'b':
			dst = append(dst, body...)
		case 't':
			dst = append(dst, ts...)
		case 'i':
			dst = append(dst, id...)
		}
	}
	return dst
}
