package dedupe_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// gatedClaims holds every Claim after the first until gate is closed, as a
// Claim sent into an outage (a restarting Redis) is answered only once the
// server is back.
type gatedClaims struct {
	*flakyStore
	calls atomic.Int32
	gate  chan struct{}
	held  chan struct{} // closed when the second Claim is held
	once  sync.Once
}

func (s *gatedClaims) Claim(ctx context.Context, c dedupe.Claim, lease time.Duration) (dedupe.Status, error) {
	if s.calls.Add(1) > 1 {
		s.once.Do(func() { close(s.held) })
		<-s.gate
	}
	return s.flakyStore.Claim(ctx, c, lease)
}

// TestCopyClaimedWhileMarkQueued is issue 44, item 16, on the Deduper's side:
// a copy of a message asks for its claim while the first run's handler is
// still running; the first run succeeds, its Mark fails (the store restarts)
// and is queued in the backlog; the first run's claim runs out on the store
// meanwhile (the outage outlasted the lease), and only then is the copy's
// Claim answered, Claimed. Do checked for a queued mark before it claimed,
// not after: the copy ran the handler a second time. It must be answered
// ErrDuplicate, its claim given back.
func TestCopyClaimedWhileMarkQueued(t *testing.T) {
	var elapsed atomic.Int64
	base := time.Now()
	clock := func() time.Time { return base.Add(time.Duration(elapsed.Load())) }
	mem := dedupe.NewMemoryStore(dedupe.MemoryConfig{Now: clock})
	st := &gatedClaims{flakyStore: &flakyStore{Store: mem}, gate: make(chan struct{}), held: make(chan struct{})}
	const lease = 10 * time.Second
	d := dedupe.New(st, dedupe.WithLease(lease), dedupe.WithClock(clock))
	defer d.Close()
	key := dedupe.Key{Channel: "line", MessageID: "restart-1"}
	ctx := context.Background()

	var runs atomic.Int32
	running, finish := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- d.Do(ctx, key, func(context.Context) error {
			runs.Add(1)
			close(running)
			<-finish
			return nil
		})
	}()
	<-running
	second := make(chan error, 1)
	go func() {
		second <- d.Do(ctx, key, func(context.Context) error {
			runs.Add(1)
			st.marksFail.Store(false) // the double ran: let both marks land, not wait out their 10 s
			return nil
		})
	}()
	<-st.held // the copy passed the check for a queued mark and waits for its Claim

	st.marksFail.Store(true) // the store goes away as the first run ends
	close(finish)
	for queued := false; !queued; {
		var err error
		queued, err = d.Exists(ctx, key) // true once the mark is queued in the backlog
		require.NoError(t, err)
		time.Sleep(time.Millisecond) // polling the first Do's progress, not a timing assumption
	}
	elapsed.Store(int64(lease + time.Second)) // the first run's claim ran out on the store
	close(st.gate)
	err := <-second
	st.marksFail.Store(false) // back: the backlog writes the mark
	require.NoError(t, <-first, "the first run, whose mark the backlog wrote")

	assert.Equal(t, int32(1), runs.Load(), "runs of the handler")
	assert.True(t, errors.Is(err, dedupe.ErrDuplicate), "the copy: %v, want ErrDuplicate", err)
	claim := dedupe.NewClaim(key)
	status, cerr := mem.Claim(ctx, claim, lease)
	require.NoError(t, cerr)
	assert.Equal(t, dedupe.Duplicate, status, "the key once the backlog wrote its mark")
}
