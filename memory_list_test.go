package dedupe

import (
	"strings"
	"testing"
	"time"
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
			if got := compareKeys(a, b); got != want {
				t.Errorf("compareKeys(%s, %s) = %d, want %d", a, b, got, want)
			}
			for _, s := range []string{b.String(), b.Channel, b.Channel + ":", b.String() + "x", ""} {
				if got, want := compareKeyText(a, s), strings.Compare(a.String(), s); got != want {
					t.Errorf("compareKeyText(%s, %q) = %d, want %d", a, s, got, want)
				}
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
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			s := open(t, func() time.Time { return now })
			defer s.Close()
			live, old := Key{"qq", "live"}, Key{"qq", "old"}
			if err := s.MarkResult(ctx, live, []byte("kept"), time.Minute); err != nil {
				t.Fatal(err)
			}
			if err := s.MarkResult(ctx, old, []byte("stale"), time.Second); err != nil {
				t.Fatal(err)
			}
			now = now.Add(2 * time.Second)
			present, err := s.MarkUntil(ctx, []Key{live, old}, []time.Time{now.Add(time.Hour), now.Add(time.Hour)})
			if err != nil || present != 1 {
				t.Fatalf("MarkUntil: %d present, %v", present, err)
			}
			if res, ok, _ := s.Result(ctx, live); !ok || string(res) != "kept" {
				t.Errorf("live mark's result %q, %v", res, ok)
			}
			if res, ok, _ := s.Result(ctx, old); !ok || res != nil {
				t.Errorf("replaced expired mark's result %q, %v", res, ok)
			}
		})
	}
}
