package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// The demo plays every platform against the gateway: for each, a real
// delivery and its redeliveries, signed with the platform's secret by
// platformtest's signer (or, for the rule-built source, as Shopify signs),
// and a forgery signed with a guessed secret.

// A delivery is one HTTP request as a platform sends it.
type delivery struct {
	method, target string // target: the path and query
	header         http.Header
	body           []byte
}

// A play is one platform's part in the demo.
type play struct {
	source     string
	want       int        // messages (events) in the real delivery
	deliveries []delivery // the real delivery, then its copies
	concurrent int        // how many of the first deliveries go at once
	forged     delivery
}

// A result is what the gateway made of one play.
type result struct {
	source          string
	want, delivered int
	processed       int64 // the handler's count
	forgedStatus    int
	unauthenticated uint64 // the endpoint's Stats().Unauthenticated
}

func (r result) String() string {
	return fmt.Sprintf("%-16s %d message(s), %d deliveries: processed %d; forgery answered %d",
		r.source, r.want, r.delivered, r.processed, r.forgedStatus)
}

// signers returns the signer of each source but the rule-built one,
// seeded with the source's value from the flags (its token, for the
// WXBizMsgCrypt platforms).
func signers(seeds map[string]string) map[string]*platformtest.Signer {
	s := make(map[string]*platformtest.Signer, len(seeds))
	for name, seed := range seeds {
		if msgCryptPlatforms[name] {
			seed, _, _ = strings.Cut(seed, ",")
		}
		if name != "rule" {
			s[name] = platformtest.NewSigner(name, seed)
		}
	}
	return s
}

// demoSecrets returns the secrets that match the signers: the seed itself
// for most platforms, what the signer derives from it for Discord, Standard
// Webhooks and the WXBizMsgCrypt platforms.
func demoSecrets(seeds map[string]string, sig map[string]*platformtest.Signer) map[string]string {
	out := make(map[string]string, len(seeds))
	for name, seed := range seeds {
		s, ok := sig[name]
		switch {
		case !ok:
			out[name] = seed
		case msgCryptPlatforms[name]:
			token, key, id := s.MsgCrypt()
			out[name] = token + "," + key + "," + id
		default:
			out[name] = s.Secret()
		}
	}
	return out
}

// playAll sends every play to the gateway at base, in order, and returns
// what came of each.
func playAll(g *gateway, base string, plays []play) ([]result, error) {
	results := make([]result, 0, len(plays))
	for _, p := range plays {
		var wg sync.WaitGroup
		errs := make([]error, len(p.deliveries))
		for i, d := range p.deliveries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, errs[i] = d.send(base)
			}()
			if i+1 >= p.concurrent {
				wg.Wait() // the later copies come one after another
			}
		}
		wg.Wait()
		status, _, err := p.forged.send(base)
		for _, e := range append(errs, err) {
			if e != nil {
				return nil, fmt.Errorf("%s: %w", p.source, e)
			}
		}
		results = append(results, result{
			source: p.source, want: p.want, delivered: len(p.deliveries),
			processed:       g.processed[p.source].Load(),
			forgedStatus:    status,
			unauthenticated: g.endpoints[p.source].Stats().Unauthenticated,
		})
	}
	return results, nil
}

// send delivers d to the server at base and returns the answer.
func (d delivery) send(base string) (int, string, error) {
	req, err := http.NewRequest(d.method, base+d.target, bytes.NewReader(d.body))
	if err != nil {
		return 0, "", err
	}
	for k, v := range d.header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// post is a POST of body with header h to target.
func post(target string, body []byte, h http.Header) delivery {
	return delivery{method: http.MethodPost, target: target, header: h, body: body}
}

// signed plays a platform whose signer signs in headers: body delivered
// copies times, signed each time at its own moment, and body signed with a
// guessed secret.
func signed(name string, want int, body string, copies int, sig, guess *platformtest.Signer, now time.Time) play {
	p := play{source: name, want: want}
	for i := range copies {
		p.deliveries = append(p.deliveries, post("/"+name, []byte(body), sig.Sign([]byte(body), now.Add(time.Duration(i)*time.Second))))
	}
	p.forged = post("/"+name, []byte(body), guess.Sign([]byte(body), now))
	return p
}

// queried plays a platform that signs in the URL query (WeChat, WeCom,
// DingTalk's event subscriptions): msg encrypted and delivered twice, each
// time encrypted and signed anew as the platform does, and msg encrypted
// with a guessed configuration.
func queried(name, msg string, sig, guess *platformtest.Signer, now time.Time) play {
	p := play{source: name, want: 1}
	for i := range 2 {
		q, body := sig.SignQuery([]byte(msg), now.Add(time.Duration(i)*5*time.Second))
		p.deliveries = append(p.deliveries, post("/"+name+"?"+q.Encode(), body, http.Header{"Content-Type": {"text/xml"}}))
	}
	q, body := guess.SignQuery([]byte(msg), now)
	p.forged = post("/"+name+"?"+q.Encode(), body, http.Header{"Content-Type": {"text/xml"}})
	return p
}

// shopifySign signs body as Shopify does: the base64 HMAC-SHA256 of the raw
// body keyed with the client secret, with the event's id beside it.
func shopifySign(secret, eventID string, body []byte) http.Header {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return http.Header{
		"Content-Type":          {"application/json"},
		"X-Shopify-Topic":       {"orders/create"},
		"X-Shopify-Event-Id":    {eventID},
		"X-Shopify-Hmac-Sha256": {base64.StdEncoding.EncodeToString(mac.Sum(nil))},
	}
}
