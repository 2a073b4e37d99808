package dedupewatermill

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/gatewaykit/dedupe"
)

// DefaultChannel is the key channel of a [Middleware] whose [Config] leaves
// Channel empty.
const DefaultChannel = "watermill"

// DefaultWait is how long a copy of a message that another handler is
// processing waits for that handler's outcome ([dedupe.WithWait]) before it
// is nacked, unless the options of [Middleware] say otherwise. A subscriber
// redelivers a nacked message at once (gochannel) or after its own delay, so
// without a wait a copy would be nacked and sent again in a loop for as long
// as the first one runs.
const DefaultWait = 10 * time.Second

// StoreTimeout bounds each store call of a [Middleware] ([dedupe.WithStoreTimeout])
// unless its options say otherwise.
const StoreTimeout = 5 * time.Second

// Config says how a [Middleware] keys a message. Its zero value keys each
// message by its UUID in [DefaultChannel].
type Config struct {
	// Channel is the channel of every key (default [DefaultChannel]). Give
	// each handler whose messages are numbered on their own a channel of its
	// own; it must be a valid [dedupe.Key] channel.
	Channel string
	// Field is the metadata field that holds a message's id, for a
	// publisher that puts the id of the business event there (an outbox
	// row's id, a platform's message id). "" (the default) keys a message by
	// its UUID, which Watermill's marshalers carry across the broker, so a
	// redelivery keeps it; a message published twice by its producer has two
	// UUIDs, though, and is two messages to that key.
	Field string
	// Key, if not nil, returns a message's key, and Channel and Field are
	// not used. An error nacks the message without running the handler.
	Key func(msg *message.Message) (dedupe.Key, error)
}

// key returns msg's key by cfg.
func (cfg *Config) key(msg *message.Message) (dedupe.Key, error) {
	if cfg.Key != nil {
		return cfg.Key(msg)
	}
	id, from := msg.UUID, "uuid"
	if cfg.Field != "" {
		id, from = msg.Metadata.Get(cfg.Field), "metadata field "+cfg.Field
	}
	if id == "" {
		return dedupe.Key{}, fmt.Errorf("dedupewatermill: message %q: %w: %s is empty", msg.UUID, dedupe.ErrNoMessageID, from)
	}
	return dedupe.Key{Channel: cfg.Channel, MessageID: id}, nil
}

// Middleware returns a [message.HandlerMiddleware] that runs the handler
// under [dedupe.Deduper.DoResult], keyed as cfg says, with the message's
// context:
//
//   - The handler returns nil: the key is marked, with the messages it
//     produced kept beside the mark, and the middleware returns them, so the
//     router publishes them and acks the message.
//   - The handler returns an error (or panics): the claim is released and the
//     error returned, so the router nacks the message and the subscriber
//     delivers it again, and it runs again.
//   - The key is marked (a redelivery, a copy): the handler does not run and
//     the middleware returns the messages kept with the mark, so the router
//     publishes them again and acks. That covers a first run whose produced
//     messages the router failed to publish: the router nacks it after the
//     mark, and only this republishing delivers them. They keep their UUIDs,
//     so a consumer downstream keyed by UUID drops the copies.
//   - Another handler holds the key: the middleware waits for its outcome up
//     to [DefaultWait], runs the handler if that one failed, and otherwise
//     returns an error wrapping [dedupe.ErrInFlight], which nacks the copy.
//   - A key that cannot be found or stored, and a store error, return an
//     error wrapping it ([dedupe.ErrNoMessageID], [dedupe.ErrInvalidKey]) and
//     nack the message without running the handler. Such a message is nacked
//     on every delivery: put Watermill's PoisonQueue middleware before this
//     one to move it aside.
//
// The handler sees the message with a context that Do cancels if the claim's
// lease runs out (see [dedupe.Deduper.Do]); the message's own context is put
// back when it returns. Each store call is bounded by [StoreTimeout]. These
// defaults replace d's own wait and store timeout; opts apply over them, and
// over d's other options, for this middleware alone ([dedupe.Deduper.With]).
//
// The produced messages kept are at most [dedupe.MaxResultSize] bytes
// encoded; beyond that the key is marked without them (the Deduper logs a
// warning), and a redelivery after a failed publish publishes nothing. The
// middleware is safe for concurrent use.
func Middleware(d *dedupe.Deduper, cfg Config, opts ...dedupe.Option) message.HandlerMiddleware {
	d = d.With(append([]dedupe.Option{
		dedupe.WithWait(DefaultWait),
		dedupe.WithStoreTimeout(StoreTimeout),
	}, opts...)...)
	if cfg.Channel == "" {
		cfg.Channel = DefaultChannel
	}
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			key, err := cfg.key(msg)
			if err != nil {
				return nil, err
			}
			var produced []*message.Message
			orig := msg.Context()
			res, err := d.DoResult(orig, key, func(ctx context.Context) ([]byte, error) {
				msg.SetContext(ctx)
				defer msg.SetContext(orig)
				var herr error
				produced, herr = h(msg)
				if herr != nil {
					return nil, herr
				}
				return encode(produced)
			})
			switch {
			case errors.Is(err, dedupe.ErrDuplicate):
				kept, derr := decode(res)
				if derr != nil {
					return nil, fmt.Errorf("dedupewatermill: %s: %w", key, derr)
				}
				return kept, nil
			case err != nil:
				return nil, fmt.Errorf("dedupewatermill: %s: %w", key, err)
			}
			return produced, nil
		}
	}
}
