package idempotency_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/idempotency"
)

// An agent's endpoint behind the middleware: the client's retry of a POST
// gets the first reply again, and the model is called once.
func ExampleMiddleware() {
	calls := 0
	messages := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++ // the model call that must not be paid twice
		prompt, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"reply":"echo: %s"}`, prompt)
	})

	d := dedupe.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}))
	defer d.Close()
	mw := idempotency.Middleware(d, idempotency.WithScope(func(r *http.Request) string {
		return r.Header.Get("Authorization") // the caller; keys are theirs alone
	}))
	api := mw(messages)

	send := func(key, prompt string) {
		r := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(prompt))
		r.Header.Set("Authorization", "Bearer alice")
		r.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get(idempotency.HeaderReplayed), strings.TrimSpace(w.Body.String()))
	}
	send(`"k-1"`, "hello")   // runs
	send(`"k-1"`, "hello")   // a retry: replayed
	send(`"k-1"`, "goodbye") // the key reused for another request: 422
	send(`k-1`, "hello")     // not an sf-string: 400
	fmt.Println("model calls:", calls)
	// Output:
	// 201  {"reply":"echo: hello"}
	// 201 true {"reply":"echo: hello"}
	// 422  {"type":"https://pkg.go.dev/github.com/gatewaykit/dedupe/idempotency#key-reused","title":"Idempotency-Key is already used","status":422,"detail":"This operation is idempotent and requires correct usage of Idempotency Key. Idempotency Key MUST not be reused across different payloads of this operation. A key expires 24 hours after its request was processed."}
	// 400  {"type":"https://pkg.go.dev/github.com/gatewaykit/dedupe/idempotency#key-malformed","title":"Idempotency-Key is malformed","status":400,"detail":"Malformed Idempotency-Key: a bare token, not a quoted string. The key must be a String of RFC 9651 (draft-ietf-httpapi-idempotency-key-header, section 2.1): send it quoted, as Idempotency-Key: \"k-1\". (The server can accept unquoted keys too, with idempotency.WithBareKeys.)"}
	// model calls: 1
}

// Keys as Stripe's clients send them, bare (Idempotency-Key: abc-123), are
// refused by default: the draft asks for a quoted string
// (Idempotency-Key: "abc-123"). WithBareKeys takes both, as one key.
func ExampleWithBareKeys() {
	calls := 0
	charges := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"charge":"ch_1"}`)
	})

	d := dedupe.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}))
	defer d.Close()
	strict := idempotency.Middleware(d)(charges)
	lenient := idempotency.Middleware(d, idempotency.WithBareKeys())(charges)

	send := func(api http.Handler, key string) {
		r := httptest.NewRequest(http.MethodPost, "/v1/charges", strings.NewReader("amount=100"))
		r.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		replayed := map[string]string{"true": " replayed"}[w.Header().Get(idempotency.HeaderReplayed)]
		fmt.Printf("%s -> %d%s\n", key, w.Code, replayed)
	}
	send(strict, `abc-123`)    // bare: 400, the draft's sf-string is quoted
	send(lenient, `abc-123`)   // WithBareKeys: runs
	send(lenient, `"abc-123"`) // the same key, quoted: replayed
	send(strict, `"abc-123"`)  // quoted: every middleware takes it
	fmt.Println("charges:", calls)
	// Output:
	// abc-123 -> 400
	// abc-123 -> 201
	// "abc-123" -> 201 replayed
	// "abc-123" -> 201 replayed
	// charges: 1
}
