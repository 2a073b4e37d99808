package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// Every secret of a store URL is redacted: the user part's password, and
// the value of every query parameter but the harmless ones.
func TestRedactURLSecrets(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:secret@h/db?sslmode=disable&sslpassword=secret2":        "postgres://u:xxxxx@h/db?sslmode=disable&sslpassword=xxxxx",
		"postgres://u@h/db?sslkey=/home/u/secret.key&token=secret&table=t":    "postgres://u@h/db?sslkey=xxxxx&token=xxxxx&table=t",
		"postgresql://u@h/db?Password=secret&password=secret&x=1&api_key=sec": "postgresql://u@h/db?Password=xxxxx&password=xxxxx&x=xxxxx&api_key=xxxxx",
		"redis://user:secret@127.0.0.1:6379/0?prefix=p:&db=2":                 "redis://user:xxxxx@127.0.0.1:6379/0?prefix=p:&db=2",
		"unix:///run/redis.sock?db=1&password=secret":                         "unix:///run/redis.sock?db=1&password=xxxxx",
		"sqlite:/var/gateway.db?tz=UTC&key=secret":                            "sqlite:/var/gateway.db?tz=UTC&key=xxxxx",
		"memory:snap.bin?max_size=9&token=secret":                             "memory:snap.bin?max_size=9&token=xxxxx",
		"postgres://u:secret@h:port/db":                                       "(unparsable URL)",
		"no URL at all":                                                       "no URL at all",
	} {
		got := redactURL(in)
		assert.Equal(t, want, got, "redactURL(%q)", in)
		assert.NotContains(t, got, "secret", "redactURL(%q)", in)
	}
}

// secretURL returns url (PostgreSQL, trust authentication) with a password
// in its user part and secrets in its query that pgx takes (password,
// sslpassword: ignored without a password asked or sslkey given).
func secretURL(t *testing.T, url string) (string, []string) {
	secrets := []string{"pw-" + randomID(t), "sslpw-" + randomID(t), "qpw-" + randomID(t)}
	url = strings.Replace(url, "://postgres@", "://postgres:"+secrets[0]+"@", 1)
	require.Contains(t, url, secrets[0], "the DSN's user is postgres")
	return url + "&sslpassword=" + secrets[1] + "&password=" + secrets[2], secrets
}

// assertNoSecret fails if any output of a command holds a secret.
func assertNoSecret(t *testing.T, secrets []string, outputs ...string) {
	t.Helper()
	for _, s := range secrets {
		for _, out := range outputs {
			assert.NotContains(t, out, s, "a secret of the URL is printed:\n%s", out)
		}
	}
}

// forget, stats and migrate print no secret of a store URL: forget's audit
// log names the store redacted, the outputs of stats and migrate and the
// errors of a URL that does not open hold none.
func TestCommandsPrintNoSecret(t *testing.T) {
	url, secrets := secretURL(t, postgresURL(t))
	ctx := context.Background()
	s, err := openStore(ctx, url, dest)
	require.NoError(t, err, "open")
	k := dedupe.Key{Channel: "telegram", MessageID: "42"}
	require.NoError(t, s.Mark(ctx, k, time.Hour))
	require.NoError(t, s.close())

	t.Run("forget", func(t *testing.T) {
		code, out, errOut := runCmd(t, "forget", "-store", url, k.String())
		require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
		checkAuditLine(t, errOut, k, time.Now().Add(-time.Minute))
		assert.Contains(t, errOut, "sslpassword=xxxxx&password=xxxxx")
		assertNoSecret(t, secrets, out, errOut)
	})
	t.Run("forget from the environment", func(t *testing.T) {
		t.Setenv(storeEnv, url)
		code, out, errOut := runCmd(t, "forget", "qq:1")
		require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
		assertNoSecret(t, secrets, out, errOut)
	})
	t.Run("stats", func(t *testing.T) {
		code, out, errOut := runCmd(t, "stats", url)
		require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
		assertNoSecret(t, secrets, out, errOut)
	})
	t.Run("migrate", func(t *testing.T) {
		f := writeNekoFile(t, 50, 10)
		for _, args := range [][]string{
			{"--from", f.url(), "--to", url},
			{"--from=" + f.url(), "--to=" + url, "--dry-run"},
			{"--from", url, "--to", "sqlite:" + filepath.Join(t.TempDir(), "copy.db")},
		} {
			args = append([]string{"migrate", "--checkpoint", filepath.Join(t.TempDir(), "cp.json")}, args...)
			code, out, errOut := runCmd(t, args...)
			require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
			assertNoSecret(t, secrets, out, errOut)
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, bad := range []string{
			strings.Replace(url, "@127.0.0.1:5432", "@127.0.0.1:notaport", 1), // url.Parse quotes it
			strings.Replace(url, "table=", "table=no%zz", 1),                  // a query that does not parse
			"redis://:" + secrets[0] + "@127.0.0.1:1/0?token=" + secrets[1],   // an option go-redis refuses
			"sqlite:/nonexistent/" + randomID(t) + ".db?key=" + secrets[1],    // a file that is not there
		} {
			for _, args := range [][]string{{"stats", bad}, {"forget", "-store", bad, "qq:1"}, {"migrate", "--from", bad, "--to", "memory:x"}} {
				code, out, errOut := runCmd(t, args...)
				assert.NotEqual(t, exitOK, code, "%v", args)
				assertNoSecret(t, secrets, out, errOut)
			}
		}
	})
}
