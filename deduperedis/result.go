package deduperedis

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/redis/go-redis/v9"
)

// resultPrefix starts the value of a mark kept with a result: "m:" and then
// the result's bytes, whatever they are (see scripts.go, "Values").
const resultPrefix = markValue + ":"

// MarkResult is [Store.Mark], keeping result with the mark; see
// [dedupe.Store.MarkResult]. The mark and its result are one Redis string,
// "m:" followed by result, written by one SET with PX: they expire together,
// and a later Mark drops the result. An empty result is kept as none (the
// value "m" of Mark). A result longer than [dedupe.MaxResultSize] is refused
// with an error wrapping [dedupe.ErrTooLarge] before any I/O. MarkResult is
// batched, and waits for [Config.Replicas], as Mark does. The store keeps a
// copy of result: the caller may change it once MarkResult returned.
//
// A store of an earlier version reads a mark kept with a result as a claim
// held by someone else (its Claim answers [dedupe.InFlight], its Exists
// false) until the mark expires: upgrade every instance before calling
// MarkResult, or [dedupe.Deduper.DoResult], on any of them.
func (s *Store) MarkResult(ctx context.Context, key dedupe.Key, result []byte, ttl time.Duration) error {
	if len(result) > dedupe.MaxResultSize && key.Validate() == nil {
		return fmt.Errorf("dedupe: redis: mark %s: result of %d bytes, over %d: %w",
			key, len(result), dedupe.MaxResultSize, dedupe.ErrTooLarge)
	}
	if err := s.check(ctx, "mark", key); err != nil {
		return err
	}
	if len(result) == 0 {
		return s.mark(ctx, key, markValue, ttl)
	}
	v := make([]byte, len(resultPrefix)+len(result))
	copy(v, resultPrefix)
	copy(v[len(resultPrefix):], result)
	return s.mark(ctx, key, v, ttl)
}

// Result returns the result kept with key's mark; see [dedupe.Store.Result].
// marked is false if key is absent, claimed or released; result is nil if
// key is marked without one, by Mark or by a store of an earlier version. It
// is one GET, batched as the store's other calls are.
func (s *Store) Result(ctx context.Context, key dedupe.Key) (result []byte, marked bool, err error) {
	if err := s.check(ctx, "result", key); err != nil {
		return nil, false, err
	}
	if s.compact {
		return s.resultCompact(ctx, key)
	}
	k := s.key(key)
	var v string
	err = s.do(ctx, k, func(p pipe) func() error {
		cmd := p.Get(p.ctx, k)
		return func() (err error) {
			v, err = cmd.Result()
			if err == redis.Nil {
				err = nil
			}
			return err
		}
	})
	if err != nil {
		return nil, false, s.fail(ctx, "result", key, err)
	}
	result, marked = parseMark(v)
	return result, marked, nil
}

// parseMark reads v, the value of a message key (empty if absent): whether it
// is a mark, and the result kept with it, a copy of its bytes, or nil if it
// has none.
func parseMark(v string) (result []byte, marked bool) {
	if v == markValue {
		return nil, true
	}
	res, ok := strings.CutPrefix(v, resultPrefix)
	switch {
	case !ok:
		return nil, false
	case res == "": // never written: an empty result is kept as none
		return nil, true
	}
	return []byte(res), true
}
