package dedupe

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The comparisons of the memory store's walk order agree with comparing the
// keys' text forms, on keys whose channels are prefixes of each other and
// whose ids hold ':' and bytes on either side of it.
func TestCompareKeysMatchesText(t *testing.T) {
	keys := []Key{
		{"a", "1"}, {"a", ":"}, {"a", "9"}, {"ab", "1"}, {"a-", "1"}, {"a", "a:b"},
		{"b", "0"}, {"web", "a:b:c"}, {"we", "b"}, {"web", "a"}, {"A", "z"}, {"a", "\u00e9"},
	}
	for _, a := range keys {
		for _, b := range keys {
			want := strings.Compare(a.String(), b.String())
			assert.Equal(t, want, compareKeys(a, b), "compareKeys(%s, %s)", a, b)
			for _, s := range []string{b.String(), b.Channel, b.Channel + ":", b.String() + "x", ""} {
				assert.Equal(t, strings.Compare(a.String(), s), compareKeyText(a, s), "compareKeyText(%s, %q)", a, s)
			}
		}
	}
}

// bulkResultStore is a store that keeps results and takes marks in bulk.
type bulkResultStore interface {
	Store
	BulkMarker
}

// MarkUntil keeps the result of a live mark it lengthens, and drops that of
// an expired mark it replaces, on the memory store and on the SQLite store
// (whose results follow their mark's expiry).
func TestMarkUntilResults(t *testing.T) {
	for name, open := range map[string]func(t *testing.T, now func() time.Time) bulkResultStore{
		"memory": func(t *testing.T, now func() time.Time) bulkResultStore {
			return NewMemoryStore(MemoryConfig{Now: now})
		},
		"sqlite": func(t *testing.T, now func() time.Time) bulkResultStore {
			s, err := OpenSQLite(t.TempDir()+"/m.db", SQLiteConfig{Now: now, Location: time.UTC})
			require.NoError(t, err)
			return s
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			s := open(t, func() time.Time { return now })
			defer s.Close()
			live, old := Key{"qq", "live"}, Key{"qq", "old"}
			require.NoError(t, s.MarkResult(ctx, live, []byte("kept"), time.Minute))
			require.NoError(t, s.MarkResult(ctx, old, []byte("stale"), time.Second))
			now = now.Add(2 * time.Second)
			present, err := s.MarkUntil(ctx, []Key{live, old}, []time.Time{now.Add(time.Hour), now.Add(time.Hour)})
			require.NoError(t, err, "MarkUntil")
			require.Equal(t, 1, present, "MarkUntil: present")
			res, ok, _ := s.Result(ctx, live)
			assert.True(t, ok, "live mark's result")
			assert.Equal(t, "kept", string(res), "live mark's result")
			res, ok, _ = s.Result(ctx, old)
			assert.True(t, ok, "replaced expired mark's result")
			assert.Nil(t, res, "replaced expired mark's result")
		})
	}
}
