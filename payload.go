package dedupe

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"time"

	"github.com/gatewaykit/dedupe/internal/canon"
)

// Payload validation: a copy that is not a copy.
//
// Do, DoResult, DoEach and DoEachResult know a message by its key alone, so
// a delivery that reuses a processed message's id with other content (a
// sender that reuses ids, a replay altered under a valid id) is answered as
// a duplicate like any copy. [WithPayloadCheck] makes the Deduper tell it
// apart: the mark of a message processed keeps the fingerprint of the
// payload it was processed with, and a later copy whose payload has another
// fingerprint is answered with an error wrapping [ErrPayloadMismatch] (and
// [ErrDuplicate]), counted in [Stats].PayloadMismatches and logged at warn
// level. It is not run either way.
//
// The fingerprint lives in the slot every [Store] has for a result kept with
// a mark ([Store.MarkResult]), framed in front of the result a DoResult
// keeps, so every store (memory, SQLite, Redis in both layouts, PostgreSQL,
// and the layered and fallback stores made of them) keeps it with the mark,
// for the mark's TTL, with no schema of its own: NekoBot reads a SQLite
// store's marks as before. A call with a result loses 20 bytes of
// [MaxResultSize] to the frame.

// fingerprint is the identity of a payload: the first 16 bytes (128 bits)
// of the SHA-256 of its tagged form (see payloadFingerprint).
type fingerprint [16]byte

// payloadMagic starts the frame of a result kept with a fingerprint: 0xff,
// which no UTF-8 text holds, "DP" and the frame's version.
const payloadMagic = "\xffDP\x01"

// payloadOverhead is the bytes the frame adds to a result.
const payloadOverhead = len(payloadMagic) + len(fingerprint{})

// payloadSettings are what [WithPayloadCheck] and [WithPayload] set.
type payloadSettings struct {
	check bool          // marks keep fingerprints and copies are compared
	fps   []fingerprint // the payloads of the next call, by key; nil: none given
}

// WithPayloadCheck makes the Deduper keep, with the mark of each message
// processed, the fingerprint of the payload the call gave ([WithPayload]),
// and compare each copy's payload with it: a copy whose payload differs is
// not run and gets an error wrapping both [ErrPayloadMismatch] and
// [ErrDuplicate] (so a caller that acknowledges duplicates still does, and
// one that checks ErrPayloadMismatch first can refuse it), and no kept
// result; it is counted in [Stats].PayloadMismatches, not in Duplicates. It
// is off by default: then nothing changes, and results are kept as given.
//
// The rules, where the copies' order or the store leave a choice:
//   - The first copy processed wins: its fingerprint is kept, and a later
//     copy is compared with it, whatever that copy's payload.
//   - A copy that arrives while another is in flight gets [ErrInFlight] as
//     without the check (the fingerprint is written with the mark, after
//     fn succeeded); with [WithWait] it waits, and is compared once the
//     owner has marked the message.
//   - A copy without a payload (a call without [WithPayload]) is not
//     compared, and its mark keeps no fingerprint.
//   - A mark that keeps no fingerprint (made before the check was on, by a
//     call without a payload, by [Store.Mark] or another tool, or whose
//     result the store dropped: a [MemoryStore] over its MaxResultBytes, or
//     restored from a snapshot) matches every payload: its copies are
//     answered [ErrDuplicate] and counted in [Stats].PayloadUnverified.
//   - In a [Deduper.DoEach] batch, a key held twice is compared at its
//     later place with the payload its mark keeps (its first place's, if
//     that place processed it).
//
// Every copy is then read with its kept result, one [Store.Result] call per
// copy (DoEach: per copy, one after another), and every mark keeps a result
// of 20 bytes at least: on SQLite a row of the results table beside the
// NekoBot table (which is unchanged: NekoBot reads its marks as before; a
// mark NekoBot writes over one drops the fingerprint), on PostgreSQL the
// mark's result column, on Redis's plain layout 16 bytes more per mark
// (MEMORY USAGE of a ten-digit Telegram key's mark: 104 B, 120 B with the
// fingerprint), and on its compact layout a string key of its own beside
// the mark's hash field, as any result there: about 120 B a mark, not 24.5,
// so the compact layout's saving is lost. A Deduper made by
// [Deduper.With] keeps the setting; DoResult and DoEachResult of a Deduper
// with the check read the frame and hand copies the result alone, so give
// the option to every Deduper over a store that holds such marks.
func WithPayloadCheck() Option {
	return func(s *settings) { s.pay.check = true }
}

