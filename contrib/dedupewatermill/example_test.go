package dedupewatermill_test

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupewatermill"
)

// A router whose handler runs once per message UUID: the second copy of
// order-1, a redelivery, is acked without running it.
func ExampleMiddleware() {
	d := dedupe.New(nil) // a memory store; Redis or PostgreSQL for several consumers
	defer d.Close()
	ps := gochannel.NewGoChannel(gochannel.Config{BlockPublishUntilSubscriberAck: true}, watermill.NopLogger{})
	defer ps.Close()

	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		panic(err)
	}
	router.AddMiddleware(dedupewatermill.Middleware(d, dedupewatermill.Config{Channel: "orders"}))
	router.AddNoPublisherHandler("ship", "orders", ps, func(msg *message.Message) error {
		fmt.Printf("shipping %s: %s\n", msg.UUID, msg.Payload)
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = router.Run(ctx) }()
	<-router.Running()

	for _, id := range []string{"order-1", "order-2", "order-1"} {
		if err := ps.Publish("orders", message.NewMessage(id, []byte("2 books"))); err != nil {
			panic(err)
		}
	}
	_ = router.Close()
	fmt.Println(d.Stats().Duplicates, "duplicate")
	// Output:
	// shipping order-1: 2 books
	// shipping order-2: 2 books
	// 1 duplicate
}
