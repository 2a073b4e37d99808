package deduperedis

import (
	"context"
	"fmt"

	"github.com/gatewaykit/dedupe"
)

// Forget drops key's mark and the result kept with it unless a live claim
// holds key; see [dedupe.Forgetter]. It is one script call (forgetScript)
// that reads the key's value and deletes it only if it is a mark, in one
// atomic step on the server, so a claim is never deleted; it touches one
// key, so it works on Redis Cluster, where it is retried after a failover
// as the store's other calls are. With [Config.Replicas], a mark deleted is
// reported only once the replicas confirmed the deletion. A Forget retried
// after a lost reply finds the mark gone and reports false.
func (s *Store) Forget(ctx context.Context, key dedupe.Key) (bool, error) {
	if err := s.check(ctx, "forget", key); err != nil {
		return false, err
	}
	n, err := s.script(ctx, forgetScript, dedupe.Claim{Key: key}, 0, forgetDone)
	switch {
	case err != nil:
		return false, s.fail(ctx, "forget", key, err)
	case n == forgetHeld:
		return false, fmt.Errorf("dedupe: redis: forget %s: %w", key, dedupe.ErrInFlight)
	}
	return n == forgetDone, nil
}
