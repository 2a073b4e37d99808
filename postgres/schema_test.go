package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseTable(t *testing.T) {
	for _, tc := range []struct {
		name, want string // want "" for an error
	}{
		{"dedupe_keys", `"dedupe_keys"`},
		{"Dedupe_Keys2", `"Dedupe_Keys2"`},
		{"_x", `"_x"`},
		{"gateway.dedupe_keys", `"gateway"."dedupe_keys"`},
		{strings.Repeat("t", maxTableLen), `"` + strings.Repeat("t", maxTableLen) + `"`},
		{strings.Repeat("s", maxIdentLen) + ".t", `"` + strings.Repeat("s", maxIdentLen) + `"."t"`},
		{"", ""},
		{".t", ""},
		{"s.", ""},
		{"a.b.c", ""},
		{"1keys", ""},
		{"dedupe-keys", ""},
		{"dedupe keys", ""},
		{`keys"; DROP TABLE x; --`, ""},
		{"ключи", ""},
		{strings.Repeat("t", maxTableLen+1), ""},
		{strings.Repeat("s", maxIdentLen+1) + ".t", ""},
	} {
		ident, err := parseTable(tc.name)
		if tc.want == "" {
			if assert.Error(t, err, "parseTable(%q) = %s, want an error", tc.name, ident.Sanitize()) {
				assert.True(t, strings.HasPrefix(err.Error(), "dedupe: postgres: table name"), "parseTable(%q) error %q lacks its prefix", tc.name, err)
			}
		} else if assert.NoError(t, err, "parseTable(%q)", tc.name) {
			assert.Equal(t, tc.want, ident.Sanitize(), "parseTable(%q)", tc.name)
		}
	}
}

// incompatibleTables are tables the store's statements cannot use: how to
// create each, and what New's error must name.
var incompatibleTables = []struct {
	name, create, want string
}{
	{"timestamp without time zone",
		`(key text PRIMARY KEY, token text, expires_at timestamp NOT NULL)`,
		"column expires_at is timestamp without time zone, want timestamp with time zone"},
	{"varchar key",
		`(key varchar(300) PRIMARY KEY, token text, expires_at timestamptz NOT NULL)`,
		"column key is character varying(300), want text"},
	{"missing token",
		`(key text PRIMARY KEY, expires_at timestamptz NOT NULL)`,
		"no column token text"},
	{"token not null",
		`(key text PRIMARY KEY, token text NOT NULL, expires_at timestamptz NOT NULL)`,
		"column token is NOT NULL"},
	{"nullable expiry",
		`(key text PRIMARY KEY, token text, expires_at timestamptz)`,
		"column expires_at may be NULL"},
	{"no unique key",
		`(key text NOT NULL, token text, expires_at timestamptz NOT NULL)`,
		"no primary key or unique index on key alone"},
	{"composite key",
		`(key text, token text, expires_at timestamptz NOT NULL, PRIMARY KEY (key, expires_at))`,
		"no primary key or unique index on key alone"},
	{"required extra column",
		`(key text PRIMARY KEY, token text, expires_at timestamptz NOT NULL, owner text NOT NULL)`,
		"extra column owner is NOT NULL without a default"},
	{"another table",
		`(id bigserial PRIMARY KEY, payload jsonb)`,
		"no column key text; no column token text; no column expires_at timestamp with time zone"},
}

