package deduperedis_test

import (
	"os"
	"testing"

	"github.com/redis/go-redis/v9/logging"
)

// TestMain silences go-redis's own log: the fault tests cut connections and
// stop servers on purpose, and check every error the callers see.
func TestMain(m *testing.M) {
	logging.Disable()
	os.Exit(m.Run())
}
