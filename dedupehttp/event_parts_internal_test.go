package dedupehttp

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe/platform"
)

// metaTwoEntries is a WhatsApp delivery of two entries, each with a change
// of its own metadata and contacts, and one message or status each: the part
// of an event keeps its own entry and change, not the other.
const metaTwoEntries = `{"object":"whatsapp_business_account","entry":[` +
	`{"id":"E1","changes":[{"value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":"P1"},` +
	`"contacts":[{"wa_id":"W1"}],"messages":[{"id":"wamid.A","type":"text"}]},"field":"messages"}]},` +
	`{"id":"E2","changes":[{"value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":"P2"},` +
	`"statuses":[{"id":"wamid.B","status":"sent"},{"id":"wamid.B","status":"read"}]},"field":"messages"}]}]}`

// FuzzEventParts checks the parts NewAsyncEvents queues, on any body of the
// three batched platforms: each part is JSON no larger than the body, and
// the platform's Events finds in it exactly its event, with the same id (or
// error) and the same JSON.
func FuzzEventParts(f *testing.F) {
	for _, name := range []string{"line_events.json", "line_events_redelivery.json", "meta_whatsapp.json",
		"meta_messenger.json", "meta_instagram.json", "meta_optin_user_ref.json", "matrix_txn.json"} {
		b, err := os.ReadFile(filepath.Join("..", "platform", "testdata", name))
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte(metaTwoEntries))
	f.Add([]byte(`{"events":[{"webhookEventId":"A"},5,{"event_id":"$b"},{"webhookEventId":"C","event_id":"$c"}],"x":[1,{"y":[]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, p := range []platform.Preset{platform.LINE, platform.Meta, platform.Matrix} {
			evs, err := p.Events(body, nil)
			if err != nil {
				continue
			}
			parts := newEventParts(body, evs)
			require.True(t, parts.ok, "%s: the events are slices of the body", p.Name)
			for i, ev := range evs {
				part := parts.part(i)
				require.True(t, json.Valid(part), "%s: part %d %q", p.Name, i, part)
				require.LessOrEqual(t, len(part), len(body))
				got, err := p.Events(part, nil)
				require.NoError(t, err, "%s: part %d %q", p.Name, i, part)
				require.Len(t, got, 1, "%s: part %d %q", p.Name, i, part)
				require.Equal(t, ev.ID, got[0].ID)
				require.Equal(t, ev.Err == nil, got[0].Err == nil)
				require.True(t, bytes.Equal(ev.Raw, got[0].Raw))
			}
		}
	})
}

// TestEventPartsMeta cuts the delivery of two entries: each part holds its
// own entry's metadata, not the other's.
func TestEventPartsMeta(t *testing.T) {
	body := []byte(metaTwoEntries)
	evs, err := platform.Meta.Events(body, nil)
	require.NoError(t, err)
	require.Len(t, evs, 3)
	parts := newEventParts(body, evs)
	first := string(parts.part(0))
	require.Contains(t, first, `"phone_number_id":"P1"`)
	require.Contains(t, first, `"wa_id":"W1"`)
	require.NotContains(t, first, "P2")
	require.NotContains(t, first, "wamid.B")
	for i := 1; i < 3; i++ {
		part := string(parts.part(i))
		require.Contains(t, part, `"phone_number_id":"P2"`)
		require.NotContains(t, part, "P1")
		require.NotContains(t, part, "wamid.A")
	}
	require.Contains(t, string(parts.part(1)), `"sent"`)
	require.NotContains(t, string(parts.part(1)), `"read"`)
}
