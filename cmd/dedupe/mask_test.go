package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupelog"
)

// With $DEDUPE_MASK_KEY set, forget's audit records hold the key masked as
// the gateway's dedupelog.Mask masks it (hashed, so that they match the
// gateway's records), and neither forget's nor stats's records hold the raw
// id; without it, the audit record names the key.
func TestForgetMasksAuditRecords(t *testing.T) {
	ctx := context.Background()
	url := "sqlite:" + filepath.Join(t.TempDir(), "gateway.db")
	k := dedupe.Key{Channel: "telegram", MessageID: "-100987654:4242"}
	s, err := openStore(ctx, url, dest)
	require.NoError(t, err)
	require.NoError(t, s.Mark(ctx, k, time.Hour))
	require.NoError(t, s.close())

	const secret = "the gateway's masking key"
	t.Setenv(maskEnv, secret)
	code, out, errOut := runCmd(t, "forget", "-store", url, k.String())
	require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
	want := dedupelog.NewMasker(dedupelog.Hash, []byte(secret)).Key(k.Channel, k.MessageID)
	assert.Contains(t, errOut, "key="+want, "the audit record's key is the gateway's masked key")
	assert.NotContains(t, errOut, "100987654", "the audit record holds the raw id")
	assert.NotContains(t, errOut, "4242")

	code, out, errOut = runCmd(t, "stats", url)
	require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
	assert.NotContains(t, out+errOut, "100987654")
}
