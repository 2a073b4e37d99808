package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The map of the house names every command of the CLI on the rows of
// cmd/dedupe (issue 44 found it listing migrate and stats after forget came).
func TestArchitectureListsEveryCommand(t *testing.T) {
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	commands := regexp.MustCompile(`(?m)^\tcase "([a-z]+)":$`).FindAllStringSubmatch(string(src), -1)
	require.NotEmpty(t, commands, "no `case \"name\":` in run's switch")
	doc, err := os.ReadFile("../../docs/architecture.md")
	if os.IsNotExist(err) {
		t.Skip("docs/architecture.md is not beside this module (built outside the repository)")
	}
	require.NoError(t, err)
	var rows []string
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| `") && strings.Contains(strings.SplitN(line, "|", 3)[1], "cmd/dedupe`") {
			rows = append(rows, line)
		}
	}
	require.NotEmpty(t, rows, "docs/architecture.md has no row for cmd/dedupe")
	for _, row := range rows {
		for _, c := range commands {
			assert.Contains(t, row, "`dedupe "+c[1]+"`", "docs/architecture.md row %q", row)
		}
	}
}
