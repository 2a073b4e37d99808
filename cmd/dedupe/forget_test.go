package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// "dedupe forget" on each kind of store drops the marks (and results) of the
// keys given, says "absent" of a key without one, leaves the other keys
// alone, logs each mark it dropped with who and when, and refuses, with exit
// status 1, a key whose claim is live, which keeps its claim.
func TestForgetEachStore(t *testing.T) {
	for _, c := range []struct {
		name, url string
		claims    bool // the store keeps claims across processes (a snapshot does not)
	}{
		{"sqlite", "sqlite:" + filepath.Join(t.TempDir(), "gateway.db"), true},
		{"memory", "memory:" + filepath.Join(t.TempDir(), "marks.snapshot"), false},
		{"redis", redisURL(t), true},
		{"postgres", postgresURL(t), true},
		{"postgres-partitioned", postgresURL(t) + "&partitioned=true", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			testForgetStore(t, c.url, c.claims)
		})
	}
}

func testForgetStore(t *testing.T, url string, keepsClaims bool) {
	ctx := context.Background()
	gone := dedupe.Key{Channel: "telegram", MessageID: "-100123:42"}
	kept := dedupe.Key{Channel: "telegram", MessageID: "-100123:43"}
	held := dedupe.Key{Channel: "qq", MessageID: "7"}
	absent := dedupe.Key{Channel: "qq", MessageID: "8"}
	s, err := openStore(ctx, url, dest)
	require.NoError(t, err, "open")
	require.NoError(t, s.MarkResult(ctx, gone, []byte("reply"), time.Hour), "mark")
	require.NoError(t, s.Mark(ctx, kept, time.Hour), "mark")
	c := dedupe.NewClaim(held)
	status, err := s.Claim(ctx, c, time.Hour)
	require.NoError(t, err, "claim")
	require.Equal(t, dedupe.Claimed, status)
	require.NoError(t, s.close(), "close")

	before := time.Now()
	code, out, errOut := runCmd(t, "forget", "-store", url, gone.String(), absent.String())
	require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
	assert.Contains(t, out, "forgotten "+gone.String()+"\n")
	assert.Contains(t, out, "absent    "+absent.String()+":")
	checkAuditLine(t, errOut, gone, before)
	assert.NotContains(t, errOut, absent.String(), "a key with no mark is not logged")

	code, out, errOut = runCmd(t, "forget", "-store", url, held.String(), kept.String())
	if keepsClaims {
		require.Equal(t, exitFailure, code, "a live claim refuses; output:\n%s%s", out, errOut)
		assert.Contains(t, out, "refused   "+held.String()+":")
		assert.Contains(t, errOut, "1 of 2 keys")
	} else {
		require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
		assert.Contains(t, out, "absent    "+held.String()+":")
	}
	assert.Contains(t, out, "forgotten "+kept.String()+"\n", "the key after a refused one is forgotten")

	s, err = openStore(ctx, url, dest)
	require.NoError(t, err, "open")
	defer s.close()
	for _, k := range []dedupe.Key{gone, kept} {
		ok, err := s.Exists(ctx, k)
		require.NoError(t, err)
		assert.False(t, ok, "%s is marked after forget", k)
		_, marked, err := s.Result(ctx, k)
		require.NoError(t, err)
		assert.False(t, marked, "%s has a result after forget", k)
	}
	if keepsClaims {
		require.NoError(t, s.Extend(ctx, c, time.Hour), "the refused key's claim still holds")
	}
	status, err = s.Claim(ctx, dedupe.NewClaim(gone), time.Hour)
	require.NoError(t, err)
	assert.Equal(t, dedupe.Claimed, status, "a forgotten key is processed again")
}

// checkAuditLine checks that errOut holds one log record of key forgotten,
// with its time (at or after before), the user and the store's backend.
func checkAuditLine(t *testing.T, errOut string, key dedupe.Key, before time.Time) {
	t.Helper()
	var line string
	for l := range strings.Lines(errOut) {
		if strings.Contains(l, "key="+key.String()) {
			require.Empty(t, line, "two records of %s:\n%s", key, errOut)
			line = l
		}
	}
	require.NotEmpty(t, line, "no record of %s:\n%s", key, errOut)
	for _, want := range []string{"level=WARN", "msg=\"" + msgForgot + "\"", "user=", "host=", "backend="} {
		assert.Contains(t, line, want)
	}
	_, rest, ok := strings.Cut(line, "time=")
	require.True(t, ok, "no time in %q", line)
	at, err := time.Parse(time.RFC3339Nano, strings.Fields(rest)[0])
	require.NoError(t, err, "time of %q", line)
	assert.False(t, at.Before(before.Truncate(time.Millisecond)), "logged at %v, before the command ran (%v)", at, before)
}

// forget refuses a command line it cannot act on before opening any store:
// no store, no key, an invalid key, a file that does not exist.
func TestForgetUsage(t *testing.T) {
	t.Setenv(storeEnv, "")
	db := "sqlite:" + filepath.Join(t.TempDir(), "gateway.db")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"forget", "qq:1"}, exitUsage, "needs -store"},
		{[]string{"forget", "-store", db}, exitUsage, "at least one key"},
		{[]string{"forget", "-store", db, "qq:1", "nochannel"}, exitUsage, `key "nochannel"`},
		{[]string{"forget", "-store", db, "qq:1"}, exitFailure, "no such file"},
		{[]string{"forget", "-store", "memory:" + filepath.Join(t.TempDir(), "none"), "qq:1"}, exitFailure, "no such file"},
	} {
		code, out, errOut := runCmd(t, c.args...)
		assert.Equal(t, c.code, code, "%q: output:\n%s%s", c.args, out, errOut)
		assert.Contains(t, errOut, c.want, "%q", c.args)
	}
	_, err := os.Stat(strings.TrimPrefix(db, "sqlite:"))
	assert.True(t, os.IsNotExist(err), "forget created the file it was refused")

	// $DEDUPE_STORE names the store when -store is not given.
	s := open(t, db)
	require.NoError(t, s.Mark(context.Background(), dedupe.Key{Channel: "qq", MessageID: "1"}, time.Hour))
	require.NoError(t, s.close())
	t.Setenv(storeEnv, db)
	code, out, errOut := runCmd(t, "forget", "qq:1")
	require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
	assert.Contains(t, out, "forgotten qq:1\n")
}

// The store's URL is logged without its password.
func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:secret@h/db?sslmode=disable":   "postgres://u:xxxxx@h/db?sslmode=disable",
		"postgres://u@h/db?password=secret&table=t":  "postgres://u@h/db?password=xxxxx&table=t",
		"redis://:secret@127.0.0.1:6379/0?prefix=p:": "redis://:xxxxx@127.0.0.1:6379/0?prefix=p:",
		"sqlite:/var/gateway.db":                     "sqlite:/var/gateway.db",
	} {
		got := redactURL(in)
		assert.Equal(t, want, got, "redactURL(%q)", in)
		assert.NotContains(t, got, "secret")
	}
}
