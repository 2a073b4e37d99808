package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEscapePath(t *testing.T) {
	for in, want := range map[string]string{
		"github.com/gatewaykit/dedupe": "github.com/gatewaykit/dedupe",
		"github.com/Azure/azure-sdk":   "github.com/!azure/azure-sdk",
	} {
		got, err := escapePath(in)
		assert.NoError(t, err, "escapePath(%q)", in)
		assert.Equal(t, want, got, "escapePath(%q)", in)
	}
	_, err := escapePath("example.com/a!b")
	assert.Error(t, err, "escapePath accepted a path with '!'")
}

func TestReleaseVersion(t *testing.T) {
	root := module{Dir: ".", Path: "example.com/m"}
	nested := func(version string) module {
		return module{Dir: "sub", Path: "example.com/m/sub", Require: []modVersion{{"example.com/m", version}, {"example.com/other", "v9.9.9"}}}
	}
	for _, tc := range []struct {
		mods    []module
		want    string
		wantErr string
	}{
		{mods: []module{root, nested("v0.1.0")}, want: "v0.1.0"},
		{mods: []module{root, nested("v1.2.3-rc.1")}, want: "v1.2.3-rc.1"},
		{mods: []module{root, nested("v0.0.0-00010101000000-000000000000")}, wantErr: "not a release version"},
		{mods: []module{root, nested("v1.2.4-0.20191109021931-daa7c04131f5")}, wantErr: "not a release version"},
		{mods: []module{root}, wantErr: "no go.mod requires"},
		{mods: []module{root, nested("v0.1.0"), {Dir: "b", Path: "example.com/m/b", Require: []modVersion{{"example.com/m", "v0.2.0"}}}}, wantErr: "at 2 versions"},
		{mods: []module{root, {Dir: "sub", Path: "example.com/m/sub", Replace: []replacement{{Old: modVersion{Path: "example.com/m"}}}}}, wantErr: "must not replace"},
	} {
		got, err := releaseVersion(tc.mods)
		if tc.wantErr != "" {
			assert.ErrorContains(t, err, tc.wantErr, "releaseVersion(%v) = %q", tc.mods, got)
			continue
		}
		assert.NoError(t, err, "releaseVersion(%v)", tc.mods)
		assert.Equal(t, tc.want, got, "releaseVersion(%v)", tc.mods)
	}
}

func TestModuleFiles(t *testing.T) {
	files := []string{"LICENSE", "a.go", "go.mod", "sub/go.mod", "sub/s.go", "sub/deep/go.mod", "sub/deep/d.go", "subway/w.go", "x/testdata/go.mod", "x/testdata/t.txt"}
	mods := []module{{Dir: "."}, {Dir: "sub"}, {Dir: "sub/deep"}}
	for i, want := range []string{
		"LICENSE a.go go.mod subway/w.go",
		"go.mod s.go",
		"go.mod d.go",
	} {
		assert.Equal(t, want, strings.Join(moduleFiles(mods[i], mods, files), " "), "moduleFiles(%q)", mods[i].Dir)
	}
}
