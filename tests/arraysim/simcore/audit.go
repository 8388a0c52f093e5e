package simcore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
)

// AuditEntry is one request as the array saw it. The framework records
// every request that is not under /_sim/; for write methods it compares the
// family's snapshot before and after and sets Changed plus a compact Change
// summary (the JSON paths that differ).
type AuditEntry struct {
	Seq    int64     `json:"seq"`
	Time   time.Time `json:"time"`
	Remote string    `json:"remote"` // r.RemoteAddr
	Method string    `json:"method"`
	Path   string    `json:"path"` // path?query
	// Body is the request body, truncated to 512 bytes, with any
	// "password" values masked.
	Body    string `json:"body,omitempty"`
	Status  int    `json:"status"`
	Changed bool   `json:"changed"`
	Change  string `json:"change,omitempty"`
	// Fault is the kind of injected fault(s) that fired, comma-separated.
	Fault string `json:"fault,omitempty"`
}

// maxAuditBody bounds the recorded request body.
const maxAuditBody = 512

// maxChangePaths bounds the paths listed in AuditEntry.Change.
const maxChangePaths = 16

var passwordRE = regexp.MustCompile(`(?i)("[a-z_]*(password|passwd|secret)[a-z_]*"\s*:\s*)"(?:[^"\\]|\\.)*"`)

// maskBody truncates a request body for the audit log and masks secrets.
func maskBody(b []byte) string {
	masked := passwordRE.ReplaceAll(b, []byte(`$1"***"`))
	if len(masked) > maxAuditBody {
		masked = masked[:maxAuditBody]
	}
	return string(masked)
}

// snapshotJSON marshals a family snapshot; a marshal failure is recorded
// as a value so the audit still shows something went wrong.
func snapshotJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(fmt.Sprintf("{%q:%q}", "snapshotError", err.Error()))
	}
	return b
}

// diffSnapshots returns the JSON paths that differ between two marshalled
// snapshots, or "" when they are equal.
func diffSnapshots(before, after []byte) string {
	if bytes.Equal(before, after) {
		return ""
	}
	var a, b any
	if json.Unmarshal(before, &a) != nil || json.Unmarshal(after, &b) != nil {
		return "$"
	}
	var paths []string
	diffValue("$", a, b, &paths)
	if len(paths) == 0 {
		return ""
	}
	if len(paths) > maxChangePaths {
		extra := len(paths) - maxChangePaths
		paths = append(paths[:maxChangePaths], fmt.Sprintf("(+%d more)", extra))
	}
	return strings.Join(paths, " ")
}

// diffValue appends the paths under path where a and b differ.
func diffValue(path string, a, b any, out *[]string) {
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
				diffValue(path+"."+k, x, y, out)
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
		diffList(path, av, bv, out)
	default:
		if !scalarEqual(a, b) {
			*out = append(*out, path)
		}
	}
}

// diffList compares two lists by element key ("id", else "name") when all
// elements are keyed objects, else element by element.
func diffList(path string, a, b []any, out *[]string) {
	ka, okA := keyed(a)
	kb, okB := keyed(b)
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
				diffValue(p, x, y, out)
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
			diffValue(p, a[i], b[i], out)
		case i < len(a):
			*out = append(*out, "-"+p)
		default:
			*out = append(*out, "+"+p)
		}
	}
}

// keyed indexes a list of objects by their "id" (or "name") field. It
// reports false when an element is not an object with a unique key.
func keyed(list []any) (map[string]any, bool) {
	m := make(map[string]any, len(list))
	for _, e := range list {
		obj, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		var key string
		for _, field := range []string{"id", "name", "sdcId", "port_name", "initiatorId"} {
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

func scalarEqual(a, b any) bool {
	switch av := a.(type) {
	case nil:
		return b == nil
	case string, float64, bool:
		return a == b
	default:
		return fmt.Sprint(av) == fmt.Sprint(b)
	}
}
