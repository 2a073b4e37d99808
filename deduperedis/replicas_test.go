package deduperedis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
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
	if err := st.Mark(ctx, k, time.Minute); !errors.Is(err, deduperedis.ErrNotReplicated) {
		t.Fatalf("Mark = %v, want ErrNotReplicated", err)
	}
	if d := time.Since(start); d < timeout {
		t.Errorf("Mark returned after %v, before the WAIT's %v", d, timeout)
	}
	if ok, err := st.Exists(ctx, k); !ok || err != nil {
		t.Fatalf("Exists of the unconfirmed mark = %v, %v; the master applied it", ok, err)
	}
	if _, status, err := claimNew(ctx, st, k, 0); status != dedupe.Duplicate || err != nil {
		t.Fatalf("Claim of a marked key = %v, %v, want Duplicate without waiting", status, err)
	}

	k2 := dedupe.Key{Channel: "replicas", MessageID: "2"}
	c := dedupe.NewClaim(k2)
	if _, err := st.Claim(ctx, c, time.Minute); !errors.Is(err, deduperedis.ErrNotReplicated) {
		t.Fatalf("Claim = %v, want ErrNotReplicated", err)
	}
	if err := st.Extend(ctx, c, time.Minute); err != nil {
		t.Fatalf("Extend of the unconfirmed claim: %v", err)
	}
	if err := st.Release(ctx, c); err != nil {
		t.Fatalf("Release of the unconfirmed claim: %v", err)
	}

	d := dedupe.New(st)
	k3 := dedupe.Key{Channel: "replicas", MessageID: "3"}
	ran := false
	err := d.Do(ctx, k3, func(context.Context) error { ran = true; return nil })
	if !errors.Is(err, deduperedis.ErrNotReplicated) || ran {
		t.Fatalf("Do = %v, handler ran %v; want ErrNotReplicated before the handler", err, ran)
	}
	if _, status, err := claimNew(ctx, plain, k3, 0); status != dedupe.Claimed || err != nil {
		t.Fatalf("Claim after the Deduper gave up = %v, %v; want the key released", status, err)
	}
}
