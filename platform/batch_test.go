package platform_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// What the tests of the batched presets (LINE, Meta, Matrix) share.

// eventsError returns the error of p.Events on body: the body's, or else the
// Err of its first event that cannot be keyed, or nil.
func eventsError(p platform.Preset, body []byte) error {
	evs, err := p.Events(body, nil)
	if err != nil {
		return err
	}
	for _, e := range evs {
		if e.Err != nil {
			return e.Err
		}
	}
	return nil
}

// eventIDs returns the ids of the events of body, checking what every
// Events result must hold: each Raw is a slice of body (not a copy) and a
// JSON object, and each ID a valid key of p.
func eventIDs(t testing.TB, p platform.Preset, body []byte) []string {
	t.Helper()
	evs, err := p.Events(body, nil)
	require.NoError(t, err)
	ids := make([]string, 0, len(evs))
	for _, e := range evs {
		require.True(t, json.Valid(e.Raw) && e.Raw[0] == '{', "event %q: Raw is not an object", e.ID)
		require.True(t, within(body, e.Raw), "event %q: Raw is not a slice of the body", e.ID)
		require.NoError(t, e.Key(p).Validate())
		ids = append(ids, e.ID)
	}
	return ids
}

// within reports whether sub is a slice of the memory of b.
func within(b, sub []byte) bool {
	if len(sub) == 0 {
		return true
	}
	for i := range b {
		if &b[i] == &sub[0] {
			return i+len(sub) <= len(b)
		}
	}
	return false
}

// A forgery is one kind of forged delivery: it returns the body and the
// headers of the i-th forged delivery of its kind, and the preset it is
// sent to.
type forgery struct {
	kind   string
	forge  func(i int) ([]byte, http.Header)
	preset platform.Preset
}

// runForgeries sends 1,000 forged deliveries, spread over kinds (at least
// 10), to their presets, and checks that Verify refuses every one with
// ErrUnauthenticated and an error that does not hold the secret.
func runForgeries(t *testing.T, secret string, kinds []forgery) {
	t.Helper()
	require.GreaterOrEqual(t, len(kinds), 10, "kinds of forgery")
	refused := map[string]int{}
	for n := 0; n < 1000; n++ {
		k := kinds[n%len(kinds)]
		body, h := k.forge(n)
		_, err := k.preset.Verify(body, h, now)
		if assert.ErrorIs(t, err, platform.ErrUnauthenticated, "%s #%d", k.kind, n) {
			refused[k.kind]++
		}
		require.NotContains(t, fmt.Sprint(err), secret)
	}
	total := 0
	for _, k := range kinds {
		assert.Positive(t, refused[k.kind], k.kind)
		total += refused[k.kind]
	}
	assert.Equal(t, 1000, total, "forged deliveries refused")
}

// numbered returns body with its first occurrence of old replaced by old and
// i, so that each forged delivery is another body.
func numbered(body []byte, old string, i int) []byte {
	return bytes.Replace(body, []byte(old), []byte(fmt.Sprintf("%s%d", old, i)), 1)
}

// TestBatchedPresetsMessageID checks what MessageID says of a batch: the id
// of a single event, ErrNotAMessage without events, ErrNoMessageID (and not
// ErrNotAMessage) with several.
func TestBatchedPresetsMessageID(t *testing.T) {
	for _, c := range []struct {
		preset          platform.Preset
		one, none, many string
		want            string
	}{
		{platform.LINE, `{"events":[{"type":"follow","webhookEventId":"01FZ74ASS536FW97EX38NKCZQK"}]}`,
			"line_verification.json", "line_events.json", "01FZ74ASS536FW97EX38NKCZQK"},
		{platform.Meta, `{"object":"page","entry":[{"messaging":[{"sender":{"id":"1"},"timestamp":2,"message":{"mid":"m_1"}}]}]}`,
			"", "meta_whatsapp.json", "message:m_1"},
		{platform.Matrix, `{"events":[{"event_id":"$e1:example.org","type":"m.room.message"}]}`,
			"", "matrix_txn.json", "$e1:example.org"},
	} {
		t.Run(c.preset.Name, func(t *testing.T) {
			k, err := c.preset.Extract([]byte(c.one), nil)
			require.NoError(t, err)
			assert.Equal(t, dedupe.Key{Channel: c.preset.Name, MessageID: c.want}, k)

			none := []byte(`{"events":[],"entry":[]}`)
			if c.none != "" {
				none = fixture(t, c.none)
			}
			evs, err := c.preset.Events(none, nil)
			require.NoError(t, err)
			assert.Empty(t, evs)
			assert.NotNil(t, evs, "no events is an empty slice")
			_, err = c.preset.Extract(none, nil)
			assert.ErrorIs(t, err, platform.ErrNotAMessage, "a delivery without events")

			_, err = c.preset.Extract(fixture(t, c.many), nil)
			assert.ErrorIs(t, err, dedupe.ErrNoMessageID)
			assert.NotErrorIs(t, err, platform.ErrNotAMessage)
			assert.Contains(t, err.Error(), "Preset.Events")

			for _, bad := range []string{``, `[]`, `{}`, `null`, `{"events":5,"entry":5}`} {
				_, err := c.preset.Events([]byte(bad), nil)
				assert.ErrorIs(t, err, dedupe.ErrNoMessageID, "%s", bad)
			}
			// An element that is not an event is one event that cannot be
			// keyed, in its place; the batch is not an error.
			bad := []byte(`{"events":[5],"entry":[5]}`)
			evs, err = c.preset.Events(bad, nil)
			require.NoError(t, err)
			require.Len(t, evs, 1)
			assert.ErrorIs(t, evs[0].Err, dedupe.ErrNoMessageID)
			assert.Equal(t, "5", string(evs[0].Raw))
			assert.Empty(t, evs[0].ID)
			_, err = c.preset.Extract(bad, nil)
			assert.ErrorIs(t, err, dedupe.ErrNoMessageID, "MessageID of one event that cannot be keyed")
		})
	}
}

