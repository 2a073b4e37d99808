package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultPartitionSpan is the range of expiry times of one partition when
// [Config.Partitioned] is set and [Config.PartitionSpan] is zero.
const DefaultPartitionSpan = 24 * time.Hour

// maxPartitionsAhead bounds the partitions that one creation makes: a TTL
// of this many spans or more is refused, as a PartitionSpan far too short.
const maxPartitionsAhead = 1000

// Suffixes of the names the partitioned layout makes from the table's, no
// longer than indexSuffix: the function creating partitions, the key index,
// and each partition, named by the UTC minute its range starts at.
const (
	addFnSuffix    = "_add_partitions"
	keyIndexSuffix = "_key_idx"
	partSuffix     = "_p" // + YYYYMMDDHHMI
)

// partitions is the partitioned layout of a table: its names, its span,
// and how far ahead its partitions are created.
type partitions struct {
	ident pgx.Identifier // the table as configured
	span  time.Duration
	ahead time.Duration // New and the cleanup create partitions this far ahead

	// Set by create or check, from the catalog.
	nsp, rel string // the table's schema and name
	addFn    string // quoted, qualified name of the function creating partitions
	oid      uint32 // the table's OID, which seeds the hash of the keys' locks
}

// newPartitions returns the partitioned layout of table ident, in spans of
// span, created ahead by the longer of ttl and lease and a span.
func newPartitions(ident pgx.Identifier, span, ttl, lease time.Duration) (*partitions, error) {
	if span <= 0 {
		span = DefaultPartitionSpan
	}
	if span%time.Minute != 0 {
		return nil, fmt.Errorf("dedupe: postgres: PartitionSpan %v is not a whole number of minutes", span)
	}
	ahead := max(ttl, lease) + span
	if n := ahead / span; n > maxPartitionsAhead {
		return nil, fmt.Errorf("dedupe: postgres: a TTL or lease of %v makes %d partitions of %v ahead, over %d: raise PartitionSpan",
			max(ttl, lease), n, span, maxPartitionsAhead)
	}
	pt := &partitions{ident: ident, span: span, ahead: ahead}
	if len(ident) == 2 {
		pt.nsp = ident[0]
	}
	return pt, nil
}

// create creates the partitioned table, its key index and comment, the
// function creating its partitions, and the partitions ahead.
func (pt *partitions) create(ctx context.Context, tx pgx.Tx) error {
	if len(pt.ident) == 1 { // CREATE puts it in the first schema of the search path
		if err := tx.QueryRow(ctx, `SELECT current_schema()::text`).Scan(&pt.nsp); err != nil {
			return err
		}
	}
	for _, sql := range pt.createSQL() {
		if _, err := tx.Exec(ctx, sql); err != nil {
			return fmt.Errorf("create: %w", err)
		}
	}
	return pt.resolve(ctx, tx)
}

// createSQL returns the statements creating the partitioned table, its key
// index and comment, the function creating its partitions, and the
// partitions ahead. pt.nsp is the table's schema.
func (pt *partitions) createSQL() []string {
	pt.rel = pt.ident[len(pt.ident)-1]
	pt.addFn = pgx.Identifier{pt.nsp, pt.rel + addFnSuffix}.Sanitize()
	name := pgx.Identifier{pt.nsp, pt.rel}.Sanitize()
	return []string{
		`CREATE TABLE ` + name + ` (
	key text COLLATE "C" NOT NULL,
	token text,
	expires_at timestamptz NOT NULL,
	result bytea
) PARTITION BY RANGE (expires_at)`,
		`CREATE INDEX ` + pgx.Identifier{pt.rel + keyIndexSuffix}.Sanitize() + ` ON ` + name + ` (key)`,
		`COMMENT ON TABLE ` + name + ` IS ` + literal(versionComment(int64(pt.span/time.Minute))),
		pt.functionSQL(),
		`SELECT ` + pt.addFn + `(now() + interval '` + fmt.Sprint(int64(pt.ahead/time.Second)) + ` seconds')`,
	}
}

// resolve reads the table's schema, name and OID from the catalog.
func (pt *partitions) resolve(ctx context.Context, tx pgx.Tx) error {
	if err := tx.QueryRow(ctx, `SELECT n.nspname::text, c.relname::text, c.oid::int8
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass($1)`,
		pt.ident.Sanitize()).Scan(&pt.nsp, &pt.rel, &pt.oid); err != nil {
		return err
	}
	pt.addFn = pgx.Identifier{pt.nsp, pt.rel + addFnSuffix}.Sanitize()
	return nil
}

