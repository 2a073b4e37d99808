package platform_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// FuzzWeComVerify makes up the query and body of a WeCom delivery: it is
// accepted only when msg_signature is the token's SHA-1 over its timestamp,
// nonce and Encrypt (or echostr), within the replay window; a URL check is
// answered only when signed. Nothing panics.
func FuzzWeComVerify(f *testing.F) {
	s := platformtest.NewSigner("wecom", "fuzz")
	p := s.Preset(platform.WeCom)
	q, body := s.SignQuery([]byte("<xml><MsgId>1</MsgId></xml>"), now)
	f.Add(q.Encode(), body)
	f.Add("timestamp="+strconv.FormatInt(now.Unix(), 10)+"&nonce=n&msg_signature=00&echostr=AAAA", []byte{})
	f.Add("", []byte("<xml><Encrypt>AAAA</Encrypt></xml>"))
	f.Fuzz(func(t *testing.T, rawQuery string, body []byte) {
		r := &http.Request{URL: &url.URL{RawQuery: rawQuery}, Header: http.Header{}}
		got, err := p.VerifyRequest(r, body, now)
		if err != nil {
			require.ErrorIs(t, err, platform.ErrUnauthenticated)
			require.Nil(t, got)
			return
		}
		q, qerr := url.ParseQuery(rawQuery)
		require.NoError(t, qerr)
		require.NotEmpty(t, q.Get("msg_signature"), "accepted a delivery without msg_signature")
		if _, ok := p.Answer(got); ok {
			require.True(t, q.Has("echostr"), "answered what is not a URL check")
		}
		_, _ = p.Extract(got, nil)
	})
}

// fuzzRule is a Rule with every part of the signature path a configuration
// can choose: the id from a header, a template over id, timestamp and body,
// base64 signatures separated by spaces, a base64 secret with a prefix and a
// timestamp tolerance.
var fuzzRule = platform.Rule{
	Name: "fuzzrule", ID: "header:X-Id", Timestamp: "header:X-Ts", Tolerance: 5 * time.Minute, TTL: time.Hour,
	Signature: platform.SignatureRule{Header: "X-Sig", Signed: "{id}:{timestamp}:{body}", Encoding: "base64",
		Prefix: "s=", Separator: " ", SecretEncoding: "base64", SecretPrefix: "k_"},
}

// FuzzRuleVerify makes up the id, timestamp, signature header and body of a
// delivery to a [platform.Rule]'s preset: it is accepted only when one entry
// of the header is the HMAC-SHA256 of the template, and the timestamp within
// the tolerance. Nothing panics.
func FuzzRuleVerify(f *testing.F) {
	key := []byte("rule-fuzz-key")
	p, err := platform.NewPreset(fuzzRule)
	require.NoError(f, err)
	p = p.WithSecret("k_" + base64.StdEncoding.EncodeToString(key))
	sign := func(id, ts string, body []byte) string {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + ":" + ts + ":"))
		mac.Write(body)
		return base64.StdEncoding.EncodeToString(mac.Sum(nil))
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	f.Add("evt_1", ts, "s="+sign("evt_1", ts, []byte(`{}`)), []byte(`{}`))
	f.Add("evt_1", ts, "x=1 s=AAAA s="+sign("evt_1", ts, []byte(`{}`)), []byte(`{}`))
	f.Add("evt_1", "1", "s="+sign("evt_1", "1", []byte(`{}`)), []byte(`{}`))
	f.Add("", "", "", []byte(nil))
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{"X-Id": {id}, "X-Ts": {ts}, "X-Sig": {sig}}
		got, err := p.Verify(body, h, now)
		if err != nil {
			require.ErrorIs(t, err, platform.ErrUnauthenticated)
			require.Nil(t, got)
			return
		}
		require.Contains(t, strings.Fields(sig), "s="+sign(id, ts, body), "accepted a signature that is not the template's")
		sec, perr := strconv.ParseInt(ts, 10, 64)
		require.NoError(t, perr)
		if len(ts) == 13 {
			sec /= 1000
		}
		require.LessOrEqual(t, now.Sub(time.Unix(sec, 0)).Abs(), 5*time.Minute, "accepted a stale timestamp")
	})
}
