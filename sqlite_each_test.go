package dedupe_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// A read-only store refuses every valid item of a batch with ErrReadOnly,
// an invalid one as such, and leaves NekoBot's file as it was.
func TestSQLiteEachReadOnly(t *testing.T) {
	path := nekobotFixture(t)
	before := fileState(t, path)
	s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{ReadOnly: true, Location: time.UTC,
		Now: func() time.Time { return sqliteT0 }})
	require.NoError(t, err)
	ctx := context.Background()
	claims := []dedupe.Claim{
		dedupe.NewClaim(dedupe.Key{Channel: "qq", MessageID: "9"}),
		dedupe.NewClaim(dedupe.Key{Channel: "qq"}),
		dedupe.NewClaim(dedupe.Key{Channel: "qq", MessageID: "1001"}),
	}
	want := []error{dedupe.ErrReadOnly, dedupe.ErrInvalidKey, dedupe.ErrReadOnly}
	statuses, errs := s.ClaimEach(ctx, claims, 0)
	for i := range claims {
		assert.ErrorIs(t, errs[i], want[i], "ClaimEach: item %d", i)
		assert.Zero(t, statuses[i], "ClaimEach: item %d", i)
	}
	for name, errs := range map[string][]error{
		"ExtendEach":  s.ExtendEach(ctx, claims, 0),
		"ReleaseEach": s.ReleaseEach(ctx, claims),
		"MarkEach":    s.MarkEach(ctx, []dedupe.Key{claims[0].Key, claims[1].Key, claims[2].Key}, nil, 0),
	} {
		for i := range claims {
			assert.ErrorIs(t, errs[i], want[i], "%s: item %d", name, i)
		}
	}
	require.NoError(t, s.Close())
	assert.Equal(t, before, fileState(t, path), "the file changed")
}

// MarkEach writes the rows Mark writes, in NekoBot's table and format, and
// a batch longer than one call of the writer (500 items) is written whole.
func TestSQLiteMarkEachRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{Location: time.UTC, Now: func() time.Time { return sqliteT0 }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	one := dedupe.Key{Channel: "qq", MessageID: "one"}
	require.NoError(t, s.Mark(ctx, one, time.Hour))
	keys := make([]dedupe.Key, 1201)
	for i := range keys {
		keys[i] = dedupe.Key{Channel: "qq", MessageID: "each-" + time.Duration(i).String()}
	}
	for i, err := range s.MarkEach(ctx, keys, nil, time.Hour) {
		require.NoError(t, err, "item %d", i)
	}
	db := rawDB(t, path)
	var n int
	require.NoError(t, db.QueryRow("SELECT count(*) FROM gateway_dedupe WHERE message_id LIKE 'each-%'").Scan(&n))
	assert.Equal(t, len(keys), n)
	row := func(k dedupe.Key) (ch, id, created, expires string) {
		require.NoError(t, db.QueryRow("SELECT channel_id, message_id, created_at, expires_at FROM gateway_dedupe WHERE dedupe_key = ?",
			k.String()).Scan(&ch, &id, &created, &expires))
		return ch, id, created, expires
	}
	_, _, created, expires := row(one)
	ch, id, eCreated, eExpires := row(keys[1200])
	assert.Equal(t, []string{"qq", keys[1200].MessageID, created, expires}, []string{ch, id, eCreated, eExpires})
}
