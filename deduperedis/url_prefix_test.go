package deduperedis_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
)

// OpenURL takes the dedupe command's prefix= option (docs/urls.md): the
// store's keys get that prefix, and go-redis never sees the option.
func TestOpenURLPrefix(t *testing.T) {
	addr := redisAddr(t)
	prefix := "dedupe-url-test:" + randomID(t) + ":"
	ctx := context.Background()
	for _, raw := range []string{
		"redis://" + addr + "/0?prefix=" + prefix,
		"redis://" + addr + "/0?prefix=" + prefix + "&dial_timeout=3s",
	} {
		s, err := deduperedis.OpenURL(raw, deduperedis.Config{})
		require.NoError(t, err, raw)
		k := dedupe.Key{Channel: "qq", MessageID: "1"}
		require.NoError(t, s.Mark(ctx, k, time.Minute))
		require.NoError(t, s.Close())

		c := redis.NewClient(&redis.Options{Addr: addr})
		n, err := c.Exists(ctx, prefix+"qq:1").Result()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, "%s: no key %sqq:1", raw, prefix)
		c.Del(ctx, prefix+"qq:1")
		_ = c.Close()
	}
}
