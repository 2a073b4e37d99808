package reply

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/big"
	"strconv"

	"github.com/gatewaykit/dedupe"
)

// nonceLen is the length of a [Nonce]: Discord's limit on a message nonce.
const nonceLen = 25

// digest returns the SHA-256 of the length-prefixed encoding of key's
// channel, its message id and slot, with a domain prefix: the one hash both
// token formats are made of.
func digest(key dedupe.Key, slot int) [sha256.Size]byte {
	h := sha256.New()
	var n [8]byte
	put := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	put("dedupe.reply.v1")
	put(key.Channel)
	put(key.MessageID)
	put(strconv.Itoa(slot))
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// UUID returns the token of reply slot of the message key as an RFC 9562
// version-8 UUID ("xxxxxxxx-xxxx-8xxx-[89ab]xxx-xxxxxxxxxxxx", lower case):
// the first 128 bits of a SHA-256 of a length-prefixed encoding of key's
// channel, its message id and slot, with the version and variant bits set.
// It is the same in every process and run, and differs between slots,
// channels and message ids. LINE's X-Line-Retry-Key and Feishu's uuid take
// it.
func UUID(key dedupe.Key, slot int) string {
	d := digest(key, slot)
	u := d[:16]
	u[6] = u[6]&0x0f | 0x80 // version 8
	u[8] = u[8]&0x3f | 0x80 // variant 10
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:16])
	return string(b[:])
}

// Nonce returns the token of reply slot of the message key as 25 characters
// of [0-9a-z], Discord's limit on a message nonce: the first 128 bits of the
// hash [UUID] is made of, in base 36, padded with leading zeros. It is as
// stable and distinct as UUID.
func Nonce(key dedupe.Key, slot int) string {
	d := digest(key, slot)
	s := new(big.Int).SetBytes(d[:16]).Text(36)
	for len(s) < nonceLen {
		s = "0" + s
	}
	return s
}
