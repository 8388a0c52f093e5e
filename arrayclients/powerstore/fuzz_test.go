package powerstore

import (
	"strings"
	"testing"

	"github.com/fenced-project/fenced/arrayclients"
)

// FuzzPowerStoreCandidateNames: never a panic, never a name with a
// separator, and the fallback name is always a strict prefix ending
// before an IP suffix.
func FuzzPowerStoreCandidateNames(f *testing.F) {
	for _, s := range []string{"csi-node-0a1b-127.0.10.1", "csi-node-abc", "-1.2.3.4", "a-b-c", "x-::1", ""} {
		f.Add(s, "")
		f.Add("", s)
	}
	f.Fuzz(func(t *testing.T, id, override string) {
		names, err := candidateHostNames(arrayclients.Node{Override: override, CSINodeIDs: map[string]string{arrayclients.DriverPowerStore: id}})
		if err != nil {
			return
		}
		if len(names) > 2 {
			t.Fatalf("%d candidates", len(names))
		}
		for _, n := range names {
			if n == "" || strings.ContainsAny(n, ",\t\n") {
				t.Fatalf("candidate %q from id %q override %q", n, id, override)
			}
		}
		if len(names) == 2 && !strings.HasPrefix(names[0], names[1]+"-") {
			t.Fatalf("fallback %q is not %q without a suffix", names[1], names[0])
		}
	})
}
