package dedupe

import (
	"context"
	"fmt"
)

// setupReadOnly is setup for a store opened with [SQLiteConfig].ReadOnly: it
// changes nothing in the file. The marks table must exist; the claims and
// results tables may be missing, which the store reads as none. Only the
// reading statements are prepared.
func (s *SQLiteStore) setupReadOnly(ctx context.Context) error {
	tables := s.tables()
	exists := make([]bool, len(tables))
	for i, t := range tables {
		if err := s.retryBusy(ctx, nil, func() (err error) {
			exists[i], err = s.checkTable(ctx, t)
			return err
		}); err != nil {
			return err
		}
	}
	if !exists[0] {
		return fmt.Errorf("table %s does not exist", s.table)
	}
	s.noClaims, s.noResults = !exists[1], !exists[2]
	for _, p := range s.statements() {
		if p.stmt != &s.stmt.exists && (p.stmt != &s.stmt.resultGet || s.noResults) {
			continue
		}
		if err := s.retryBusy(ctx, nil, func() (err error) {
			*p.stmt, err = s.db.PrepareContext(ctx, p.sql)
			return err
		}); err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
	}
	return nil
}
