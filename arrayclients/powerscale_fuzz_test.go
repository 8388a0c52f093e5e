package arrayclients

import (
	"context"
	"strings"
	"testing"
)

// FuzzPowerScaleResolve feeds arbitrary csi-isilon node IDs and overrides
// to Resolve: it must never panic, and an identity it accepts never holds a
// string shared by every host nor anything but IPs and host names.
func FuzzPowerScaleResolve(f *testing.F) {
	for _, s := range []string{
		"worker-1=#=#=worker-1.cluster.local=#=#=127.0.10.1", "a=#=#=b", "=#=#==#=#=", "x=#=#=y=#=#=::1",
		"n=#=#=localhost=#=#=127.0.10.1", "n=#=#=f=#=#=127.0.10.1=#=#=extra", "127.0.10.1, worker-1", ",,,",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	a, err := NewPowerScale(context.Background(), Config{Name: "p", Endpoint: "http://127.0.0.1:1", Username: "u", Password: "p"}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string, override bool) {
		n := Node{Name: "n", CSINodeIDs: map[string]string{DriverPowerScale: s}}
		if override {
			n = Node{Name: "n", Override: s}
		}
		id, err := a.Resolve(context.Background(), n)
		if err != nil {
			if !strings.Contains(err.Error(), "resolve node n") {
				t.Fatalf("error does not name the node: %v", err)
			}
			return
		}
		if len(id.Keys) == 0 {
			t.Fatalf("accepted %q with no keys", s)
		}
		for _, k := range id.Keys {
			if protectedExportClients[strings.ToLower(k)] || strings.ContainsAny(k, " \t/*?@[") || k == "" {
				t.Fatalf("accepted key %q from %q", k, s)
			}
		}
	})
}

// FuzzPowerStoreCandidateNames: never a panic, never a name with a
// separator, and the fallback name is always a strict prefix ending
// before an IP suffix.
func FuzzPowerStoreCandidateNames(f *testing.F) {
	for _, s := range []string{"csi-node-0a1b-127.0.10.1", "csi-node-abc", "-1.2.3.4", "a-b-c", "x-::1", ""} {
		f.Add(s, "")
		f.Add("", s)
	}
	f.Fuzz(func(t *testing.T, id, override string) {
		names, err := candidateHostNames(Node{Override: override, CSINodeIDs: map[string]string{DriverPowerStore: id}})
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
