package logging

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keyStyle is fenced's one log key style (docs/operations.md, "Logs").
var keyStyle = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)

// logArgsFrom is where the key/value pairs start in the calls that log.
var logArgsFrom = map[string]int{
	"Debug": 1, "Info": 1, "Warn": 1, "Error": 1,
	"DebugContext": 2, "InfoContext": 2, "WarnContext": 2, "ErrorContext": 2,
	"Log": 3, "With": 0,
}

// TestSourceKeysInStyle reads every Go file of the module and checks the
// literal keys of slog calls: lowerCamelCase, and "error" (not "err") for
// errors. The handler normalises what libraries log; fenced's own code
// writes the style in the first place, so a key reads the same in the
// source, the JSON and (upper snake case) the journal.
func TestSourceKeysInStyle(t *testing.T) {
	root, err := filepath.Abs("../../../..")
	require.NoError(t, err)
	fset := token.NewFileSet()
	checked := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := c.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			from, ok := logArgsFrom[sel.Sel.Name]
			if !ok {
				return true
			}
			if from > 0 {
				// A log call has its message, a string, just before the pairs.
				if len(c.Args) < from {
					return true
				}
				msg, ok := c.Args[from-1].(*ast.BasicLit)
				if !ok || msg.Kind != token.STRING {
					return true
				}
			}
			for i := from; i < len(c.Args); i += 2 {
				lit, ok := c.Args[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					break // an slog.Attr or a computed key: checked at run time by Key
				}
				k, _ := strconv.Unquote(lit.Value)
				checked++
				assert.True(t, keyStyle.MatchString(k) && k != "err", "%s: log key %q is not lowerCamelCase (or is err, not error)", fset.Position(lit.Pos()), k)
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, checked, 100, "the walk should find the module's log calls")
}
