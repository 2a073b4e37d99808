package platform

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// What WeChat, WeCom and DingTalk's event subscriptions need beyond the other
// presets: their signatures are in the request's URL query, which
// [Preset.Verify] does not see, and their secret is three values.

// WithMsgCrypt returns a copy of p that authenticates and decrypts
// deliveries with WXBizMsgCrypt, the scheme WeChat Official Accounts (safe
// mode), WeCom and DingTalk's HTTP event subscriptions share: token and
// encodingAESKey (43 characters) are those of the platform's callback
// settings, and receiverID is the id every plaintext must end with: the
// AppID for [WeChat], the CorpID (or the suite id of a third-party app) for
// [WeCom], the AppKey (or the CorpId, or a suiteKey) for [DingTalkEvents].
// Give it instead of [Preset.WithSecret]. A key that is not the base64 of 32
// bytes, an empty token or receiver id, or a preset of another platform make
// the copy refuse every delivery ([Preset.CheckSecret] says why).
func (p Preset) WithMsgCrypt(token, encodingAESKey, receiverID string) Preset {
	if p.newCryptVerifier == nil {
		p.verifier = refusal{unauthenticated(p.Name, "has no WXBizMsgCrypt: WithMsgCrypt is for WeChat, WeCom and DingTalkEvents")}
		return p
	}
	c, err := newMsgCrypt(p.Name, token, encodingAESKey, receiverID)
	if err != nil {
		p.verifier = refusal{err}
		return p
	}
	p.verifier = p.newCryptVerifier(c)
	return p
}

// queryVerifier is a verifier that needs the request's URL query.
type queryVerifier interface {
	verifyQuery(p *Preset, body []byte, h http.Header, q url.Values, now time.Time) ([]byte, error)
}

// sealer is a verifier that encrypts replies.
type sealer interface {
	seal(msg []byte, now time.Time) ([]byte, error)
}

// VerifyRequest is [Preset.Verify] for a delivery received as r, whose body
// has been read into body: it passes r's URL query too, which [WeChat],
// [WeCom] and [DingTalkEvents] sign (signature, msg_signature, timestamp,
// nonce) and where WeChat and WeCom send their URL check (echostr), and
// where a legacy Matrix homeserver sends access_token, which must then be
// the hs_token too (see [Matrix]). For any other preset it is
// Verify(body, r.Header, now). Verify alone refuses the
// deliveries of those three presets, since it cannot see their signature;
// a server without net/http builds r with the query and headers it received.
func (p Preset) VerifyRequest(r *http.Request, body []byte, now time.Time) ([]byte, error) {
	if r == nil {
		if p.verifier == nil {
			return body, nil
		}
		return nil, unauthenticated(p.Name, "request is nil")
	}
	qv, ok := p.verifier.(queryVerifier)
	if !ok {
		return p.Verify(body, r.Header, now)
	}
	var q url.Values
	if r.URL != nil {
		var err error
		if q, err = url.ParseQuery(r.URL.RawQuery); err != nil {
			return nil, unauthenticated(p.Name, "URL query is malformed")
		}
	}
	return qv.verifyQuery(&p, body, r.Header, q, now)
}

// Seal encrypts msg, the answer to a delivery, as the platform expects an
// answer from an endpoint in safe mode: for [WeChat] and [WeCom] the XML of
// Encrypt, MsgSignature, TimeStamp and Nonce (a passive reply), for
// [DingTalkEvents] the JSON of msg_signature, timeStamp, nonce and encrypt
// (DingTalk asks every event to be answered with Seal([]byte("success"))).
// now is the TimeStamp signed. It fails for a preset without
// [Preset.WithMsgCrypt].
func (p Preset) Seal(msg []byte, now time.Time) ([]byte, error) {
	s, ok := p.verifier.(sealer)
	if !ok {
		return nil, fmt.Errorf("%w: %s has no WXBizMsgCrypt to seal a reply with (Preset.WithMsgCrypt)", ErrUnauthenticated, p.Name)
	}
	return s.seal(msg, now)
}

// needsQuery is the error of Verify for a preset whose signature is in the
// URL query.
func needsQuery(name string) error {
	return unauthenticated(name, "signature is in the URL query: verify with Preset.VerifyRequest")
}

