package dedupe_test

import (
	"path/filepath"
	"testing"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest"
)

func TestSQLiteConformance(t *testing.T) {
	dedupetest.Run(t, dedupetest.Config{
		New: func(t *testing.T, o dedupetest.Options) dedupe.Store {
			s, err := dedupe.OpenSQLite(filepath.Join(t.TempDir(), "dedupe.db"), dedupe.SQLiteConfig{TTL: o.TTL, Lease: o.Lease, Now: o.Now})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	})
}
