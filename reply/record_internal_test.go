package reply

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/gatewaykit/dedupe"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []record{
		{state: intended, body: []byte("hi")},
		{state: intended, attempt: 3, at: 1764763200000, first: 1764676800000, body: []byte{0, 1, 2}},
		{state: sent, attempt: 1, at: 1, id: "1187654321098765432", body: []byte("answer")},
		{state: sent, attempt: 2, at: 1, id: "1187654321098765432"},
		{state: notSent, attempt: 1, at: 5, body: bytes.Repeat([]byte("x"), maxBody)},
	} {
		b := r.encode()
		if len(b) > dedupe.MaxResultSize {
			t.Fatalf("record of %d bytes", len(b))
		}
		got, err := decode(b)
		if err != nil {
			t.Fatalf("decode(encode(%+v)): %v", r, err)
		}
		if got.state != r.state || got.attempt != r.attempt || got.at != r.at || got.first != r.first || got.id != r.id || !bytes.Equal(got.body, r.body) {
			t.Fatalf("decode(encode(%+v)) = %+v", r, got)
		}
	}
	long := record{state: sent, attempt: 1, at: 1, id: strings.Repeat("i", maxID+1), body: bytes.Repeat([]byte("x"), maxBody)}
	b := long.encode()
	if len(b) > dedupe.MaxResultSize {
		t.Fatalf("a sent record with a long id is %d bytes", len(b))
	}
	if got, err := decode(b); err != nil || got.id != long.id || got.body != nil {
		t.Fatalf("a sent record with a long id: %+v, %v; want its id, no body", got, err)
	}
}

// A record of version 1, written before records kept the first send's
// time, still reads: its first is its at.
func TestRecordVersion1(t *testing.T) {
	b := []byte{1, byte(intended), 2, 0xe8, 0x07, 2, 'i', 'd', 'h', 'i'} // attempt 2, at 1000, id "id", body "hi"
	got, err := decode(b)
	if err != nil {
		t.Fatal(err)
	}
	want := record{state: intended, attempt: 2, at: 1000, first: 1000, id: "id", body: []byte("hi")}
	if got.state != want.state || got.attempt != want.attempt || got.at != want.at || got.first != want.first ||
		got.id != want.id || !bytes.Equal(got.body, want.body) {
		t.Fatalf("decode(v1) = %+v, want %+v", got, want)
	}
}

func TestRecordKeys(t *testing.T) {
	k := dedupe.Key{Channel: "line", MessageID: "42"}
	if got := recordKey(k, 3); got != (dedupe.Key{Channel: "dedupe.reply", MessageID: "line:42#3"}) {
		t.Fatalf("recordKey = %v", got)
	}
	if got := lockKey(k, 3); got != (dedupe.Key{Channel: "dedupe.reply-lock", MessageID: "line:42#3"}) {
		t.Fatalf("lockKey = %v", got)
	}
	long := dedupe.Key{Channel: strings.Repeat("c", 64), MessageID: strings.Repeat("m", 256)}
	for _, slot := range []int{0, 1} {
		rk := recordKey(long, slot)
		if err := rk.Validate(); err != nil || !strings.HasPrefix(rk.MessageID, "h:") || len(rk.MessageID) != 66 {
			t.Fatalf("recordKey of a long key = %v, %v", rk, err)
		}
	}
	if recordKey(long, 0) == recordKey(long, 1) {
		t.Fatal("two slots of a long key share a record")
	}
}

// FuzzDecode: any bytes decode to a record or to ErrBadRecord, never a
// panic, and a record decoded encodes back to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(record{state: sent, attempt: 1, at: 7, id: "m1", body: []byte("hi")}.encode())
	f.Add([]byte{1, 1, 0, 0, 0})
	f.Add([]byte{1, 2, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decode(b)
		if err != nil {
			if !errors.Is(err, ErrBadRecord) {
				t.Fatalf("decode(%x): %v, not ErrBadRecord", b, err)
			}
			return
		}
		if got, err := decode(r.encode()); err != nil || got.state != r.state || got.attempt != r.attempt ||
			got.at != r.at || got.first != r.first || got.id != r.id || !bytes.Equal(got.body, r.body) {
			t.Fatalf("decode(encode(decode(%x))) = %+v, %v; want %+v", b, got, err, r)
		}
	})
}
