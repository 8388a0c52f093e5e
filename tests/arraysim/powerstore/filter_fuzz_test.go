package powerstore

import (
	"strings"
	"testing"
)

// FuzzParseFilter: query filters never panic; eq. strips exactly its own
// prefix, so values keep their dots.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"eq.csi-node-1-127.0.0.1", "not.eq.x", "neq.a", "in.(a,b)", "in.(", "eq.", "like.x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		flt, e := parseFilter("name", v)
		if e != nil {
			if e.status != 400 {
				t.Fatalf("status %d for %q", e.status, v)
			}
			return
		}
		if rest, ok := strings.CutPrefix(v, "eq."); ok && !flt.negate && (len(flt.values) != 1 || flt.values[0] != rest) {
			t.Fatalf("eq. value of %q: %v", v, flt.values)
		}
	})
}