// WithPayload gives the payloads of the messages of the next call, for one
// call through [Deduper.With], and turns [WithPayloadCheck] on:
//
//	err := d.With(dedupe.WithPayload(body)).Do(ctx, key, fn)
//	errs := d.With(dedupe.WithPayload(bodies...)).DoEach(ctx, keys, fn)
//
// Do and DoResult take one payload; DoEach and DoEachResult one per key,
// payloads[i] for keys[i]. A call given another number refuses its keys with
// an error wrapping [ErrInvalidKey] and runs nothing. WithPayload() without
// payloads removes those given earlier.
//
// A payload is identified by the first 128 bits of the SHA-256 of its
// canonical form: a payload that is one JSON value (RFC 8259) by the value,
// so that a copy whose members come in another order, with other whitespace
// or escapes, or numbers written otherwise (1E2 and 100.0) is the same
// payload; any other payload by its bytes. A JSON value and bytes that are
// not one are never the same payload. The fingerprints are computed when
// WithPayload is called: the caller may reuse the payloads' memory then.
func WithPayload(payloads ...[]byte) Option {
	var fps []fingerprint
	if len(payloads) > 0 {
		fps = make([]fingerprint, len(payloads))
		for i, p := range payloads {
			fps[i] = payloadFingerprint(p)
		}
	}
	return func(s *settings) {
		s.pay.check = true
		s.pay.fps = fps
	}
}

// payloadFingerprint returns p's fingerprint: the SHA-256 of "j" and the
// canonical form of p (internal/canon) if p is one JSON value, or else of
// "r" and p's bytes, cut to 16 bytes.
func payloadFingerprint(p []byte) fingerprint {
	buf := make([]byte, 1, len(p)+64)
	buf[0] = 'j'
	form, ok := canon.AppendJSONText(buf, string(p))
	if !ok {
		form = append(append(form[:0], 'r'), p...)
	}
	sum := sha256.Sum256(form)
	return fingerprint(sum[:len(fingerprint{})])
}

// callPayloads returns the fingerprints of a call on n keys, nil if the
// call has none, or the error its keys are refused with.
func (d *Deduper) callPayloads(n int) ([]fingerprint, error) {
	fps := d.pay.fps
	if fps == nil || len(fps) == n {
		return fps, nil
	}
	return nil, fmt.Errorf("%w: WithPayload gave %d payloads for %d keys", ErrInvalidKey, len(fps), n)
}

// framed returns what a mark keeps for fn's result res, with the check on
// and fp the call's payload: the frame, the fingerprint and res (nil if res
// would not fit in MaxResultSize with them; a warning is logged). Without
// the check or a payload it is keptResult.
func (d *Deduper) framed(ctx context.Context, key Key, fp *fingerprint, res []byte) []byte {
	if !d.pay.check || fp == nil {
		return d.keptResult(ctx, key, res)
	}
	if len(res) > MaxResultSize-payloadOverhead {
		d.log(ctx, slog.LevelWarn, "dedupe: result not kept: longer than MaxResultSize with the payload's fingerprint", key, phaseMark,
			fmt.Errorf("%w: %d bytes, over %d", ErrTooLarge, len(res), MaxResultSize-payloadOverhead))
		res = nil
	}
	b := make([]byte, 0, payloadOverhead+len(res))
	b = append(b, payloadMagic...)
	b = append(b, fp[:]...)
	return append(b, res...)
}

// unframe reads what a mark keeps: the fingerprint and the result, or
// ok false and kept as it is for a result without the frame.
func unframe(kept []byte) (fp fingerprint, res []byte, ok bool) {
	if len(kept) < payloadOverhead || string(kept[:len(payloadMagic)]) != payloadMagic {
		return fp, kept, false
	}
	copy(fp[:], kept[len(payloadMagic):payloadOverhead])
	if res = kept[payloadOverhead:]; len(res) == 0 {
		res = nil
	}
	return fp, res, true
}

// errPayloadCopy is the error of a copy whose payload differs.
var errPayloadCopy = fmt.Errorf("%w: %w", ErrPayloadMismatch, ErrDuplicate)

// resultPayloadMismatch is the result of the decision record of such a copy.
const resultPayloadMismatch = "payload_mismatch"

