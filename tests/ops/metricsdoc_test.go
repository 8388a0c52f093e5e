package ops

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// metricSpec is a metric's type and label names (sorted).
type metricSpec struct {
	Type   string
	Labels []string
}

func (m metricSpec) String() string {
	return fmt.Sprintf("%s{%s}", m.Type, strings.Join(m.Labels, ","))
}

// parseMetricsDoc reads the table of the "## Reference" section of
// docs/metrics.md: rows "| `name` | type | `l1`, `l2` (or —) | meaning |".
func parseMetricsDoc(t testing.TB, path string) map[string]metricSpec {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	out := map[string]metricSpec{}
	sc := bufio.NewScanner(f)
	line, inReference := 0, false
	for sc.Scan() {
		line++
		row := sc.Text()
		if strings.HasPrefix(row, "## ") {
			inReference = row == "## Reference"
			continue
		}
		if !inReference || !strings.HasPrefix(row, "| `fenced_") {
			continue
		}
		cells := strings.Split(strings.Trim(row, "|"), "|")
		require.GreaterOrEqual(t, len(cells), 4, "%s:%d: want 4 cells: %s", path, line, row)
		name := strings.Trim(strings.TrimSpace(cells[0]), "`")
		typ := strings.TrimSpace(cells[1])
		require.Contains(t, []string{"counter", "gauge", "histogram", "summary"}, typ, "%s:%d: type of %s", path, line, name)
		labels := []string{}
		if l := strings.TrimSpace(cells[2]); l != "—" {
			for _, p := range strings.Split(l, ",") {
				p = strings.TrimSpace(p)
				require.True(t, strings.HasPrefix(p, "`") && strings.HasSuffix(p, "`"), "%s:%d: label %q of %s not in backquotes", path, line, p, name)
				labels = append(labels, strings.Trim(p, "`"))
			}
		}
		sort.Strings(labels)
		require.NotEmpty(t, strings.TrimSpace(cells[3]), "%s:%d: %s has no meaning", path, line, name)
		_, dup := out[name]
		require.False(t, dup, "%s:%d: %s listed twice", path, line, name)
		out[name] = metricSpec{Type: typ, Labels: labels}
	}
	require.NoError(t, sc.Err())
	return out
}

// metricConstructors maps client_golang constructors to the metric type
// they make, and whether they take a label list.
var metricConstructors = map[string]struct {
	typ string
	vec bool
}{
	"NewCounter": {"counter", false}, "NewCounterVec": {"counter", true}, "NewCounterFunc": {"counter", false},
	"NewGauge": {"gauge", false}, "NewGaugeVec": {"gauge", true}, "NewGaugeFunc": {"gauge", false},
	"NewHistogram": {"histogram", false}, "NewHistogramVec": {"histogram", true},
	"NewSummary": {"summary", false}, "NewSummaryVec": {"summary", true},
}

// valueTypes maps the ValueType of const metrics to metric types.
var valueTypes = map[string]string{"GaugeValue": "gauge", "CounterValue": "counter", "UntypedValue": "untyped"}

