package deduperedis_test

import (
	"context"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReplicasUnconfirmed runs a store with Replicas 1 on the shared server,
// which has no replica: a Mark, and a Claim that takes its key, are applied
// but fail with ErrNotReplicated after ReplicaTimeout; a Claim that finds the
// key marked, Exists, Extend and Release wait for no replica. A Deduper on it
// treats the unconfirmed claim as ambiguous: it returns the error without
// running the handler and releases the claim.
func TestReplicasUnconfirmed(t *testing.T) {
	client := newClient(t, redisAddr(t), nil)
	const timeout = 50 * time.Millisecond
	st := newStore(t, client, deduperedis.Config{Replicas: 1, ReplicaTimeout: timeout})
	plain := newStore(t, client, deduperedis.Config{Prefix: deduperedis.Prefix(st)})
	ctx := context.Background()
	k := dedupe.Key{Channel: "replicas", MessageID: "1"}

	start := time.Now()
	require.ErrorIs(t, st.Mark(ctx, k, time.Minute), deduperedis.ErrNotReplicated, "Mark")
	assert.GreaterOrEqual(t, time.Since(start), timeout, "Mark returned before the WAIT's timeout")
	ok, err := st.Exists(ctx, k)
	require.NoError(t, err, "Exists of the unconfirmed mark")
	require.True(t, ok, "Exists of the unconfirmed mark; the master applied it")
	_, status, err := claimNew(ctx, st, k, 0)
	require.NoError(t, err, "Claim of a marked key")
	require.Equal(t, dedupe.Duplicate, status, "Claim of a marked key, want Duplicate without waiting")

	k2 := dedupe.Key{Channel: "replicas", MessageID: "2"}
	c := dedupe.NewClaim(k2)
	_, err = st.Claim(ctx, c, time.Minute)
	require.ErrorIs(t, err, deduperedis.ErrNotReplicated, "Claim")
	require.NoError(t, st.Extend(ctx, c, time.Minute), "Extend of the unconfirmed claim")
	require.NoError(t, st.Release(ctx, c), "Release of the unconfirmed claim")

	d := dedupe.New(st)
	k3 := dedupe.Key{Channel: "replicas", MessageID: "3"}
	ran := false
	err = d.Do(ctx, k3, func(context.Context) error { ran = true; return nil })
	require.ErrorIs(t, err, deduperedis.ErrNotReplicated, "Do, want ErrNotReplicated before the handler")
	require.False(t, ran, "handler ran; want ErrNotReplicated before the handler")
	_, status, err = claimNew(ctx, plain, k3, 0)
	require.NoError(t, err, "Claim after the Deduper gave up")
	require.Equal(t, dedupe.Claimed, status, "Claim after the Deduper gave up; want the key released")
}