// compareCopy compares a copy of key, with payload fp (nil: none), with
// what its mark keeps. It returns the result the copy gets, the
// fingerprint the mark keeps (has false if none) and whether they differ.
func (d *Deduper) compareCopy(key Key, fp *fingerprint, kept []byte) (res []byte, markFP fingerprint, has, differs bool) {
	if !d.pay.check {
		return kept, markFP, false, false
	}
	markFP, res, has = unframe(kept)
	if fp == nil {
		return res, markFP, has, false
	}
	if !has {
		d.shared.counters.payloadUnverified.Add(1)
		return res, markFP, false, false
	}
	return res, markFP, true, markFP != *fp
}

// answerCopy answers a copy of key, whose mark keeps kept: ErrDuplicate
// with the result kept, or errPayloadCopy if its payload fp differs.
func (d *Deduper) answerCopy(ctx context.Context, key Key, fp *fingerprint, kept []byte, layer string, start time.Time) ([]byte, error) {
	res, _, _, differs := d.compareCopy(key, fp, kept)
	if differs {
		d.mismatched(ctx, key, layer, start)
		return nil, errPayloadCopy
	}
	d.shared.counters.duplicates.Add(1)
	d.decided(ctx, key, resultDuplicate, layer, start, nil)
	return res, ErrDuplicate
}

// mismatched counts and logs a copy of key whose payload differs.
func (d *Deduper) mismatched(ctx context.Context, key Key, layer string, start time.Time) {
	d.shared.counters.payloadMismatches.Add(1)
	d.log(ctx, slog.LevelWarn, "dedupe: a copy's payload differs from the processed copy's: not run", key, phaseClaim, ErrPayloadMismatch)
	d.decided(ctx, key, resultPayloadMismatch, layer, start, errPayloadCopy)
}

// fpAt returns the payload of keys[i] of a batch, or nil.
func fpAt(fps []fingerprint, i int) *fingerprint {
	if fps == nil {
		return nil
	}
	return &fps[i]
}

// eachPayload is what a DoEach batch knows of its payloads.
type eachPayload struct {
	fps    []fingerprint // by key; nil: none given
	markFP []fingerprint // the fingerprint a duplicate's mark keeps, by key
	hasFP  []bool        // whether markFP[i] is known
}

// copyOf answers key i of the batch, whose mark keeps kept.
func (r *eachRun) copyOf(i int, kept []byte, layer string) {
	d := r.d
	res, markFP, has, differs := d.compareCopy(r.keys[i], fpAt(r.pay.fps, i), kept)
	if has && r.pay.fps != nil {
		r.pay.markFP[i], r.pay.hasFP[i] = markFP, true
	}
	if differs {
		d.mismatched(r.ctx, r.keys[i], layer, r.start)
		r.errs[i] = errPayloadCopy
		return
	}
	d.shared.counters.duplicates.Add(1)
	if r.withResult {
		r.results[i] = res
	}
	r.errs[i] = ErrDuplicate
	d.decided(r.ctx, r.keys[i], resultDuplicate, layer, r.start, nil)
}

// repeatDiffers answers key i, the repeat of key j in the batch, if its
// payload decides its answer: one that differs from the payload j's mark
// keeps (j's own, if j processed it) gets errPayloadCopy, and one that
// matches it where j's own differed gets ErrDuplicate. It reports whether
// it answered.
func (r *eachRun) repeatDiffers(i, j int) bool {
	p := &r.pay
	if p.fps == nil {
		return false
	}
	var markFP fingerprint
	switch {
	case r.errs[j] == nil:
		markFP = p.fps[j]
	case p.hasFP[j]:
		markFP = p.markFP[j]
	default:
		return false
	}
	switch {
	case markFP != p.fps[i]:
		r.d.mismatched(r.ctx, r.keys[i], "", r.start)
		r.results[i], r.errs[i] = nil, errPayloadCopy
		return true
	case r.errs[j] == errPayloadCopy:
		r.copyOf(i, r.d.storedResult(r.ctx, r.keys[i]), "") // rare: read again
		return true
	}
	return false
}

// payloads sets the batch's payloads, and refuses every key if their number
// is not the batch's; it reports whether the batch goes on.
func (r *eachRun) payloads() bool {
	fps, err := r.d.callPayloads(len(r.keys))
	if err != nil {
		for i := range r.errs {
			r.errs[i] = err
		}
		return false
	}
	if fps != nil {
		n := len(r.keys)
		r.pay = eachPayload{fps: fps, markFP: make([]fingerprint, n), hasFP: make([]bool, n)}
	}
	return true
}
