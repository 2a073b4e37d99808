package platform_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe/platform"
)

// baselineEvents is the naive way to key a batch: decode the array with
// encoding/json, then each event for its id.
func baselineEvents(body []byte, array, id string) ([]platform.Event, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, err
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(top[array], &raws); err != nil {
		return nil, err
	}
	evs := make([]platform.Event, 0, len(raws))
	for _, r := range raws {
		var e map[string]json.RawMessage
		if err := json.Unmarshal(r, &e); err != nil {
			return nil, err
		}
		var s string
		if err := json.Unmarshal(e[id], &s); err != nil {
			return nil, err
		}
		evs = append(evs, platform.Event{ID: s, Raw: r})
	}
	return evs, nil
}

var eventsCases = []struct {
	preset    platform.Preset
	fixture   string
	array, id string
}{
	{platform.LINE, "line_events.json", "events", "webhookEventId"},
	{platform.Matrix, "matrix_txn.json", "events", "event_id"},
}

// TestEventsAllocs proves Events allocation-light: a fraction of the
// allocations of the baseline.
func TestEventsAllocs(t *testing.T) {
	for _, c := range eventsCases {
		body := fixture(t, c.fixture)
		preset := testing.AllocsPerRun(50, func() {
			_, err := c.preset.Events(body, nil)
			require.NoError(t, err)
		})
		baseline := testing.AllocsPerRun(50, func() {
			_, err := baselineEvents(body, c.array, c.id)
			require.NoError(t, err)
		})
		assert.LessOrEqual(t, preset, baseline/4, "%s: allocs per Events, against the baseline's quarter", c.preset.Name)
	}
}

func BenchmarkEvents(b *testing.B) {
	for _, c := range eventsCases {
		body := fixture(b, c.fixture)
		b.Run(c.preset.Name+"/preset", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := c.preset.Events(body, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.preset.Name+"/json-baseline", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := baselineEvents(body, c.array, c.id); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
