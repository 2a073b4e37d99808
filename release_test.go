package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Handlers fail while the store is unreachable, so their releases fail too:
// each is queued and lands once the store answers again, well before the
// lease would have run out, so the platform's retry is processed at once.
func TestDoReleaseQueuedUntilItLands(t *testing.T) {
	for _, outage := range []time.Duration{3 * time.Second, 12 * time.Second} {
		t.Run(fmt.Sprint("outage=", outage), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				shared := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
				st := &flakyStore{Store: shared}
				d := dedupe.New(st, dedupe.WithLease(5*time.Minute))
				defer d.Close()
				const n = 200
				errHandler := errors.New("handler failed")
				for i := range n {
					st.down.Store(false)
					err := d.Do(context.Background(), key(i), func(context.Context) error {
						st.down.Store(true) // the store goes away while the handler fails
						return errHandler
					})
					require.ErrorIs(t, err, errHandler)
				}
				time.Sleep(outage)
				st.down.Store(false)
				require.NoError(t, d.Flush(context.Background()))

				other := dedupe.New(shared) // the platform's retry, on another instance
				claimed := 0
				for i := range n {
					if other.Do(context.Background(), key(i), nop) == nil {
						claimed++
					}
				}
				assert.Equal(t, n, claimed, "keys left claimed after the store came back")
				s := d.Stats()
				assert.Equal(t, uint64(n), s.DeferredReleases)
				assert.Equal(t, uint64(n), s.ReplayedReleases)
				assert.Zero(t, s.Dropped)
			})
		})
	}
}
