package dedupe_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"modernc.org/sqlite"

	"github.com/gatewaykit/dedupe"
)

// sqliteCode returns the SQLite result code of err, or 0.
func sqliteCode(err error) int {
	var e *sqlite.Error
	if errors.As(err, &e) {
		return e.Code() & 0xff
	}
	return 0
}

func TestSQLiteNotADatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	content := []byte(strings.Repeat("these are not the pages you are looking for\n", 200))
	require.NoError(t, os.WriteFile(path, content, 0o644))
	s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{})
	require.Error(t, err)
	assert.Nil(t, s)
	assert.Contains(t, err.Error(), "not a SQLite database")
	assert.Contains(t, err.Error(), path)
	assert.Equal(t, 26, sqliteCode(err), "SQLITE_NOTADB, wrapped")
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, content, got, "the file is untouched")
	assert.NoFileExists(t, path+"-wal")
}
