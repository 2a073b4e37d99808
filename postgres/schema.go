package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	maxIdentLen = 63 // PostgreSQL's NAMEDATALEN - 1
	indexSuffix = "_expires_at_idx"
	// maxTableLen leaves room for the names made from the table's: the
	// index, table name plus indexSuffix, and the partitions and the function
	// of the partitioned layout, whose suffixes are no longer.
	maxTableLen = maxIdentLen - len(indexSuffix)
)

// parseTable checks a table name of [Config.Table] and splits it into an
// identifier that pgx quotes.
func parseTable(name string) (pgx.Identifier, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return nil, fmt.Errorf("dedupe: postgres: table name %q: want table or schema.table", name)
	}
	for i, p := range parts {
		limit := maxIdentLen
		if i == len(parts)-1 {
			limit = maxTableLen
		}
		if err := checkIdent(p, limit); err != nil {
			return nil, fmt.Errorf("dedupe: postgres: table name %q: %w", name, err)
		}
	}
	return pgx.Identifier(parts), nil
}

func checkIdent(s string, limit int) error {
	switch {
	case s == "":
		return errors.New("empty part")
	case len(s) > limit:
		return fmt.Errorf("%q is longer than %d bytes", s, limit)
	case s[0] >= '0' && s[0] <= '9':
		return fmt.Errorf("%q starts with a digit", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return fmt.Errorf("%q holds %q: only ASCII letters, digits and '_' are allowed", s, c)
		}
	}
	return nil
}

// ensureSchema creates the table (and its expiry index, or for the
// partitioned layout its key index, function and first partitions) if it is
// missing, upgrades an older version of it in place, and checks its layout and
// shape, in one transaction holding an advisory lock on the table's name, so
// that instances starting together neither race on CREATE nor upgrade twice.
// An existing table of the current version is only read, so a role without
// the CREATE privilege can use a table made by a migration. pt is nil for the
// plain layout. readOnly ([Config.ReadOnly]) only checks, in a read-only
// transaction: a missing table is an error, and no index or partition is
// created.
func ensureSchema(ctx context.Context, pool *pgxpool.Pool, ident pgx.Identifier, pt *partitions, readOnly bool) (err error) {
	name := ident.Sanitize()
	defer func() {
		if err != nil {
			err = fmt.Errorf("dedupe: postgres: table %s: %w", name, err)
		}
	}()
	mode := pgx.ReadWrite
	if readOnly {
		mode = pgx.ReadOnly
	}
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{AccessMode: mode})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`,
		"github.com/gatewaykit/dedupe/postgres "+name); err != nil {
		return err
	}
	var kind string
	if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT relkind::text FROM pg_class WHERE oid = to_regclass($1)), '')`, name).Scan(&kind); err != nil {
		return err
	}
	switch kind {
	case "":
		if readOnly {
			return errors.New("does not exist")
		}
		if err := createTable(ctx, tx, ident, pt); err != nil {
			return err
		}
		kind = "r"
		if pt != nil {
			kind = "p"
		}
	case "r", "p":
	default:
		return fmt.Errorf("exists but is not a table (relkind %q)", kind)
	}
	if err := checkLayout(ctx, tx, name, kind, pt); err != nil {
		return err
	}
	if err := checkVersion(ctx, tx, name, pt); err != nil {
		return err
	}
	if err := checkShape(ctx, tx, name, pt != nil); err != nil {
		return err
	}
	switch {
	case pt != nil && readOnly:
		err = pt.resolve(ctx, tx)
	case pt != nil:
		err = pt.check(ctx, tx)
	case !readOnly:
		err = ensureExpiryIndex(ctx, tx, ident)
	}
	if err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// createTable creates the table of the current schema version.
func createTable(ctx context.Context, tx pgx.Tx, ident pgx.Identifier, pt *partitions) error {
	if pt != nil {
		return pt.create(ctx, tx)
	}
	for _, sql := range plainCreateSQL(ident)[:2] { // New makes the index after checking the table
		if _, err := tx.Exec(ctx, sql); err != nil {
			return fmt.Errorf("create: %w", err)
		}
	}
	return nil
}

// plainCreateSQL returns the statements creating the plain table, its
// comment and its expiry index.
//
// key is the text form of a dedupe.Key ("telegram:123"). token is NULL for a
// mark and the claim's token for a claim. result is the result kept with a
// mark, NULL for none. The "C" collation compares bytes, which is both exact
// and the fastest.
func plainCreateSQL(ident pgx.Identifier) []string {
	name := ident.Sanitize()
	return []string{
		`CREATE TABLE ` + name + ` (
	key text COLLATE "C" PRIMARY KEY,
	token text,
	expires_at timestamptz NOT NULL,
	result bytea
)`,
		`COMMENT ON TABLE ` + name + ` IS ` + literal(versionComment(0)),
		`CREATE INDEX ` + pgx.Identifier{ident[len(ident)-1] + indexSuffix}.Sanitize() + ` ON ` + name + ` (expires_at)`,
	}
}