// definedMetrics finds every metric the product's code defines, by reading
// its source: calls of prometheus.NewCounter/NewGaugeVec/... with their
// Opts.Name and label list, and prometheus.NewDesc (typed by the value
// type the same package's const metrics use). Names may be string literals
// or constants of the package. Test files and tests/ are not product code.
func definedMetrics(t testing.TB, root string) map[string]metricSpec {
	t.Helper()
	pkgs := map[string][]string{} // dir -> files
	for _, top := range []string{"cmd", "cluster", "detector", "stonith", "arrayclients", "kube", "configs"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
				pkgs[filepath.Dir(p)] = append(pkgs[filepath.Dir(p)], p)
			}
			return nil
		})
		require.NoError(t, err)
	}
	out := map[string]metricSpec{}
	add := func(pos string, name string, spec metricSpec) {
		require.True(t, strings.HasPrefix(name, "fenced_"), "%s: metric %q lacks the fenced_ prefix", pos, name)
		if prev, ok := out[name]; ok {
			require.Equal(t, prev, spec, "%s: %s defined twice, differently", pos, name)
		}
		out[name] = spec
	}
	for dir, files := range pkgs {
		fset := token.NewFileSet()
		var parsed []*ast.File
		consts := map[string]string{}
		for _, f := range files {
			af, err := parser.ParseFile(fset, f, nil, 0)
			require.NoError(t, err)
			parsed = append(parsed, af)
			for _, decl := range af.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								consts[n.Name], _ = strconv.Unquote(lit.Value)
							}
						}
					}
				}
			}
		}
		str := func(e ast.Expr) (string, bool) {
			switch v := e.(type) {
			case *ast.BasicLit:
				if v.Kind == token.STRING {
					s, err := strconv.Unquote(v.Value)
					return s, err == nil
				}
			case *ast.Ident:
				s, ok := consts[v.Name]
				return s, ok
			}
			return "", false
		}
		labels := func(pos string, e ast.Expr) []string {
			out := []string{}
			if id, ok := e.(*ast.Ident); ok && id.Name == "nil" {
				return out
			}
			cl, ok := e.(*ast.CompositeLit)
			require.True(t, ok, "%s: label names must be a []string literal or nil", pos)
			for _, el := range cl.Elts {
				s, ok := str(el)
				require.True(t, ok, "%s: label name is not a string literal or constant", pos)
				out = append(out, s)
			}
			sort.Strings(out)
			return out
		}
		isPromCall := func(call *ast.CallExpr) (string, bool) {
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return "", false
			}
			x, ok := sel.X.(*ast.Ident)
			if !ok || x.Name != "prometheus" {
				return "", false
			}
			return sel.Sel.Name, true
		}
		// Value types of const metrics in this package, for NewDesc.
		constTypes := map[string]bool{}
		var descs []struct {
			pos, name string
			labels    []string
		}
		for _, af := range parsed {
			ast.Inspect(af, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				fn, ok := isPromCall(call)
				if !ok {
					return true
				}
				pos := fset.Position(call.Pos()).String()
				switch fn {
				case "NewDesc":
					require.GreaterOrEqual(t, len(call.Args), 3, pos)
					name, ok := str(call.Args[0])
					require.True(t, ok, "%s: NewDesc name is not a string literal or constant", pos)
					descs = append(descs, struct {
						pos, name string
						labels    []string
					}{pos, name, labels(pos, call.Args[2])})
				case "MustNewConstMetric", "NewConstMetric":
					require.GreaterOrEqual(t, len(call.Args), 2, pos)
					sel, ok := call.Args[1].(*ast.SelectorExpr)
					require.True(t, ok, "%s: value type is not prometheus.XValue", pos)
					constTypes[valueTypes[sel.Sel.Name]] = true
				case "MustNewConstHistogram", "NewConstHistogram":
					constTypes["histogram"] = true
				default:
					c, ok := metricConstructors[fn]
					if !ok {
						return true
					}
					require.NotEmpty(t, call.Args, pos)
					opts, ok := call.Args[0].(*ast.CompositeLit)
					require.True(t, ok, "%s: %s options are not a literal", pos, fn)
					name := ""
					for _, el := range opts.Elts {
						kv := el.(*ast.KeyValueExpr)
						key := kv.Key.(*ast.Ident).Name
						require.NotContains(t, []string{"Namespace", "Subsystem", "ConstLabels"}, key,
							"%s: %s is not understood by this test; spell the full name out", pos, key)
						if key == "Name" {
							name, ok = str(kv.Value)
							require.True(t, ok, "%s: Name is not a string literal or constant", pos)
						}
					}
					require.NotEmpty(t, name, "%s: metric without a Name", pos)
					spec := metricSpec{Type: c.typ, Labels: []string{}}
					if c.vec {
						require.Len(t, call.Args, 2, pos)
						spec.Labels = labels(pos, call.Args[1])
					}
					add(pos, name, spec)
				}
				return true
			})
		}
		if len(descs) > 0 {
			require.Len(t, constTypes, 1, "%s: NewDesc metrics with more than one value type (%v): extend this test to tell them apart", dir, constTypes)
			for typ := range constTypes {
				for _, d := range descs {
					add(d.pos, d.name, metricSpec{Type: typ, Labels: d.labels})
				}
			}
		}
	}
	return out
}

// metricNames returns the sorted names of a spec map.
func metricNames(m map[string]metricSpec) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
