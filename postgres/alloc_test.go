//go:build !race

package postgres

import "testing"

// The race detector makes the token's arrays escape, so this runs without it.

func TestTokenAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = newToken() }); n != 1 {
		t.Fatalf("newToken allocates %v times, want 1", n)
	}
}
