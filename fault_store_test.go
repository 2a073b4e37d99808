package dedupe_test

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/gatewaykit/dedupe"
)

// flakyStore wraps a real store and fails its calls on demand: while down is
// set every call fails before reaching the store (a server that went away);
// while lostReply is set every call reaches the store and then fails (the
// reply was lost after the write), the ambiguous case.
type flakyStore struct {
	dedupe.Store
	down, lostReply atomic.Bool
	marksFail       atomic.Bool  // Mark fails, as down does; other calls work
	failNext        atomic.Int32 // fail this many more calls, as down does
	lostNext        atomic.Int32 // lose the replies of this many more calls
	claims          atomic.Int32 // Claim calls made
	lost            atomic.Int32 // replies lost
}

var errServerGone = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

// fail reports whether the call fails before reaching the store.
func (s *flakyStore) fail() bool {
	return s.down.Load() || take(&s.failNext)
}

// take decrements n if it is positive, and reports whether it was.
func take(n *atomic.Int32) bool {
	for {
		v := n.Load()
		if v <= 0 {
			return false
		}
		if n.CompareAndSwap(v, v-1) {
			return true
		}
	}
}

func (s *flakyStore) after(err error) error {
	if err == nil && (s.lostReply.Load() || take(&s.lostNext)) {
		s.lost.Add(1)
		return errServerGone
	}
	return err
}

func (s *flakyStore) Claim(ctx context.Context, c dedupe.Claim, lease time.Duration) (dedupe.Status, error) {
	s.claims.Add(1)
	if s.fail() {
		return 0, errServerGone
	}
	st, err := s.Store.Claim(ctx, c, lease)
	if err = s.after(err); err != nil {
		return 0, err
	}
	return st, nil
}

func (s *flakyStore) Mark(ctx context.Context, k dedupe.Key, ttl time.Duration) error {
	if s.marksFail.Load() || s.fail() {
		return errServerGone
	}
	return s.after(s.Store.Mark(ctx, k, ttl))
}

func (s *flakyStore) MarkResult(ctx context.Context, k dedupe.Key, res []byte, ttl time.Duration) error {
	if s.marksFail.Load() || s.fail() {
		return errServerGone
	}
	return s.after(s.Store.MarkResult(ctx, k, res, ttl))
}

func (s *flakyStore) Result(ctx context.Context, k dedupe.Key) ([]byte, bool, error) {
	if s.fail() {
		return nil, false, errServerGone
	}
	return s.Store.Result(ctx, k)
}

func (s *flakyStore) Extend(ctx context.Context, c dedupe.Claim, lease time.Duration) error {
	if s.fail() {
		return errServerGone
	}
	return s.after(s.Store.Extend(ctx, c, lease))
}

func (s *flakyStore) Release(ctx context.Context, c dedupe.Claim) error {
	if s.fail() {
		return errServerGone
	}
	return s.after(s.Store.Release(ctx, c))
}

// lostNext makes the next n calls reach the store and then fail.
func (s *flakyStore) loseNext(n int32) { s.lostNext.Store(n) }
