package dedupehttp

import (
	"context"

	"github.com/gatewaykit/dedupe"
)

// doEach is d.DoEach(ctx, keys, fn). Until Deduper.DoEach is on main, it
// calls Do once per key, in order: the same answers per key, one round trip
// each.
// TODO(b-http): call d.DoEach once it lands, and delete this file.
func doEach(ctx context.Context, d *dedupe.Deduper, keys []dedupe.Key, fn func(ctx context.Context, i int) error) []error {
	errs := make([]error, len(keys))
	for i, k := range keys {
		errs[i] = d.Do(ctx, k, func(ctx context.Context) error { return fn(ctx, i) })
	}
	return errs
}
