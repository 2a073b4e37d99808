package postgres

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SchemaVersion is the version of the table that this release of the
// package creates and uses. New records it in the table's comment, upgrades
// a table of an older version in place, keeping its marks and claims, and
// refuses a table of a newer version, which a later release made.
//
// Version 1, the table of the first release:
//
//	CREATE TABLE dedupe_keys (
//		key text COLLATE "C" PRIMARY KEY,
//		token text,
//		expires_at timestamptz NOT NULL
//	);
//
// Version 2 adds the result kept with a mark ([Store.MarkResult]) and
// records the version. A deployment whose store's role may not ALTER the
// table upgrades it from version 1 with (one transaction; the ALTER is a
// change of the catalog only, with no rewrite of the table):
//
//	BEGIN;
//	ALTER TABLE dedupe_keys ADD COLUMN IF NOT EXISTS result bytea;
//	COMMENT ON TABLE dedupe_keys IS 'github.com/gatewaykit/dedupe/postgres schema version 2';
//	COMMIT;
//
// Instances of the previous release go on working on a version 2 table, but
// their Marks leave a kept result in place: while they run beside this
// release, a key marked again after its mark expired may show the result of
// its earlier mark.
const SchemaVersion = 2

// upgrades[v] is the SQL that upgrades a table of version v to v+1; %[1]s
// is the table's quoted name. The SQL in the documentation of
// [SchemaVersion] is the same (TestUpgradeSQLDocumented).
var upgrades = map[int]string{
	1: `ALTER TABLE %[1]s ADD COLUMN IF NOT EXISTS result bytea;
COMMENT ON TABLE %[1]s IS '` + versionPrefix + `2'`,
}

// versionPrefix starts the table comment recording the version.
const versionPrefix = "github.com/gatewaykit/dedupe/postgres schema version "

// versionRE reads the version, and the partitions' span in minutes, out of a
// table comment.
var versionRE = regexp.MustCompile(`github\.com/gatewaykit/dedupe/postgres schema version ([0-9]+)(?:; partitions of ([0-9]+) minutes)?`)

// versionComment returns the comment of a table of the current version; a
// partitioned one (spanMinutes > 0) also records its partitions' span.
func versionComment(spanMinutes int64) string {
	c := versionPrefix + strconv.Itoa(SchemaVersion)
	if spanMinutes > 0 {
		c += fmt.Sprintf("; partitions of %d minutes", spanMinutes)
	}
	return c
}

// checkVersion reads the table's version and upgrades an older one in tx,
// or refuses a newer one. A table without a recorded version is version 1,
// unless it has the result column (a migration made it as version 2).
// pt, for the partitioned layout, also checks the span the table records.
func checkVersion(ctx context.Context, tx pgx.Tx, name string, pt *partitions) error {
	var comment string
	var hasResult bool
	if err := tx.QueryRow(ctx, `SELECT coalesce(obj_description(to_regclass($1), 'pg_class'), ''),
	EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'result' AND NOT attisdropped)`,
		name).Scan(&comment, &hasResult); err != nil {
		return err
	}
	version, spanMinutes := 1, int64(0)
	if m := versionRE.FindStringSubmatch(comment); m != nil {
		version, _ = strconv.Atoi(m[1])
		spanMinutes, _ = strconv.ParseInt(m[2], 10, 64)
	} else if hasResult {
		version = SchemaVersion
	}
	if version > SchemaVersion {
		return fmt.Errorf("has schema version %d, newer than version %d of this release of "+
			"github.com/gatewaykit/dedupe/postgres: upgrade the module, or set Config.Table to another table",
			version, SchemaVersion)
	}
	for v := version; v < SchemaVersion; v++ {
		sql := fmt.Sprintf(upgrades[v], name)
		if _, err := tx.Exec(ctx, sql); err != nil {
			return upgradeError(v, sql, err)
		}
	}
	if pt != nil {
		return pt.checkSpan(spanMinutes)
	}
	return nil
}

// upgradeError is the error of the upgrade from version v that failed with
// err, telling a role without the privilege what to have run.
func upgradeError(v int, sql string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
		return fmt.Errorf("upgrade from schema version %d to %d: %w; have a role that may alter the table run:\n%s",
			v, v+1, err, sql)
	}
	return fmt.Errorf("upgrade from schema version %d to %d: %w", v, v+1, err)
}
