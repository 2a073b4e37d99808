package dedupe

import (
	"crypto/rand"
	"sync"
	"unsafe"
)

// NewClaim returns a claim on key with a new random token: 128 bits from
// crypto/rand in 32 hex digits, carved from a slab shared by 256 tokens.
func NewClaim(key Key) Claim {
	return Claim{Key: key, Token: newToken()}
}

// tokenSlab is random hex digits not yet handed out as tokens.
type tokenSlab struct{ digits []byte }

var tokenSlabs = sync.Pool{New: func() any { return new(tokenSlab) }}

const (
	tokenLen       = 32
	tokensPerSlab  = 256
	tokenSlabBytes = tokenLen * tokensPerSlab
)

// newToken returns 32 random hex digits carved from a slab that many tokens
// share. The bytes of a token are never written again once a string refers
// to them.
func newToken() string {
	s := tokenSlabs.Get().(*tokenSlab)
	if len(s.digits) < tokenLen {
		b := make([]byte, tokenSlabBytes)
		_, _ = rand.Read(b[:tokenSlabBytes/2]) // crypto/rand.Read never fails
		// Hex in place, from the back, so that no byte is written before it is read.
		const hexDigits = "0123456789abcdef"
		for i := tokenSlabBytes/2 - 1; i >= 0; i-- {
			v := b[i]
			b[2*i], b[2*i+1] = hexDigits[v>>4], hexDigits[v&0xf]
		}
		s.digits = b
	}
	t := unsafe.String(&s.digits[0], tokenLen)
	s.digits = s.digits[tokenLen:]
	tokenSlabs.Put(s)
	return t
}