// MigrationSQL returns the statements that [New] runs to create the table
// of cfg (its Table, Partitioned, PartitionSpan, TTL and Lease), for a
// migration run by a role that may create tables; New, given the same cfg,
// then only checks the table, and needs no CREATE privilege. The table of
// the partitioned layout must be named with its schema ("public.dedupe_keys"),
// which its function and partitions are created in; the last statement
// creates its first partitions.
func MigrationSQL(cfg Config) ([]string, error) {
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	ident, err := parseTable(cfg.Table)
	if err != nil {
		return nil, err
	}
	if !cfg.Partitioned {
		return plainCreateSQL(ident), nil
	}
	if len(ident) == 1 {
		return nil, fmt.Errorf("dedupe: postgres: table name %q: name the schema of a partitioned table (%q)",
			cfg.Table, "public."+cfg.Table)
	}
	pt, err := newPartitions(ident, cfg.PartitionSpan, orDefault(cfg.TTL, dedupe.DefaultTTL), orDefault(cfg.Lease, dedupe.DefaultLease))
	if err != nil {
		return nil, err
	}
	return pt.createSQL(), nil
}

// orDefault returns d, or def if d <= 0.
func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// ensureExpiryIndex creates the index on expires_at of the plain table, which
// the cleanup walks, unless the table has one.
func ensureExpiryIndex(ctx context.Context, tx pgx.Tx, ident pgx.Identifier) error {
	var indexed bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (
	SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
	WHERE i.indrelid = to_regclass($1) AND a.attname = 'expires_at' AND i.indpred IS NULL AND i.indisvalid)`,
		ident.Sanitize()).Scan(&indexed); err != nil {
		return err
	}
	if indexed {
		return nil
	}
	if _, err := tx.Exec(ctx, plainCreateSQL(ident)[2]); err != nil {
		return fmt.Errorf("create index: %w", err)
	}
	return nil
}

// checkLayout refuses a table whose layout is not the one asked for: a plain
// table (kind "r") opened as partitioned, a partitioned one (kind "p") opened
// as plain, or one partitioned by anything but ranges of expires_at.
func checkLayout(ctx context.Context, tx pgx.Tx, name, kind string, pt *partitions) error {
	switch {
	case kind == "r" && pt != nil:
		return errors.New("is a plain table, but Config.Partitioned asks for a table partitioned by expires_at; " +
			"leave Partitioned false for this table, or set Config.Table to a new one")
	case kind == "p" && pt == nil:
		return errors.New("is partitioned, but Config.Partitioned is false, which asks for a plain table; " +
			"set Partitioned (and the PartitionSpan the table was made with) for this table")
	case kind == "r":
		return nil
	}
	var def string
	if err := tx.QueryRow(ctx, `SELECT pg_get_partkeydef(to_regclass($1))`, name).Scan(&def); err != nil {
		return err
	}
	if def != "RANGE (expires_at)" {
		return fmt.Errorf("is partitioned by %s, want RANGE (expires_at)", def)
	}
	return nil
}

// checkShape returns an error describing what makes the table unusable by the
// store's statements, if anything: the columns key text, token text
// (nullable), expires_at timestamptz NOT NULL and result bytea (nullable), an
// index on key (on the plain table a unique one on key alone, for ON
// CONFLICT), and no other column that an insert must fill.
func checkShape(ctx context.Context, tx pgx.Tx, name string, partitioned bool) error {
	problems, err := columnProblems(ctx, tx, name)
	if err != nil {
		return err
	}
	var indexed bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (
	SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
	WHERE i.indrelid = to_regclass($1) AND a.attname = 'key' AND (i.indisunique AND i.indnkeyatts = 1 OR $2)
		AND i.indexprs IS NULL AND i.indpred IS NULL AND i.indisvalid)`, name, partitioned).Scan(&indexed); err != nil {
		return err
	}
	switch {
	case indexed:
	case partitioned:
		problems = append(problems, "no index on key")
	default:
		problems = append(problems, "no primary key or unique index on key alone")
	}
	if len(problems) > 0 {
		return fmt.Errorf("exists with an incompatible shape: %s; drop it or set Config.Table to another name",
			strings.Join(problems, "; "))
	}
	return nil
}

// columnProblems returns what is wrong with the columns of the table.
func columnProblems(ctx context.Context, tx pgx.Tx, name string) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), a.attnotnull,
	a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> ''
FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`, name)
	if err != nil {
		return nil, err
	}
	want := map[string]string{"key": "text", "token": "text", "expires_at": "timestamp with time zone", "result": "bytea"}
	seen := map[string]bool{}
	var problems []string
	for rows.Next() {
		var col, typ string
		var notNull, filled bool
		if err := rows.Scan(&col, &typ, &notNull, &filled); err != nil {
			return nil, err
		}
		w, ok := want[col]
		switch {
		case !ok:
			if notNull && !filled {
				problems = append(problems, fmt.Sprintf("extra column %s is NOT NULL without a default", col))
			}
			continue
		case typ != w:
			problems = append(problems, fmt.Sprintf("column %s is %s, want %s", col, typ, w))
		case (col == "token" || col == "result") && notNull:
			problems = append(problems, fmt.Sprintf("column %s is NOT NULL, but marks store NULL", col))
		case col == "expires_at" && !notNull:
			problems = append(problems, "column expires_at may be NULL, want NOT NULL")
		}
		seen[col] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, col := range []string{"key", "token", "expires_at", "result"} {
		if !seen[col] {
			problems = append(problems, fmt.Sprintf("no column %s %s", col, want[col]))
		}
	}
	return problems, nil
}

// literal returns s as an SQL string literal.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
