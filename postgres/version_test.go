package postgres

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// v1Table is the DDL of the table of the previous release, schema version 1.
const v1Table = `CREATE TABLE %[1]s (
	key text COLLATE "C" PRIMARY KEY,
	token text,
	expires_at timestamptz NOT NULL
);
CREATE INDEX %[1]s_expires_at_idx ON %[1]s (expires_at)`

// TestUpgradeFromV1 fills a table of version 1, as the previous release
// made and wrote it, with marks, claims, fences and expired rows, and starts
// four instances of this release on it at once: each upgrades it or finds it
// upgraded, and every mark and claim is still there, with its expiry.
func TestUpgradeFromV1(t *testing.T) {
	admin := adminConn(t)
	ctx := context.Background()
	table := testTable(t)
	_, err := admin.Exec(ctx, fmt.Sprintf(v1Table, table))
	require.NoError(t, err)
	const n = 50
	rows := []struct{ prefix, token, expiry string }{
		{"mark", "NULL", "now() + interval '1 hour'"},
		{"claim", "'tok' || i", "now() + interval '5 minutes'"},
		{"fenced", "' tok' || i", "now() + interval '5 minutes'"},
		{"expired", "NULL", "now() - interval '1 minute'"},
	}
	for _, r := range rows {
		_, err = admin.Exec(ctx, `INSERT INTO `+table+` SELECT '`+r.prefix+`:' || i, `+r.token+`, `+r.expiry+`
FROM generate_series(1, `+fmt.Sprint(n)+`) i`)
		require.NoError(t, err)
	}
	var before string
	require.NoError(t, admin.QueryRow(ctx, `SELECT string_agg(key || coalesce(token, '-') || expires_at::text, ',' ORDER BY key) FROM `+table).Scan(&before))

	stores := startInstances(t, 4, table, Config{}, newRecorder())

	var after, comment string
	require.NoError(t, admin.QueryRow(ctx, `SELECT string_agg(key || coalesce(token, '-') || expires_at::text, ',' ORDER BY key),
	obj_description($1::regclass, 'pg_class') FROM `+table, table).Scan(&after, &comment))
	require.Equal(t, before, after, "the upgrade changed the rows")
	require.Equal(t, versionPrefix+"2", comment, "comment after the upgrade, want version 2 recorded")
	for i, s := range stores {
		for j := 1; j <= n; j++ {
			key := func(p string) dedupe.Key { return dedupe.Key{Channel: p, MessageID: fmt.Sprint(j)} }
			ok, err := s.Exists(ctx, key("mark"))
			require.NoError(t, err, "instance %d: Exists(mark:%d)", i, j)
			require.True(t, ok, "instance %d: Exists(mark:%d)", i, j)
			_, ok, err = s.Result(ctx, key("mark"))
			require.NoError(t, err, "instance %d: Result(mark:%d)", i, j)
			require.True(t, ok, "instance %d: Result(mark:%d)", i, j)
			ok, err = s.Exists(ctx, key("expired"))
			require.NoError(t, err, "instance %d: Exists(expired:%d)", i, j)
			require.False(t, ok, "instance %d: Exists(expired:%d)", i, j)
			_, st, err := claimNew(ctx, s, key("claim"), time.Minute)
			require.NoError(t, err, "instance %d: Claim of claim:%d with another token", i, j)
			require.Equal(t, dedupe.InFlight, st, "instance %d: Claim of claim:%d with another token", i, j)
			fenced := dedupe.Claim{Key: key("fenced"), Token: fmt.Sprint("tok", j)}
			st, err = s.Claim(ctx, fenced, time.Minute)
			require.NoError(t, err, "instance %d: Claim of fenced:%d with its fenced token", i, j)
			require.Equal(t, dedupe.InFlight, st, "instance %d: Claim of fenced:%d with its fenced token", i, j)
		}
	}
	for j := 1; j <= n; j++ { // the claims' holders still hold them
		c := dedupe.Claim{Key: dedupe.Key{Channel: "claim", MessageID: fmt.Sprint(j)}, Token: fmt.Sprint("tok", j)}
		require.NoError(t, stores[j%4].Extend(ctx, c, time.Minute), "Extend of the claim of version 1 %s", c.Key)
	}
}

// TestNewerVersion checks that New refuses a table a later release made,
// naming both versions, and leaves it alone.
func TestNewerVersion(t *testing.T) {
	admin := adminConn(t)
	ctx := context.Background()
	table := testTable(t)
	_, err := admin.Exec(ctx, `CREATE TABLE `+table+` (key text PRIMARY KEY, token text, expires_at timestamptz NOT NULL, result bytea, extra int);
COMMENT ON TABLE `+table+` IS '`+versionPrefix+`3'`)
	require.NoError(t, err)
	_, err = New(ctx, newPool(t, "", 1), Config{Table: table})
	want := `dedupe: postgres: table "` + table + `": has schema version 3, newer than version 2 of this release`
	require.Error(t, err, "New on a table of version 3: want %q", want)
	require.True(t, strings.HasPrefix(err.Error(), want), "New on a table of version 3 = %v, want %q", err, want)
}

