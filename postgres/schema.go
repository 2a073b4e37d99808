package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	maxIdentLen = 63 // PostgreSQL's NAMEDATALEN - 1
	indexSuffix = "_expires_at_idx"
	// maxTableLen leaves room for the index name, table name plus indexSuffix.
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

// ensureSchema creates the table and its expiry index if they are missing and
// checks the shape of the table, in one transaction holding an advisory lock
// on the table's name, so that instances starting together do not race on
// CREATE. An existing table and index are only read, so a role without the
// CREATE privilege can use a table made by a migration.
func ensureSchema(ctx context.Context, pool *pgxpool.Pool, ident pgx.Identifier) (err error) {
	name := ident.Sanitize()
	defer func() {
		if err != nil {
			err = fmt.Errorf("dedupe: postgres: table %s: %w", name, err)
		}
	}()
	tx, err := pool.Begin(ctx)
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
		// key is the text form of a dedupe.Key ("telegram:123"). token is NULL
		// for a mark and the claim's token for a claim. The "C" collation
		// compares bytes, which is both exact and the fastest.
		if _, err := tx.Exec(ctx, `CREATE TABLE `+name+` (
	key text COLLATE "C" PRIMARY KEY,
	token text,
	expires_at timestamptz NOT NULL
)`); err != nil {
			return fmt.Errorf("create: %w", err)
		}
	case "r", "p":
	default:
		return fmt.Errorf("exists but is not a table (relkind %q)", kind)
	}
	if err := checkShape(ctx, tx, name); err != nil {
		return err
	}
	var indexed bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (
	SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
	WHERE i.indrelid = to_regclass($1) AND a.attname = 'expires_at' AND i.indpred IS NULL AND i.indisvalid)`,
		name).Scan(&indexed); err != nil {
		return err
	}
	if !indexed {
		idx := pgx.Identifier{ident[len(ident)-1] + indexSuffix}.Sanitize()
		if _, err := tx.Exec(ctx, `CREATE INDEX `+idx+` ON `+name+` (expires_at)`); err != nil {
			return fmt.Errorf("create index: %w", err)
		}
	}
	return tx.Commit(ctx)
}

// checkShape returns an error describing what makes the table unusable by the
// store's statements, if anything: the columns key text, token text (nullable)
// and expires_at timestamptz NOT NULL, a unique index on key alone for ON
// CONFLICT, and no other column that an insert must fill.
func checkShape(ctx context.Context, tx pgx.Tx, name string) error {
	rows, err := tx.Query(ctx, `SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), a.attnotnull,
	a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> ''
FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`, name)
	if err != nil {
		return err
	}
	want := map[string]string{"key": "text", "token": "text", "expires_at": "timestamp with time zone"}
	seen := map[string]bool{}
	var problems []string
	for rows.Next() {
		var col, typ string
		var notNull, filled bool
		if err := rows.Scan(&col, &typ, &notNull, &filled); err != nil {
			return err
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
		case col == "token" && notNull:
			problems = append(problems, "column token is NOT NULL, but marks store NULL")
		case col == "expires_at" && !notNull:
			problems = append(problems, "column expires_at may be NULL, want NOT NULL")
		}
		seen[col] = true
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, col := range []string{"key", "token", "expires_at"} {
		if !seen[col] {
			problems = append(problems, fmt.Sprintf("no column %s %s", col, want[col]))
		}
	}
	if seen["key"] {
		var unique bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (
	SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
	WHERE i.indrelid = to_regclass($1) AND a.attname = 'key' AND i.indisunique AND i.indnkeyatts = 1
		AND i.indexprs IS NULL AND i.indpred IS NULL AND i.indisvalid)`, name).Scan(&unique); err != nil {
			return err
		}
		if !unique {
			problems = append(problems, "no primary key or unique index on key alone")
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("exists with an incompatible shape: %s; drop it or set Config.Table to another name",
			strings.Join(problems, "; "))
	}
	return nil
}
