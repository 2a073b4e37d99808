package idempotency

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBareKeyRefusalSaysHowToFix: a Stripe-style bare key is refused with a
// 400 whose detail says how to fix it: the key quoted, as the client should
// send it, and the option that lets the server take it bare.
func TestBareKeyRefusalSaysHowToFix(t *testing.T) {
	f := newFixture(t, nil, &api{})
	p := assertProblem(t, f.do(post(`abc-123`, "hi")), keyMalformed)
	assert.Contains(t, p.Detail, `Idempotency-Key: "abc-123"`, "the fix, for the client")
	assert.Contains(t, p.Detail, "WithBareKeys", "the fix, for the server")

	// A key that is no bare key either is not echoed as one.
	p = assertProblem(t, f.do(post(`a;b`, "hi")), keyMalformed)
	assert.NotContains(t, p.Detail, `"a;b"`)
}

// TestREADMEShowsKeyForms: the README's Idempotency-Key section says keys are
// quoted strings, shows a bare key with WithBareKeys, and names the runnable
// example that shows both.
func TestREADMEShowsKeyForms(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(b), "## Idempotency-Key for your own API")
	require.True(t, ok)
	section, _, _ = strings.Cut(section, "\n## ")
	for _, want := range []string{
		`Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"`,
		"Idempotency-Key: abc-123",
		"idempotency.WithBareKeys()",
		"ExampleWithBareKeys",
	} {
		assert.Contains(t, section, want)
	}
}
