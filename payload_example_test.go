package dedupe_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/gatewaykit/dedupe"
)

// A redelivery that reuses a processed message's id with other content is
// told apart from a copy: the Deduper keeps the payload's fingerprint with
// the mark.
func ExampleWithPayload() {
	d := dedupe.New(nil, dedupe.WithPayloadCheck())
	defer d.Close()
	ctx := context.Background()
	key := dedupe.Key{Channel: "telegram", MessageID: "1001"}
	handle := func(context.Context) error { fmt.Println("processed"); return nil }

	for _, body := range []string{
		`{"update_id":1001,"message":{"text":"hello"}}`,
		`{"message":{"text":"hello"},"update_id":1001}`, // the same JSON
		`{"update_id":1001,"message":{"text":"HELLO"}}`, // altered
	} {
		err := d.With(dedupe.WithPayload([]byte(body))).Do(ctx, key, handle)
		switch {
		case errors.Is(err, dedupe.ErrPayloadMismatch):
			fmt.Println("refused: the payload differs from the processed copy's")
		case errors.Is(err, dedupe.ErrDuplicate):
			fmt.Println("duplicate")
		case err != nil:
			fmt.Println(err)
		}
	}
	fmt.Println("mismatches:", d.Stats().PayloadMismatches)
	// Output:
	// processed
	// duplicate
	// refused: the payload differs from the processed copy's
	// mismatches: 1
}
