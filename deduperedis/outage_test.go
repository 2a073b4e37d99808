package deduperedis_test

import (
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
	"github.com/gatewaykit/dedupe/dedupetest/outage"
)

func openOutage(t *testing.T, addr, prefix string) dedupe.Store {
	return newStore(t, newClient(t, addr, nil), deduperedis.Config{Prefix: "dedupe-test:" + prefix + ":"})
}

// Releases that fail while Redis is unreachable land once it answers: no key
// stays claimed for the lease.
func TestReleasesLandAfterOutage(t *testing.T) {
	addr := redisAddr(t)
	for _, d := range []time.Duration{3 * time.Second, 12 * time.Second} {
		t.Run(d.String(), func(t *testing.T) { outage.Releases(t, openOutage, addr, 200, d) })
	}
}

// An instance cut off from Redis ends its handlers' contexts with the lease,
// before another instance can claim their messages.
func TestLeaseEndOnCutOffInstance(t *testing.T) {
	outage.LeaseEnd(t, openOutage, redisAddr(t), 20, 3*time.Second)
}
