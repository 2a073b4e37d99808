package dedupetest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest"
)

// perKey is a BatchStore made the plainest way: each method calls its
// one-key peer for each item in turn. The BatchStore group must pass on it,
// since the contract is that of the one-key calls; a group that fails here
// tests more than the contract says.
type perKey struct{ dedupe.Store }

func (p perKey) ClaimEach(ctx context.Context, claims []dedupe.Claim, lease time.Duration) ([]dedupe.Status, []error) {
	statuses, errs := make([]dedupe.Status, len(claims)), make([]error, len(claims))
	for i, c := range claims {
		statuses[i], errs[i] = p.Claim(ctx, c, lease)
	}
	return statuses, errs
}

func (p perKey) ExtendEach(ctx context.Context, claims []dedupe.Claim, lease time.Duration) []error {
	errs := make([]error, len(claims))
	for i, c := range claims {
		errs[i] = p.Extend(ctx, c, lease)
	}
	return errs
}

func (p perKey) ReleaseEach(ctx context.Context, claims []dedupe.Claim) []error {
	errs := make([]error, len(claims))
	for i, c := range claims {
		errs[i] = p.Release(ctx, c)
	}
	return errs
}

func (p perKey) MarkEach(ctx context.Context, keys []dedupe.Key, results [][]byte, ttl time.Duration) []error {
	errs := make([]error, len(keys))
	for i, k := range keys {
		switch {
		case results != nil && len(results) != len(keys):
			errs[i] = fmt.Errorf("%w: %d results for %d keys", dedupe.ErrInvalidKey, len(results), len(keys))
		case results == nil:
			errs[i] = p.Mark(ctx, k, ttl)
		default:
			errs[i] = p.MarkResult(ctx, k, results[i], ttl)
		}
	}
	return errs
}

// TestBatchStoreGroupPerKey runs the suite on a memory store made a
// BatchStore by perKey.
func TestBatchStoreGroupPerKey(t *testing.T) {
	dedupetest.Run(t, dedupetest.Config{
		New: func(t *testing.T, o dedupetest.Options) dedupe.Store {
			return perKey{dedupe.NewMemoryStore(dedupe.MemoryConfig{TTL: o.TTL, Lease: o.Lease, MaxSize: o.MaxSize, Now: o.Now})}
		},
	})
}