// functionSQL creates the function that creates the partitions covering
// now() to upto, which are missing, and returns how many it created. Ranges
// start at whole multiples of the span since the Unix epoch; an advisory
// lock serialises the callers. Each partition is created as a table of its
// own and then attached, which locks the parent in SHARE UPDATE EXCLUSIVE
// mode (CREATE TABLE … PARTITION OF would lock it against every reader and
// writer, and wait for every transaction using it).
func (pt *partitions) functionSQL() string {
	return `CREATE FUNCTION ` + pt.addFn + `(upto timestamptz) RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
	span constant bigint := ` + fmt.Sprint(int64(pt.span/time.Second)) + `;
	lo bigint := floor(extract(epoch FROM now()) / span)::bigint * span;
	part text;
	made integer := 0;
BEGIN
	PERFORM pg_advisory_xact_lock(hashtextextended(` + literal("github.com/gatewaykit/dedupe/postgres partitions "+pt.nsp+"."+pt.rel) + `, 0));
	WHILE to_timestamp(lo) <= upto LOOP
		part := ` + literal(pt.rel+partSuffix) + ` || to_char(to_timestamp(lo) AT TIME ZONE 'UTC', 'YYYYMMDDHH24MI');
		IF to_regclass(format('%I.%I', ` + literal(pt.nsp) + `, part)) IS NULL THEN
			EXECUTE format('CREATE TABLE %I.%I (LIKE %I.%I INCLUDING DEFAULTS)',
				` + literal(pt.nsp) + `, part, ` + literal(pt.nsp) + `, ` + literal(pt.rel) + `);
			EXECUTE format('ALTER TABLE %I.%I ATTACH PARTITION %I.%I FOR VALUES FROM (%L) TO (%L)',
				` + literal(pt.nsp) + `, ` + literal(pt.rel) + `, ` + literal(pt.nsp) + `, part, to_timestamp(lo), to_timestamp(lo + span));
			made := made + 1;
		END IF;
		lo := lo + span;
	END LOOP;
	RETURN made;
END
$fn$`
}

// check checks an existing partitioned table: its function, then creates
// the partitions ahead, unless the store's role may not (a job of the
// deployment then calls the function).
func (pt *partitions) check(ctx context.Context, tx pgx.Tx) error {
	if err := pt.resolve(ctx, tx); err != nil {
		return err
	}
	var ok bool
	if err := tx.QueryRow(ctx, `SELECT to_regprocedure($1) IS NOT NULL`, pt.addFn+"(timestamptz)").Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("is partitioned but has no function %s(timestamptz) creating its partitions; "+
			"create it as the package documentation shows", pt.addFn)
	}
	sp, err := tx.Begin(ctx) // a savepoint
	if err != nil {
		return err
	}
	err = pt.add(ctx, sp, pt.ahead)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
		return sp.Rollback(ctx)
	}
	if err != nil {
		return err
	}
	return sp.Commit(ctx)
}

// checkSpan refuses a table whose recorded span is not the configured one.
func (pt *partitions) checkSpan(minutes int64) error {
	switch {
	case minutes == 0:
		return errors.New("is partitioned but its comment records no span of partitions; " +
			"set it as the package documentation shows")
	case time.Duration(minutes)*time.Minute != pt.span:
		return fmt.Errorf("has partitions of %v, but Config.PartitionSpan is %v", time.Duration(minutes)*time.Minute, pt.span)
	}
	return nil
}

// querier is a pool, a connection or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// add creates the missing partitions up to d after the server's now.
func (pt *partitions) add(ctx context.Context, q querier, d time.Duration) error {
	if n := d / pt.span; n > maxPartitionsAhead {
		return fmt.Errorf("dedupe: postgres: an expiry %v ahead needs %d partitions of %v, over %d", d, n, pt.span, maxPartitionsAhead)
	}
	_, err := q.Exec(ctx, `SELECT `+pt.addFn+`(`+fmt.Sprintf(after, "$1")+`)`, micros(d))
	if err != nil {
		return fmt.Errorf("create partitions up to %v ahead with %s: %w", d, pt.addFn, err)
	}
	return nil
}

