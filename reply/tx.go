package reply

import (
	"context"
	"fmt"
	"time"

	"github.com/gatewaykit/dedupe"
)

// TxStore is a store whose marks can be written in the caller's transaction
// Tx: [*dedupe.SQLiteStore] with [*database/sql.Tx], the postgres module's
// *Store with pgx.Tx. [IntendTx] uses it.
type TxStore[Tx any] interface {
	// MarkResultTx is [dedupe.Store.MarkResult] written in tx: visible
	// when tx commits, gone if it rolls back.
	MarkResultTx(ctx context.Context, tx Tx, key dedupe.Key, result []byte, ttl time.Duration) error
}

// IntendTx records reply slot of key as intended, with body, in the caller's
// transaction tx: it commits with the caller's effect and the message's mark
// (such as in [dedupe.SQLiteStore.DoTx]), or not at all. Once tx committed,
// [Sender.Send] (compose nil) or [Sender.Flush] sends it; a process that
// died in between leaves it for the Flush of the message's redelivery.
// IntendTx replaces any record of the reply. s's store must be a
// [TxStore][Tx], else it is an error; so is a body over Send's limit.
func IntendTx[Tx any](ctx context.Context, s *Sender, tx Tx, key dedupe.Key, slot int, body []byte) error {
	var none Tx
	if err := s.checkReply(key, slot); err != nil {
		return err
	}
	ts, ok := s.store.(TxStore[Tx])
	if !ok {
		return fmt.Errorf("reply: %s: intend %s slot %d: a %s store (%T) cannot write in a %T",
			s.p.Name, key, slot, s.store.Backend(), s.store, none)
	}
	if err := s.checkBody(key, slot, body); err != nil {
		return err
	}
	rec := record{state: intended, body: body}
	if err := ts.MarkResultTx(ctx, tx, recordKey(key, slot), rec.encode(), s.o.ttl); err != nil {
		return fmt.Errorf("reply: %s: intend %s slot %d: %w", s.p.Name, key, slot, err)
	}
	return nil
}
