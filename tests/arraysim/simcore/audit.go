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
	// Requester is the tag the listener put before the remote address
	// (the requester's class: "csi" for the CSI drivers, a replica's ID),
	// "" for an untagged listener.
	Requester string `json:"requester,omitempty"`
	Method    string `json:"method"`
	Path      string `json:"path"` // path?query
	// Body is the request body, truncated to 512 bytes, with any
	// "password" values masked.
	Body    string `json:"body,omitempty"`
	Status  int    `json:"status"`
	Changed bool   `json:"changed"`
	Change  string `json:"change,omitempty"`
	// Fault is the kind of injected fault(s) that fired, comma-separated.
	Fault string `json:"fault,omitempty"`
	// Query is set on a write-method request the family declared
	// read-only (see Querier): it was served without snapshots.
	Query bool `json:"query,omitempty"`
	// Done is when the answer was written (Time is when the request
	// arrived).
	Done time.Time `json:"done"`
	// Objects are the objects the write changed, before and after; only
	// while the server writes an audit file (SetAuditFile).
	Objects []ObjectChange `json:"objects,omitempty"`
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
	var paths []string
	if !diffRaw("$", before, after, &paths) {
		return "$"
	}
	return formatChange(paths)
}

// formatChange joins the paths of a change as AuditEntry.Change shows
// them: at most maxChangePaths, then how many more.
func formatChange(paths []string) string {
	if len(paths) == 0 {
		return ""
	}
	if len(paths) > maxChangePaths {
		extra := len(paths) - maxChangePaths
		paths = append(paths[:maxChangePaths:maxChangePaths], fmt.Sprintf("(+%d more)", extra))
	}
	return strings.Join(paths, " ")
}

// diffRaw appends the paths under path where a and b differ. Objects are
// compared by member, lists by element key ("id", else "name", ...) when
// every element is an object with a unique key, else by position. It
// decodes one level at a time and descends only into the members whose
// bytes differ, so a write costs in proportion to what it changed rather
// than to the whole state. It reports false when a or b is not valid JSON.
func diffRaw(path string, a, b []byte, out *[]string) bool {
	if bytes.Equal(a, b) {
		return true
	}
	switch ka, kb := jsonKind(a), jsonKind(b); {
	case ka == '{' && kb == '{':
		ma, okA := objectMembers(a)
		mb, okB := objectMembers(b)
		if !okA || !okB {
			return false
		}
		return diffByKey(ma, mb, func(k string) string { return path + "." + k }, out)
	case ka == '[' && kb == '[':
		la, okA := arrayElements(a)
		lb, okB := arrayElements(b)
		if !okA || !okB {
			return false
		}
		return diffRawList(path, la, lb, out)
	default:
		var va, vb any
		if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
			return false
		}
		if !scalarEqual(va, vb) {
			*out = append(*out, path)
		}
		return true
	}
}

// diffByKey compares two sets of undecoded values by key, in key order:
// at names the path of key k.
func diffByKey(a, b map[string][]byte, at func(k string) string, out *[]string) bool {
	for _, k := range unionKeys(a, b) {
		x, inA := a[k]
		y, inB := b[k]
		switch {
		case inA && inB:
			if !diffRaw(at(k), x, y, out) {
				return false
			}
		case inA:
			*out = append(*out, "-"+at(k))
		default:
			*out = append(*out, "+"+at(k))
		}
	}
	return true
}

// diffRawList compares two lists of undecoded elements.
func diffRawList(path string, a, b [][]byte, out *[]string) bool {
	ka, okA := keyedRaw(a)
	kb, okB := keyedRaw(b)
	if okA && okB {
		return diffByKey(ka, kb, func(k string) string { return path + "[" + k + "]" }, out)
	}
	for i := range max(len(a), len(b)) {
		p := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case i < len(a) && i < len(b):
			if !diffRaw(p, a[i], b[i], out) {
				return false
			}
		case i < len(a):
			*out = append(*out, "-"+p)
		default:
			*out = append(*out, "+"+p)
		}
	}
	return true
}

// keyFields are the fields that key a list element, in order of preference
// (PowerMax's objects are keyed by their own maskingViewId, volumeId and
// storageGroupId: a masking view also names its storage group, a volume
// lists its storage groups).
var keyFields = []string{"id", "name", "sdcId", "port_name", "initiatorId", "maskingViewId", "volumeId", "storageGroupId"}

// keyedRaw indexes a list of objects by their key field (see keyFields).
// It reports false when an element is not an object with a unique key.
func keyedRaw(list [][]byte) (map[string][]byte, bool) {
	m := make(map[string][]byte, len(list))
	for _, e := range list {
		key, ok := elementKey(e)
		if !ok {
			return nil, false
		}
		if _, dup := m[key]; dup {
			return nil, false
		}
		m[key] = e
	}
	return m, true
}

// elementKey is the key a list element is diffed by: the value of its
// first key field (see keyFields). It reports false when the element is
// not an object or has no non-empty key, which makes its whole list
// compared by position. It decodes the element one level deep, and only
// the key's value fully.
func elementKey(e []byte) (string, bool) {
	if jsonKind(e) != '{' {
		return "", false
	}
	// The first key field present wins; a repeated member, its last
	// value (as encoding/json decodes it).
	best, bestRaw := len(keyFields), []byte(nil)
	badName := false
	if !eachMember(e, func(name, raw []byte) {
		n, ok := memberName(name)
		if !ok {
			badName = true
			return
		}
		for i, f := range keyFields {
			if i <= best && n == f {
				best, bestRaw = i, raw
			}
		}
	}) || badName {
		return "", false
	}
	if bestRaw == nil {
		return "", false
	}
	var key string
	if s, ok := memberName(bestRaw); ok && jsonKind(bestRaw) == '"' {
		key = s
	} else {
		var v any
		if json.Unmarshal(bestRaw, &v) != nil {
			return "", false
		}
		key = fmt.Sprint(v)
	}
	return key, key != ""
}

// jsonKind is the first non-space byte of a JSON value ('{', '[', or
// another for a scalar), 0 for an empty one.
func jsonKind(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
}

// unionKeys returns the keys of a and b, sorted.
func unionKeys[V any](a, b map[string]V) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
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
