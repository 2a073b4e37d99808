package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/gatewaykit/dedupe"
)

// resultSQL reads the result kept with key's live mark: no row if the key
// is not marked, a NULL result if it is marked without one.
func resultSQL(t string) string {
	return `SELECT result FROM ` + t + ` WHERE key = $1 AND token IS NULL AND expires_at > now()`
}

// keepResultSQL keeps a result with the mark that the caller's transaction
// holds (see [Store.DoResultTx]).
func keepResultSQL(t string) string {
	return `UPDATE ` + t + ` SET result = $2 WHERE key = $1 AND token IS NULL`
}

// MarkResult is [Store.Mark], also keeping result with the mark, in the
// same statement; see [dedupe.Store.MarkResult]. An empty result is kept as none
// (NULL). A result longer than [dedupe.MaxResultSize] is refused with
// [dedupe.ErrTooLarge] before any I/O.
func (s *Store) MarkResult(ctx context.Context, key dedupe.Key, result []byte, ttl time.Duration) error {
	if err := s.check(ctx, "mark", key); err != nil {
		return err
	}
	if err := checkResult(key, result); err != nil {
		return err
	}
	return s.mark(ctx, key, result, ttl)
}

// Result returns the result kept with key's mark; see [dedupe.Store.Result].
// marked is false if key is not marked or its mark has expired on the
// server's clock; result is nil if the mark has none. Result is one
// statement, batched as Exists is.
func (s *Store) Result(ctx context.Context, key dedupe.Key) ([]byte, bool, error) {
	if err := s.check(ctx, "result", key); err != nil {
		return nil, false, err
	}
	k := key.String()
	var res []byte
	var marked bool
	err := s.b.Do(ctx, k, func(p *pgBatch) func() error {
		p.Queue(s.sql.result, k)
		return func() error {
			res, marked = nil, false
			switch err := p.results.QueryRow().Scan(&res); {
			case isNoRows(err):
				return nil
			case err != nil:
				return err
			}
			marked = true
			return nil
		}
	})
	if err != nil {
		return nil, false, s.fail(ctx, "result", key, err)
	}
	return res, marked, nil
}

// mark writes key's mark with result (nil: none) for ttl (<= 0: the
// store's TTL). The caller has checked key and result.
func (s *Store) mark(ctx context.Context, key dedupe.Key, result []byte, ttl time.Duration) error {
	if ttl <= 0 {
		ttl = s.ttl
	}
	if len(result) == 0 {
		result = nil
	}
	if _, err := s.write(ctx, ttl, key.String(), s.sql.mark, micros(ttl), result); err != nil {
		return s.fail(ctx, "mark", key, err)
	}
	return nil
}

// checkResult refuses a result longer than dedupe.MaxResultSize.
func checkResult(key dedupe.Key, result []byte) error {
	if len(result) > dedupe.MaxResultSize {
		return fmt.Errorf("dedupe: postgres: mark %s: result of %d bytes, over %d: %w",
			key, len(result), dedupe.MaxResultSize, dedupe.ErrTooLarge)
	}
	return nil
}