// noPartition reports whether err is the server's refusal of a row whose
// expiry no partition holds.
func noPartition(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23514" && pgErr.ConstraintName == ""
}

// expiredPartitionsSQL lists the partitions whose range ends at or before
// the server's now, so that every row in them has expired, with whether
// a detach of them was begun and not finished; and the tables of the
// partitions' names that a cleanup detached but did not drop.
const expiredPartitionsSQL = `SELECT format('%I.%I', n.nspname, c.relname), CASE WHEN i.inhdetachpending THEN 'pending' ELSE 'attached' END
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE i.inhparent = $1::oid
	AND (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']*)''\)'))[1]::timestamptz <= now()
UNION ALL
SELECT format('%I.%I', n.nspname, c.relname), 'detached'
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $2 AND c.relkind = 'r' AND NOT c.relispartition
	AND c.relname ~ ('^' || $3 || '_p[0-9]{12}$')
	AND (to_timestamp(right(c.relname, 12), 'YYYYMMDDHH24MI')::timestamp AT TIME ZONE 'UTC') + $4::bigint * interval '1 second' <= now()
ORDER BY 1`

// drop detaches and drops the partitions in which every row has expired,
// and returns the number of rows they held. It detaches CONCURRENTLY, so
// that writers of the table are not blocked meanwhile, and finishes a
// detach that an earlier cleanup began. Instances sharing the table skip
// the cleanup while one of them runs it.
func (pt *partitions) drop(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	lock := pt.dropLock()
	var mine bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, lock).Scan(&mine); err != nil || !mine {
		return 0, err
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, lock)
	}()
	rows, err := conn.Query(ctx, expiredPartitionsSQL, pt.oid, pt.nsp, pt.rel, int64(pt.span/time.Second))
	if err != nil {
		return 0, err
	}
	type part struct{ Name, State string }
	parts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[part])
	if err != nil {
		return 0, err
	}
	var total int64
	parent := pgx.Identifier{pt.nsp, pt.rel}.Sanitize()
	for _, p := range parts {
		n, err := dropPartition(ctx, conn.Conn(), parent, p.Name, p.State)
		total += n
		if err != nil {
			return total, fmt.Errorf("drop partition %s: %w", p.Name, err)
		}
	}
	return total, nil
}

// dropLock names the advisory lock that one cleanup of the table holds.
func (pt *partitions) dropLock() string {
	return "github.com/gatewaykit/dedupe/postgres drop " + pt.nsp + "." + pt.rel
}

// exactCountBytes is the size up to which dropPartition counts a partition's
// rows; a larger one's are the table statistics' estimate.
const exactCountBytes = 16 << 20

// partitionRowsSQL counts the rows of partition $1 if it is at most $2 bytes
// (a few milliseconds), and otherwise returns the estimate that VACUUM and
// ANALYZE keep in pg_class.reltuples: a day of hundreds of millions of rows
// is not read in full before it is dropped (measured with 64 writers beside
// the drop of 500k rows: the count took 180 of the cleanup's 270 ms, the
// writers ran at 0.4x meanwhile). A large partition never analyzed (-1) is
// counted.
const partitionRowsSQL = `SELECT CASE WHEN pg_relation_size($1::regclass) <= $2 OR c.reltuples < 0
	THEN (SELECT count(*) FROM %s) ELSE c.reltuples::bigint END
FROM pg_class c WHERE c.oid = $1::regclass`

// dropPartition detaches partition part of parent unless it is detached
// already, counts its rows (see partitionRowsSQL) and drops it.
func dropPartition(ctx context.Context, conn *pgx.Conn, parent, part, state string) (int64, error) {
	switch state {
	case "attached":
		if _, err := conn.Exec(ctx, `ALTER TABLE `+parent+` DETACH PARTITION `+part+` CONCURRENTLY`); err != nil {
			return 0, err
		}
	case "pending":
		if _, err := conn.Exec(ctx, `ALTER TABLE `+parent+` DETACH PARTITION `+part+` FINALIZE`); err != nil {
			return 0, err
		}
	}
	var n int64
	if err := conn.QueryRow(ctx, fmt.Sprintf(partitionRowsSQL, part), part, exactCountBytes).Scan(&n); err != nil {
		return 0, err
	}
	if _, err := conn.Exec(ctx, `DROP TABLE `+part); err != nil {
		return 0, err
	}
	return n, nil
}
