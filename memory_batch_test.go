package dedupe_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A batch of claims over MaxClaims takes as many as fit and refuses the
// rest, each alone with ErrStoreFull; a claim already held is taken again.
func TestMemoryClaimEachFull(t *testing.T) {
	st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: 100, MaxClaims: 3})
	ctx := context.Background()
	claims := make([]dedupe.Claim, 5)
	for i := range claims {
		claims[i] = dedupe.NewClaim(dedupe.Key{Channel: "full", MessageID: string(rune('a' + i))})
	}
	statuses, errs := st.ClaimEach(ctx, claims, time.Hour)
	held := 0
	for i := range claims {
		if errs[i] == nil {
			assert.Equal(t, dedupe.Claimed, statuses[i])
			held++
			continue
		}
		assert.ErrorIs(t, errs[i], dedupe.ErrStoreFull)
	}
	assert.Equal(t, 3, held)
	statuses, errs = st.ClaimEach(ctx, claims[:1], time.Hour)
	require.NoError(t, errs[0])
	assert.Equal(t, dedupe.Claimed, statuses[0], "its own claim again, with MaxClaims held")
	for _, err := range st.ReleaseEach(ctx, claims) {
		if err != nil {
			require.ErrorIs(t, err, dedupe.ErrNotOwner) // one not taken
		}
	}
	again := make([]dedupe.Claim, len(claims))
	for i, c := range claims {
		again[i] = dedupe.NewClaim(c.Key)
	}
	statuses, errs = st.ClaimEach(ctx, again, time.Hour)
	for i := range claims[:3] {
		require.NoError(t, errs[i])
		assert.Equal(t, dedupe.Claimed, statuses[i])
	}
	assert.True(t, errors.Is(errs[4], dedupe.ErrStoreFull))
}

// The batch calls allocate their answers and nothing per item: claims taken
// again by their tokens, leases renewed and keys marked again.
func TestMemoryEachAllocs(t *testing.T) {
	st := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	ctx := context.Background()
	claims := make([]dedupe.Claim, 64)
	marked := make([]dedupe.Key, 64)
	for i := range claims {
		claims[i] = dedupe.NewClaim(dedupe.Key{Channel: "allocs", MessageID: strconv.Itoa(i)})
		marked[i] = dedupe.Key{Channel: "allocs", MessageID: "m" + strconv.Itoa(i)}
	}
	st.ClaimEach(ctx, claims, time.Hour)
	st.MarkEach(ctx, marked, nil, time.Hour)
	for _, c := range []struct {
		name string
		want float64
		f    func()
	}{
		{"ClaimEach", 2, func() { st.ClaimEach(ctx, claims, time.Hour) }},
		{"ExtendEach", 1, func() { st.ExtendEach(ctx, claims, time.Hour) }},
		{"MarkEach", 1, func() { st.MarkEach(ctx, marked, nil, time.Hour) }},
	} {
		assert.LessOrEqual(t, testing.AllocsPerRun(100, c.f), c.want, c.name)
	}
}