// wxParam returns the one value of the first of names that q holds. A
// parameter given twice is refused: which copy was signed would be a guess.
func wxParam(name string, q url.Values, names ...string) (string, error) {
	for _, n := range names {
		switch v := q[n]; len(v) {
		case 0:
			continue
		case 1:
			return v[0], nil
		default:
			return "", unauthenticated(name, "query parameter "+n+" appears more than once")
		}
	}
	return "", nil
}

// signedQuery is what the three platforms put in the query: a signature, a
// timestamp and a nonce.
type signedQuery struct{ sig, ts, nonce string }

// wxReadQuery reads a signedQuery: sigNames and tsNames are the parameter
// names the platform uses, in order of preference.
func wxReadQuery(name string, q url.Values, sigNames, tsNames []string) (signedQuery, error) {
	var s signedQuery
	var err [3]error
	s.sig, err[0] = wxParam(name, q, sigNames...)
	s.ts, err[1] = wxParam(name, q, tsNames...)
	s.nonce, err[2] = wxParam(name, q, "nonce")
	for _, e := range err {
		if e != nil {
			return s, e
		}
	}
	return s, nil
}

// check checks the timestamp of s against now and the signature of parts,
// which hold the token, the timestamp and the nonce (and the ciphertext).
func (s signedQuery) check(p *Preset, param string, now time.Time, parts ...string) error {
	if err := checkTimestamp(p.Name, "timestamp", s.ts, now, replayWindow(p)); err != nil {
		return err
	}
	return checkWXSign(p.Name, param, s.sig, parts...)
}

// echoPrefix starts the body that VerifyRequest returns for a URL check
// (echostr): the echostr follows. Deliveries are XML or JSON, which never
// start with it, so [Preset.Answer] answers only what VerifyRequest built.
const echoPrefix = "echostr\n"

// echoBody returns the body of an authenticated URL check whose answer is
// echo, if echo is a plain identifier (letters, digits, '-' and '_', at
// most maxChallenge): WeChat's and WeCom's are digits.
func echoBody(name, echo string) ([]byte, error) {
	ok := echo != "" && len(echo) <= maxChallenge
	for i := 0; ok && i < len(echo); i++ {
		b := echo[i]
		ok = 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '-' || b == '_'
	}
	if !ok {
		return nil, unauthenticated(name, "echostr is not a plain identifier")
	}
	return []byte(echoPrefix + echo), nil
}

// answerEcho answers what echoBody built.
func answerEcho(body []byte) ([]byte, bool) {
	echo, ok := strings.CutPrefix(string(body), echoPrefix)
	if !ok {
		return nil, false
	}
	return []byte(echo), true
}

// sealXML is the passive reply of WeChat and WeCom in safe mode.
func sealXML(c *msgCrypt, msg []byte, now time.Time) ([]byte, error) {
	enc, err := c.encrypt(msg, rand.Reader)
	if err != nil {
		return nil, err
	}
	ts, nonce := strconv.FormatInt(now.Unix(), 10), randomNonce()
	return fmt.Appendf(nil, "<xml><Encrypt><![CDATA[%s]]></Encrypt><MsgSignature><![CDATA[%x]]></MsgSignature>"+
		"<TimeStamp>%s</TimeStamp><Nonce><![CDATA[%s]]></Nonce></xml>",
		enc, wxSign(c.token, ts, nonce, enc), ts, nonce), nil
}

// sealJSON is the answer DingTalk expects of an event subscription.
func sealJSON(c *msgCrypt, msg []byte, now time.Time) ([]byte, error) {
	enc, err := c.encrypt(msg, rand.Reader)
	if err != nil {
		return nil, err
	}
	ts, nonce := strconv.FormatInt(now.UnixMilli(), 10), randomNonce()
	return json.Marshal(map[string]string{
		"msg_signature": fmt.Sprintf("%x", wxSign(c.token, ts, nonce, enc)),
		"timeStamp":     ts, "nonce": nonce, "encrypt": enc,
	})
}

// randomNonce returns 8 random letters and digits.
func randomNonce() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:])
}
