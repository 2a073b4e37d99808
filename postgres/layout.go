package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// readLayout sets cfg.Partitioned and cfg.PartitionSpan to the layout of
// the existing table ident: partitioned with the span its comment records,
// or plain. A missing table leaves cfg as it is, but for [Config.ReadOnly],
// which needs the table: then it is an error naming it.
func readLayout(ctx context.Context, pool *pgxpool.Pool, ident pgx.Identifier, cfg *Config) error {
	name := ident.Sanitize()
	var kind, comment string
	if err := pool.QueryRow(ctx, `SELECT coalesce(c.relkind::text, ''), coalesce(obj_description(c.oid, 'pg_class'), '')
FROM (SELECT to_regclass($1) AS oid) r LEFT JOIN pg_class c ON c.oid = r.oid`, name).Scan(&kind, &comment); err != nil {
		return fmt.Errorf("dedupe: postgres: table %s: read its layout: %w", name, err)
	}
	switch kind {
	case "":
		if cfg.ReadOnly {
			return fmt.Errorf("dedupe: postgres: table %s does not exist", name)
		}
	case "p":
		cfg.Partitioned = true
		if m := versionRE.FindStringSubmatch(comment); m != nil && m[2] != "" {
			minutes, _ := strconv.ParseInt(m[2], 10, 64)
			cfg.PartitionSpan = time.Duration(minutes) * time.Minute
		}
	default:
		cfg.Partitioned = false
	}
	return nil
}
