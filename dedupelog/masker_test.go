package dedupelog_test

import (
	"os"
	"strings"
	"testing"

	"github.com/gatewaykit/dedupe/dedupelog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMaskerText(t *testing.T) {
	secret := []byte("0123456789abcdef")
	hash := dedupelog.NewMasker(dedupelog.Hash, secret)
	h, ok := hash.ID("42")
	require.True(t, ok)
	require.Len(t, h, 32)
	drop := dedupelog.NewMasker(dedupelog.Drop, nil)
	for _, tc := range []struct {
		in, hashed, dropped string
	}{
		{"dedupe: telegram:42 processed but not marked", "dedupe: telegram:" + h + " processed but not marked", "dedupe: telegram processed but not marked"},
		{"no room to mark 42", "no room to mark " + h, "no room to mark [id]"},
		{"(id)=(42)", "(id)=(" + h + ")", "(id)=([id])"},
		{"42", h, "[id]"},
		{"421 x42 42a 4242", "421 x42 42a 4242", "421 x42 42a 4242"}, // not on its own
		{"telegram:421", "telegram:421", "telegram:421"},
		{"nothing to hide", "nothing to hide", "nothing to hide"},
	} {
		assert.Equal(t, tc.hashed, hash.Text(tc.in, "telegram", "42"), tc.in)
		assert.Equal(t, tc.dropped, drop.Text(tc.in, "telegram", "42"), tc.in)
	}
	assert.Equal(t, "x", hash.Text("x", "telegram", ""), "no id, nothing to hide")
}

func TestMaskerField(t *testing.T) {
	secret := []byte("0123456789abcdef")
	m := dedupelog.NewMasker(dedupelog.Hash, secret)
	h, _ := m.ID("42")
	for _, tc := range []struct {
		name, value, want string
		keep              bool
	}{
		{"message_id", "42", h, true},
		{"messaging.message.id", "42", h, true},
		{"key", "telegram:42", "telegram:" + h, true},
		{"mark_error", "dedupe: telegram:42 processed but not marked", "dedupe: telegram:" + h + " processed but not marked", true},
		{"exception.message", "lost 42", "lost " + h, true},
		{"panic", "bad update 42", "bad update " + h, true},
		{"platform", "telegram", "telegram", true},
		{"queue_id", "42", "42", true}, // holds no message id
	} {
		got, keep := m.Field(tc.name, tc.value, "telegram", "42")
		assert.Equal(t, tc.keep, keep, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
	}

	drop := dedupelog.NewMasker(dedupelog.Drop, nil)
	_, keep := drop.Field("messaging.message.id", "42", "telegram", "42")
	assert.False(t, keep, "dropped")
	assert.Equal(t, dedupelog.Drop, dedupelog.NewMasker(dedupelog.Hash, []byte("short")).Mode(), "a short key drops")
}

// TestFieldsDocumented checks that the package documentation and
// docs/observability.md name every field the Masker masks.
func TestFieldsDocumented(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	guide, err := os.ReadFile("../docs/observability.md")
	require.NoError(t, err)
	for _, name := range dedupelog.Fields() {
		assert.Contains(t, string(doc), "//\t"+name+" ", "doc.go lists %s", name)
		assert.True(t, strings.Contains(string(guide), "| `"+name+"`"), "docs/observability.md lists %s", name)
	}
}
