package invariants

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Difference is one place where two state dumps differ. Before and After
// are compact JSON of the values ("" where a side has none).
type Difference struct {
	Path   string `json:"path"`
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
}

// String formats the difference for messages.
func (d Difference) String() string {
	return fmt.Sprintf("%s: %s -> %s", d.Path, orNone(d.Before), orNone(d.After))
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// listKeys are the fields that identify an element of a list of objects,
// tried in order. A list whose elements all have a unique value for one of
// them is compared as a map by that value; any other list of objects as a
// multiset of elements; a list of scalars as a multiset plus its order.
var listKeys = []string{"id", "hostId", "sdcId", "initiatorId", "port_name", "portName", "name", "ip",
	"maskingViewId", "volumeId", "storageGroupId"}

// DiffStates compares two JSON documents, leaving out object keys in
// ignore. It returns the differences in path order.
func DiffStates(before, after json.RawMessage, ignore []string) ([]Difference, error) {
	var a, b any
	if err := json.Unmarshal(before, &a); err != nil {
		return nil, fmt.Errorf("decode the first state: %w", err)
	}
	if err := json.Unmarshal(after, &b); err != nil {
		return nil, fmt.Errorf("decode the second state: %w", err)
	}
	skip := map[string]bool{}
	for _, k := range ignore {
		skip[k] = true
	}
	var out []Difference
	diffAny("$", a, b, skip, &out)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func compact(v any) string {
	if v == nil {
		return "null"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func diffAny(path string, a, b any, skip map[string]bool, out *[]Difference) {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			*out = append(*out, Difference{Path: path, Before: compact(a), After: compact(b)})
			return
		}
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		for _, k := range sortedKeys(keys) {
			if skip[k] {
				continue
			}
			x, inA := av[k]
			y, inB := bv[k]
			p := path + "." + k
			switch {
			case inA && inB:
				diffAny(p, x, y, skip, out)
			case inA:
				*out = append(*out, Difference{Path: p, Before: compact(stripped(x, skip))})
			default:
				*out = append(*out, Difference{Path: p, After: compact(stripped(y, skip))})
			}
		}
	case []any:
		bv, ok := b.([]any)
		if !ok {
			*out = append(*out, Difference{Path: path, Before: compact(a), After: compact(b)})
			return
		}
		diffList(path, av, bv, skip, out)
	default:
		if !reflect.DeepEqual(a, b) {
			*out = append(*out, Difference{Path: path, Before: compact(a), After: compact(b)})
		}
	}
}

// stripped returns v without the skipped keys, for reporting.
func stripped(v any, skip map[string]bool) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			if !skip[k] {
				m[k] = stripped(e, skip)
			}
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = stripped(e, skip)
		}
		return l
	}
	return v
}

func diffList(path string, a, b []any, skip map[string]bool, out *[]Difference) {
	if key := commonKey(a, b); key != "" {
		ma, mb := indexBy(a, key), indexBy(b, key)
		all := map[string]bool{}
		for k := range ma {
			all[k] = true
		}
		for k := range mb {
			all[k] = true
		}
		for _, k := range sortedKeys(all) {
			x, inA := ma[k]
			y, inB := mb[k]
			p := path + "[" + k + "]"
			switch {
			case inA && inB:
				diffAny(p, x, y, skip, out)
			case inA:
				*out = append(*out, Difference{Path: p, Before: compact(stripped(x, skip))})
			default:
				*out = append(*out, Difference{Path: p, After: compact(stripped(y, skip))})
			}
		}
		return
	}
	// A multiset of elements (compared without the skipped keys).
	ca, cb := map[string]int{}, map[string]int{}
	var seqA, seqB []string
	for _, e := range a {
		s := compact(stripped(e, skip))
		ca[s]++
		seqA = append(seqA, s)
	}
	for _, e := range b {
		s := compact(stripped(e, skip))
		cb[s]++
		seqB = append(seqB, s)
	}
	same := true
	for _, s := range sortedKeys(ca) {
		if n := ca[s] - cb[s]; n > 0 {
			same = false
			for range n {
				*out = append(*out, Difference{Path: path + "[-]", Before: s})
			}
		}
	}
	for _, s := range sortedKeys(cb) {
		if n := cb[s] - ca[s]; n > 0 {
			same = false
			for range n {
				*out = append(*out, Difference{Path: path + "[+]", After: s})
			}
		}
	}
	if same && strings.Join(seqA, "\x00") != strings.Join(seqB, "\x00") {
		*out = append(*out, Difference{Path: path + "(order)", Before: compact(stripped(a, skip)), After: compact(stripped(b, skip))})
	}
}

// commonKey returns the first of listKeys by which every element of both
// lists is an object with a unique scalar value, or "".
func commonKey(a, b []any) string {
	if len(a) == 0 && len(b) == 0 {
		return ""
	}
	for _, k := range listKeys {
		if uniqueBy(a, k) && uniqueBy(b, k) {
			return k
		}
	}
	return ""
}

func uniqueBy(list []any, key string) bool {
	seen := map[string]bool{}
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return false
		}
		v, ok := m[key]
		if !ok {
			return false
		}
		switch v.(type) {
		case map[string]any, []any, nil:
			return false
		}
		s := fmt.Sprint(v)
		if seen[s] {
			return false
		}
		seen[s] = true
	}
	return true
}

func indexBy(list []any, key string) map[string]any {
	out := make(map[string]any, len(list))
	for _, e := range list {
		m := e.(map[string]any)
		out[fmt.Sprint(m[key])] = e
	}
	return out
}
