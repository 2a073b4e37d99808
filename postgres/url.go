package postgres

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// takeURLOptions moves the store's options out of the query of a
// postgres:// or postgresql:// URL into cfg, and returns the URL left for the
// connection; docs/urls.md is the grammar. table= sets [Config.Table];
// partitioned=true or false sets [Config.Partitioned] (and turns
// [Config.AdoptLayout] off: the URL names the layout); partition_span= a Go
// duration sets [Config.PartitionSpan]. A key=value DSN is returned as it is.
func takeURLOptions(dsn string, cfg *Config) (string, error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn, nil // pgx reports it, without the password
	}
	q := u.Query()
	if !q.Has("table") && !q.Has("partitioned") && !q.Has("partition_span") {
		return dsn, nil
	}
	if q.Has("table") {
		cfg.Table = q.Get("table")
	}
	if v := q.Get("partitioned"); q.Has("partitioned") {
		if cfg.Partitioned, err = strconv.ParseBool(v); err != nil {
			return "", fmt.Errorf("dedupe: postgres: URL option partitioned=%s: want true or false", v)
		}
		cfg.AdoptLayout = false
	}
	if v := q.Get("partition_span"); q.Has("partition_span") {
		if cfg.PartitionSpan, err = time.ParseDuration(v); err != nil || cfg.PartitionSpan <= 0 {
			return "", fmt.Errorf("dedupe: postgres: URL option partition_span=%s: want a positive duration such as 24h", v)
		}
	}
	for _, k := range []string{"table", "partitioned", "partition_span"} {
		q.Del(k)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}
