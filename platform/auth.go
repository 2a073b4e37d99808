package platform

import (
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/internal/jsonscan"
)

// What the verifiers of this package share: how to refuse, how to compare,
// and how far a signed timestamp may be from now.

// unauthenticated returns an error wrapping [ErrUnauthenticated] for a
// delivery of platform name. why never holds a secret.
func unauthenticated(name, why string) error {
	return fmt.Errorf("%w: %s %s", ErrUnauthenticated, name, why)
}

// equalHex reports in constant time whether the hex text got encodes want.
// Hex of either case is accepted.
func equalHex(got string, want []byte) bool {
	if len(got) != 2*len(want) {
		return false
	}
	b, err := hex.DecodeString(got)
	return err == nil && subtle.ConstantTimeCompare(b, want) == 1
}

// replayWindow is how far from now a signed timestamp may be for a preset
// that does not say otherwise: its TTL. A copy older than the TTL would no
// longer be found a duplicate, so a replay of a captured delivery must be
// refused here instead.
func replayWindow(p *Preset) time.Duration {
	if p.TTL > 0 {
		return p.TTL
	}
	return dedupe.DefaultTTL
}

// maxTimestampDigits bounds a timestamp header: 13 digits are milliseconds
// until the year 2286.
const maxTimestampDigits = 13

// checkMillis is checkTimestamp for a platform whose timestamps are in
// milliseconds only: a timestamp of another length than 13 digits (one in
// seconds, which checkTimestamp would read as seconds) is refused.
func checkMillis(name, header, ts string, now time.Time, window time.Duration) error {
	if ts != "" && len(ts) != maxTimestampDigits {
		return unauthenticated(name, header+" is not a Unix time in milliseconds (13 digits)")
	}
	return checkTimestamp(name, header, ts, now, window)
}

// checkTimestamp checks that the Unix time ts, in seconds or (13 digits) in
// milliseconds, is at most window from now. header names it in errors.
func checkTimestamp(name, header, ts string, now time.Time, window time.Duration) error {
	if ts == "" {
		return unauthenticated(name, "request has no "+header)
	}
	if len(ts) > maxTimestampDigits || !jsonscan.IsInteger(ts) || ts[0] == '-' {
		return unauthenticated(name, header+" is not a Unix time")
	}
	n, _ := strconv.ParseInt(ts, 10, 64)
	t := time.Unix(n, 0)
	if len(ts) == maxTimestampDigits {
		t = time.UnixMilli(n)
	}
	if d := now.Sub(t); d > window || d < -window {
		return unauthenticated(name, fmt.Sprintf("%s is %s from now, more than %s (a replay?)",
			header, d.Round(time.Second), window))
	}
	return nil
}