// TestUpgradeWithoutPrivilege opens a table of version 1 with a role that
// may read and write it but not alter it: New fails with the SQL of the
// upgrade, which, run by the owner, lets the role open it.
func TestUpgradeWithoutPrivilege(t *testing.T) {
	admin := adminConn(t)
	ctx := context.Background()
	table := testTable(t)
	role := "dedupe_role_" + randomHex(t, 4)
	_, err := admin.Exec(ctx, fmt.Sprintf(v1Table, table)+`;
CREATE ROLE `+role+` LOGIN;
GRANT SELECT, INSERT, UPDATE, DELETE ON `+table+` TO `+role)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), `DROP OWNED BY `+role+`; DROP ROLE `+role)
	})
	cfg, err := pgxpool.ParseConfig(testDSN(t))
	require.NoError(t, err)
	cfg.ConnConfig.User = role
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = New(ctx, pool, Config{Table: table})
	sql := fmt.Sprintf(upgrades[1], `"`+table+`"`)
	require.ErrorContains(t, err, "upgrade from schema version 1 to 2", "New with a role that may not alter the table")
	require.ErrorContains(t, err, sql, "New with a role that may not alter the table: want the upgrade's SQL")
	_, err = admin.Exec(ctx, sql)
	require.NoError(t, err)
	s := newTestStore(t, pool, Config{Table: table})
	require.NoError(t, s.MarkResult(ctx, testKey(t, "role"), []byte("r"), time.Minute))
}

// TestUpgradeSQLDocumented checks that the documentation of SchemaVersion
// shows the SQL of each upgrade, as the store runs it.
func TestUpgradeSQLDocumented(t *testing.T) {
	src, err := os.ReadFile("version.go")
	require.NoError(t, err)
	doc := string(src)
	for v := 1; v < SchemaVersion; v++ {
		for line := range strings.SplitSeq(fmt.Sprintf(upgrades[v], DefaultTable), "\n") {
			assert.True(t, strings.Contains(doc, "//\t"+line+";\n") || strings.Contains(doc, "//\t"+line+"\n"),
				"the documentation of SchemaVersion lacks the upgrade from %d: %s", v, line)
		}
	}
}

// TestLayoutMismatch checks that New refuses a plain table opened as
// partitioned, a partitioned one opened as plain, and partitions of another
// span, with errors saying which.
func TestLayoutMismatch(t *testing.T) {
	pool := newPool(t, "", 2)
	ctx := context.Background()
	plain, parted := testTable(t), testTable(t)
	newTestStore(t, pool, Config{Table: plain})
	newTestStore(t, pool, Config{Table: parted, Partitioned: true})
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Table: plain, Partitioned: true}, "is a plain table, but Config.Partitioned asks for a table partitioned by expires_at"},
		{Config{Table: parted}, "is partitioned, but Config.Partitioned is false"},
		{Config{Table: parted, Partitioned: true, PartitionSpan: time.Hour}, "has partitions of 24h0m0s, but Config.PartitionSpan is 1h0m0s"},
	} {
		_, err := New(ctx, pool, tc.cfg)
		assert.ErrorContains(t, err, tc.want, "New(%+v)", tc.cfg)
	}
	_, err := New(ctx, pool, Config{Partitioned: true, PartitionSpan: 90 * time.Second})
	assert.ErrorContains(t, err, "not a whole number of minutes", "New with a span of 90 s")
}

// TestMigrationSQL creates tables of both layouts with the statements of
// MigrationSQL, as a migration would, and checks that New accepts each and
// creates nothing more.
func TestMigrationSQL(t *testing.T) {
	admin := adminConn(t)
	ctx := context.Background()
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			cfg := l.cfg
			cfg.Table = "public." + testTable(t)
			stmts, err := MigrationSQL(cfg)
			require.NoError(t, err)
			for _, sql := range stmts {
				_, err := admin.Exec(ctx, sql)
				require.NoError(t, err, sql)
			}
			objects := func() (n int) {
				require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname LIKE $1`,
					cfg.Table[len("public."):]+"%").Scan(&n))
				return n
			}
			before := objects()
			s := newTestStore(t, newPool(t, "", 1), cfg)
			require.Equal(t, before, objects(), "relations after New on the migrated table")
			require.NoError(t, s.MarkResult(ctx, testKey(t, "migration"), []byte("r"), time.Minute))
		})
	}
	_, err := MigrationSQL(Config{Partitioned: true})
	assert.ErrorContains(t, err, `"public.dedupe_keys"`, "MigrationSQL of an unqualified partitioned table: want an error asking for the schema")
}