// TestIncompatibleTable checks that New refuses, with a message naming the
// problem, a table the store's statements cannot use.
func TestIncompatibleTable(t *testing.T) {
	pool := newPool(t, "", 0)
	admin := adminConn(t)
	ctx := context.Background()
	for _, tc := range incompatibleTables {
		t.Run(tc.name, func(t *testing.T) {
			table := testTable(t)
			_, err := admin.Exec(ctx, `CREATE TABLE `+table+` `+tc.create)
			require.NoError(t, err)
			s, err := New(ctx, pool, Config{Table: table})
			if err == nil {
				s.Close()
			}
			require.Error(t, err, "New on a table %s succeeded", tc.create)
			msg := err.Error()
			require.True(t, strings.HasPrefix(msg, `dedupe: postgres: table "`+table+`": exists with an incompatible shape`),
				"New error %q, want one naming %q", msg, tc.want)
			require.Contains(t, msg, tc.want, "New error")
			// Nothing was created beside the refused table.
			var indexes int
			require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE tablename = $1 AND indexname LIKE '%expires_at_idx'`, table).Scan(&indexes))
			require.Zero(t, indexes, "New created an index on the refused table")
		})
	}
	t.Run("view", func(t *testing.T) {
		table := testTable(t)
		_, err := admin.Exec(ctx, `CREATE VIEW `+table+` AS SELECT 'k'::text AS key, NULL::text AS token, now() AS expires_at`)
		require.NoError(t, err)
		t.Cleanup(func() { _, _ = admin.Exec(ctx, `DROP VIEW IF EXISTS `+table) })
		_, err = New(ctx, pool, Config{Table: table})
		require.ErrorContains(t, err, "is not a table", "New on a view")
	})
}

// TestMigratedTable checks that New accepts a table created by a migration in
// another compatible shape (a unique index instead of the primary key, the
// default collation, an extra column with a default, its own expiry index),
// upgrading it to version 2 (a result column) but adding no index.
func TestMigratedTable(t *testing.T) {
	pool := newPool(t, "", 0)
	admin := adminConn(t)
	ctx := context.Background()
	table := testTable(t)
	_, err := admin.Exec(ctx, `CREATE TABLE `+table+` (
	id bigserial PRIMARY KEY,
	key text NOT NULL UNIQUE,
	token text,
	expires_at timestamptz NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX `+table+`_exp ON `+table+` (expires_at, key)`)
	require.NoError(t, err)
	s := newTestStore(t, pool, Config{Table: table})
	k := dedupe.Key{Channel: "migrated", MessageID: "1"}
	_, cSt, err := claimNew(ctx, s, k, time.Minute)
	require.NoError(t, err, "Claim")
	require.Equal(t, dedupe.Claimed, cSt, "Claim")
	require.NoError(t, s.Mark(ctx, k, time.Hour))
	_, cSt, err = claimNew(ctx, s, k, time.Minute)
	require.NoError(t, err, "Claim of a marked key")
	require.Equal(t, dedupe.Duplicate, cSt, "Claim of a marked key")
	var indexes int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE tablename = $1`, table).Scan(&indexes))
	require.Equal(t, 3, indexes, "the table's indexes: want the migration's 3 untouched") // id, key, and the migration's expiry index
}

// TestSchemaQualified checks a table in a schema of its own, and that the
// index New creates is there.
func TestSchemaQualified(t *testing.T) {
	pool := newPool(t, "", 0)
	admin := adminConn(t)
	ctx := context.Background()
	schema := "dedupe_schema_" + randomHex(t, 4)
	_, err := admin.Exec(ctx, `CREATE SCHEMA `+schema)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), `DROP SCHEMA `+schema+` CASCADE`) })
	s := newTestStore(t, pool, Config{Table: schema + ".Keys"})
	k := dedupe.Key{Channel: "schema", MessageID: "1"}
	require.NoError(t, s.Mark(ctx, k, time.Hour))
	var n int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM `+schema+`."Keys"`).Scan(&n), "rows in %s.\"Keys\"", schema)
	require.Equal(t, 1, n, "rows in %s.\"Keys\"", schema)
	var index string
	require.NoError(t, admin.QueryRow(ctx, `SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND indexdef LIKE '%(expires_at)'`, schema).Scan(&index), "expiry index")
	require.Equal(t, "Keys"+indexSuffix, index, "expiry index")
	// A second instance on the existing table creates nothing new.
	s2 := newTestStore(t, pool, Config{Table: schema + ".Keys"})
	ok, err := s2.Exists(ctx, k)
	require.NoError(t, err, "Exists on the second instance")
	require.True(t, ok, "Exists on the second instance")
}
