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
	// 400  {"type":"https://pkg.go.dev/github.com/gatewaykit/dedupe/idempotency#key-malformed","title":"Idempotency-Key is malformed","status":400,"detail":"Malformed Idempotency-Key: not a String (a quoted string, as \"8e03978e-40d5\"). This operation is idempotent and requires an Idempotency-Key header, a quoted string such as \"8e03978e-40d5-43e8-bc93-6894a57f9324\"."}
	// model calls: 1
}
