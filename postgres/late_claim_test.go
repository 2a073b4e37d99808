package postgres

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest/faultproxy"
)

// lateLatency is how long the proxy holds the first Claim on its way to the
// server in TestClaimLandingAfterRetryNotStranded: far longer than the retry
// and the other holder's release it must outlast, even on a loaded machine.
const lateLatency = 5 * time.Second

// TestClaimLandingAfterRetryNotStranded is issue 34's stranded claims after a
// fault storm. A Claim whose connection fails while the request is still on
// its way reaches the server later. Do asks again with the same token, which
// answers InFlight since another instance holds the message; that instance
// then releases it, and the first request lands: it takes the message for
// Do's token, which nobody releases. The message stays claimed for the whole
// lease. Do must settle such a claim by releasing its token, which fences it:
// the late request then takes nothing, and the next copy is processed.
func TestClaimLandingAfterRetryNotStranded(t *testing.T) {
	ctx := context.Background()
	table := testTable(t)
	other := newTestStore(t, newPool(t, "", 0), Config{Table: table})
	app := "dedupe_late_" + randomHex(t, 4)
	pool, p := lateProxyPool(t, app)
	s := newTestStore(t, pool, Config{Table: table})
	d := dedupe.New(s, dedupe.WithLease(time.Hour))
	t.Cleanup(func() { _ = d.Close() })

	// Prepare the claim and release statements on the pool's one connection,
	// so that the Claim below is one request.
	warm := dedupe.NewClaim(dedupe.Key{Channel: "late", MessageID: randomHex(t, 8)})
	_, err := s.Claim(ctx, warm, time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, warm))

	k := dedupe.Key{Channel: "late", MessageID: randomHex(t, 8)}
	b := dedupe.NewClaim(k) // another instance's claim, through no proxy
	st, err := other.Claim(ctx, b, time.Hour)
	require.NoError(t, err)
	require.Equal(t, dedupe.Claimed, st)

	p.SetLatency(lateLatency)
	before := p.Stats().Requested
	ran := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		dctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		done <- d.Do(dctx, k, func(context.Context) error { ran <- struct{}{}; return nil })
	}()
	require.Eventually(t, func() bool { return p.Stats().Requested > before }, 30*time.Second, time.Millisecond,
		"the Claim never reached the proxy")
	sent := time.Now()
	p.SetLatency(0)
	require.Equal(t, 1, p.CutClients(), "the pool has one connection")

	err = <-done
	require.ErrorIs(t, err, dedupe.ErrInFlight, "the retry of the Claim on a new connection finds b's claim")
	require.Empty(t, ran, "fn ran beside b's claim")
	require.NoError(t, other.Release(ctx, b))
	require.Less(t, time.Since(sent), lateLatency,
		"the scene took longer than the first Claim's delay: it reached the server before b's release")

	// The first Claim reaches the server now; its backend runs it, then
	// finds its connection closed and ends.
	admin := adminConn(t)
	require.Eventually(t, func() bool {
		var n int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n)
		return err == nil && n <= 1
	}, lateLatency+time.Minute, 10*time.Millisecond, "the backend of the cut connection never ended")

	var holder string
	err = admin.QueryRow(ctx, `SELECT coalesce((SELECT split_part(token, ' ', 1) FROM `+table+`
		WHERE key = $1 AND expires_at > now()), '')`, k.String()).Scan(&holder)
	require.NoError(t, err)
	require.Empty(t, holder, "the late Claim took the message after its holder released it: stranded for the lease")
	require.NoError(t, d.Do(ctx, k, func(context.Context) error { return nil }), "the next copy is not processed")
}

// lateProxyPool returns a pool of one connection to the test server through a
// fault proxy, its connections named app, that never pings a connection it
// hands out (a ping would be the first request through the proxy).
func lateProxyPool(t *testing.T, app string) (*pgxpool.Pool, *faultproxy.Proxy) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testDSN(t))
	require.NoError(t, err)
	p, err := faultproxy.Start(net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	host, port, err := net.SplitHostPort(p.Addr())
	require.NoError(t, err)
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = host, uint16(n), nil
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	cfg.MaxConns = 1
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, p
}

// failFirstClaim is a store whose first Claim fails before it reaches the
// server, as on a connection that broke.
type failFirstClaim struct {
	dedupe.Store
	failed atomic.Bool
}

func (s *failFirstClaim) Claim(ctx context.Context, c dedupe.Claim, lease time.Duration) (dedupe.Status, error) {
	if s.failed.CompareAndSwap(false, true) {
		return 0, errors.New("read tcp 127.0.0.1:5432: connection reset by peer")
	}
	return s.Store.Claim(ctx, c, lease)
}

// A Do that waits for the owner ([dedupe.WithWait]) after its first Claim
// failed and the retry found the message in flight has spent its token (Do
// released it, which fences it): it asks with new tokens while it waits, and
// claims the message once the owner released it.
func TestWaitAfterFencedClaim(t *testing.T) {
	ctx := context.Background()
	table := testTable(t)
	other := newTestStore(t, newPool(t, "", 0), Config{Table: table})
	s := &failFirstClaim{Store: newTestStore(t, newPool(t, "", 0), Config{Table: table})}
	d := dedupe.New(s, dedupe.WithLease(time.Hour), dedupe.WithWait(time.Minute))
	t.Cleanup(func() { _ = d.Close() })

	k := dedupe.Key{Channel: "late", MessageID: randomHex(t, 8)}
	b := dedupe.NewClaim(k)
	st, err := other.Claim(ctx, b, time.Hour)
	require.NoError(t, err)
	require.Equal(t, dedupe.Claimed, st)

	done := make(chan error, 1)
	go func() { done <- d.Do(ctx, k, func(context.Context) error { return nil }) }()
	require.Eventually(t, func() bool { return d.Stats().Waits == 1 }, 30*time.Second, time.Millisecond,
		"Do never waited for the owner")
	require.NoError(t, other.Release(ctx, b))
	require.NoError(t, <-done, "the waiting Do did not claim the released message")
	require.Equal(t, uint64(1), d.Stats().Ambiguous)
	require.Equal(t, uint64(1), d.Stats().WaitsClaimed)
}