// TestBatchedPresetsSigned checks that each batched preset accepts what
// platformtest signs, and returns the body unchanged.
func TestBatchedPresetsSigned(t *testing.T) {
	for _, c := range []struct {
		preset  platform.Preset
		fixture string
	}{
		{platform.LINE, "line_events.json"},
		{platform.Meta, "meta_whatsapp.json"},
		{platform.Meta, "meta_messenger.json"},
		{platform.Matrix, "matrix_txn.json"},
	} {
		s := platformtest.NewSigner(c.preset.Name, "s3cret-"+c.preset.Name)
		p := s.Preset(c.preset)
		require.NoError(t, p.CheckSecret())
		body := fixture(t, c.fixture)
		got, err := p.Verify(body, s.Sign(body, now), now)
		require.NoError(t, err, c.fixture)
		assert.Equal(t, body, got)
		// None of the three signs a timestamp: a replay passes Verify, and
		// is caught only by its keys, while the TTL remembers them.
		_, err = p.Verify(body, s.Sign(body, now.Add(-365*24*time.Hour)), now)
		assert.NoError(t, err, "%s: no signed timestamp", c.preset.Name)
	}
}

// FuzzLINEEvents, FuzzMetaEvents and FuzzMatrixEvents check the Events
// parsers on any body (see fuzzEvents).
func FuzzLINEEvents(f *testing.F) {
	fuzzEvents(f, platform.LINE, "line_events.json", "line_events_redelivery.json", "line_verification.json")
}

func FuzzMetaEvents(f *testing.F) {
	f.Add([]byte(`{"entry":[{"messaging":[{"sender":{"id":"1"},"timestamp":1,"x":{}}]}]}`))
	fuzzEvents(f, platform.Meta, "meta_whatsapp.json", "meta_messenger.json", "meta_instagram.json")
}

func FuzzMatrixEvents(f *testing.F) {
	fuzzEvents(f, platform.Matrix, "matrix_txn.json")
}

// fuzzEvents checks p.Events on any body: no panic, an error of a
// documented class and no events, or events whose Raw is a slice of the body
// and valid JSON and whose ID is not empty. Where encoding/json finds the
// events LINE and Matrix key, the ids must be the same.
func fuzzEvents(f *testing.F, p platform.Preset, fixtures ...string) {
	for _, name := range fixtures {
		f.Add(fixture(f, name))
	}
	f.Add([]byte(`{"events":[{"webhookEventId":"\ud800","event_id":1}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		evs, err := p.Events(body, nil)
		if err != nil {
			require.True(t, errors.Is(err, dedupe.ErrNoMessageID) || errors.Is(err, dedupe.ErrInvalidKey),
				"%s: error %v is in no documented class", p.Name, err)
			require.Nil(t, evs)
			return
		}
		keyed := true
		for _, e := range evs {
			if e.Err != nil {
				require.True(t, errors.Is(e.Err, dedupe.ErrNoMessageID) || errors.Is(e.Err, dedupe.ErrInvalidKey),
					"%s: event error %v is in no documented class", p.Name, e.Err)
				require.Empty(t, e.ID, p.Name)
				keyed = false
			} else {
				require.NotEmpty(t, e.ID, p.Name)
			}
			require.True(t, within(body, e.Raw), "%s: Raw is not a slice of the body", p.Name)
			require.True(t, json.Valid(e.Raw), p.Name)
		}
		if want, ok := referenceEventIDs(p.Name, body); ok && keyed {
			got := make([]string, len(evs))
			for i, e := range evs {
				got[i] = e.ID
			}
			require.Equal(t, want, got, "%s: %q", p.Name, body)
		}
	})
}

// referenceEventIDs finds the ids LINE (webhookEventId) or Matrix
// (event_id) key on with encoding/json, where it can judge: every event an
// object whose id is a non-empty string that round-trips.
func referenceEventIDs(name string, body []byte) ([]string, bool) {
	field := map[string]string{"line": "webhookEventId", "matrix": "event_id"}[name]
	var top map[string]json.RawMessage
	if field == "" || json.Unmarshal(body, &top) != nil {
		return nil, false
	}
	var evs []map[string]json.RawMessage
	if top["events"] == nil || json.Unmarshal(top["events"], &evs) != nil {
		return nil, false
	}
	ids := []string{}
	for _, e := range evs {
		var id string
		if e == nil || json.Unmarshal(e[field], &id) != nil || id == "" {
			return nil, false
		}
		if again, _ := json.Marshal(id); !bytes.Equal(bytes.ToLower(again), bytes.ToLower(e[field])) {
			return nil, false // escaped or repaired: the invariants judge it
		}
		ids = append(ids, id)
	}
	return ids, true
}
