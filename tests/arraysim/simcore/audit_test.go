package simcore

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refDiff is the plain definition diffSnapshots must agree with: decode
// both snapshots whole and compare the trees.
func refDiff(before, after []byte) string {
	var a, b any
	if json.Unmarshal(before, &a) != nil || json.Unmarshal(after, &b) != nil {
		return "$"
	}
	var paths []string
	refDiffValue("$", a, b, &paths)
	if len(paths) == 0 {
		return ""
	}
	if len(paths) > maxChangePaths {
		extra := len(paths) - maxChangePaths
		paths = append(paths[:maxChangePaths], fmt.Sprintf("(+%d more)", extra))
	}
	return strings.Join(paths, " ")
}

// refDiffValue appends the paths under path where a and b differ.
func refDiffValue(path string, a, b any, out *[]string) {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			*out = append(*out, path)
			return
		}
		keys := make(map[string]struct{}, len(av)+len(bv))
		for k := range av {
			keys[k] = struct{}{}
		}
		for k := range bv {
			keys[k] = struct{}{}
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			x, inA := av[k]
			y, inB := bv[k]
			switch {
			case inA && inB:
				refDiffValue(path+"."+k, x, y, out)
			case inA:
				*out = append(*out, "-"+path+"."+k)
			default:
				*out = append(*out, "+"+path+"."+k)
			}
		}
	case []any:
		bv, ok := b.([]any)
		if !ok {
			*out = append(*out, path)
			return
		}
		refDiffList(path, av, bv, out)
	default:
		if !scalarEqual(a, b) {
			*out = append(*out, path)
		}
	}
}

// diffList compares two lists by element key ("id", else "name") when all
// elements are keyed objects, else element by element.
func refDiffList(path string, a, b []any, out *[]string) {
	ka, okA := refKeyed(a)
	kb, okB := refKeyed(b)
	if okA && okB {
		keys := make(map[string]struct{}, len(ka)+len(kb))
		for k := range ka {
			keys[k] = struct{}{}
		}
		for k := range kb {
			keys[k] = struct{}{}
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			x, inA := ka[k]
			y, inB := kb[k]
			p := path + "[" + k + "]"
			switch {
			case inA && inB:
				refDiffValue(p, x, y, out)
			case inA:
				*out = append(*out, "-"+p)
			default:
				*out = append(*out, "+"+p)
			}
		}
		return
	}
	n := max(len(a), len(b))
	for i := range n {
		p := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case i < len(a) && i < len(b):
			refDiffValue(p, a[i], b[i], out)
		case i < len(a):
			*out = append(*out, "-"+p)
		default:
			*out = append(*out, "+"+p)
		}
	}
}

// keyed indexes a list of objects by their "id" (or "name") field. It
// reports false when an element is not an object with a unique key.
func refKeyed(list []any) (map[string]any, bool) {
	m := make(map[string]any, len(list))
	for _, e := range list {
		obj, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		var key string
		for _, field := range keyFields {
			if v, ok := obj[field]; ok {
				key = fmt.Sprint(v)
				break
			}
		}
		if key == "" {
			return nil, false
		}
		if _, dup := m[key]; dup {
			return nil, false
		}
		m[key] = obj
	}
	return m, true
}

var diffSeeds = [][2]string{
	{`{"items":[]}`, `{"items":[{"id":"a","value":"1"}]}`},
	{`{"hosts":[{"id":"h1","luns":[1,2]},{"id":"h2"}]}`, `{"hosts":[{"id":"h1","luns":[1]},{"id":"h2","x":null}]}`},
	{`{"l":[{"name":"a"},{"name":"a"}]}`, `{"l":[{"name":"a"},{"name":"b"}]}`},
	{`{"l":[{"id":1},{"id":2.5}]}`, `{"l":[{"id":1},{"id":2.5,"v":true}]}`},
	{`{"a":1}`, `{"a":1.0}`},
	{`{"a":{"b":[1,{"c":"d"}]}}`, `{"a":[1]}`},
	{`[1,2,3]`, `[1,2]`},
	{`{"s":[{"sdcId":"x","m":[]}]}`, `{"s":[{"sdcId":"x","m":[{"port_name":"p"}]}]}`},
	{`"x"`, `{"x":1}`},
	{`{"a":1}`, `{"a":`},
}

func TestDiffSnapshotsMatchesWholeTreeDiff(t *testing.T) {
	for _, c := range diffSeeds {
		assert.Equal(t, refDiff([]byte(c[0]), []byte(c[1])), diffSnapshots([]byte(c[0]), []byte(c[1])), "%s -> %s", c[0], c[1])
	}
	// Many paths are capped.
	var a, b []string
	for i := range 40 {
		a = append(a, fmt.Sprintf(`{"id":"k%02d","v":1}`, i))
		b = append(b, fmt.Sprintf(`{"id":"k%02d","v":2}`, i))
	}
	before, after := "["+strings.Join(a, ",")+"]", "["+strings.Join(b, ",")+"]"
	got := diffSnapshots([]byte(before), []byte(after))
	require.Equal(t, refDiff([]byte(before), []byte(after)), got)
	assert.True(t, strings.HasSuffix(got, "(+24 more)"), got)
}

// FuzzDiffSnapshots checks the incremental diff against the whole-tree
// definition on any pair of JSON documents, and that no input panics it.
func FuzzDiffSnapshots(f *testing.F) {
	for _, c := range diffSeeds {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		_ = diffSnapshots([]byte(a), []byte(b)) // any bytes: no panic
		if !json.Valid([]byte(a)) || !json.Valid([]byte(b)) {
			return
		}
		// Snapshots are json.Marshal output: compact, keys unique.
		ca, cb := canonical(a), canonical(b)
		if ca == nil || cb == nil {
			return
		}
		assert.Equal(t, refDiff(ca, cb), diffSnapshots(ca, cb), "%s -> %s", ca, cb)
	})
}

// canonical re-marshals a document as a family snapshot would be.
func canonical(s string) []byte {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}
