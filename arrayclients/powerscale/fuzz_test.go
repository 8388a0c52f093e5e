package powerscale

import (
	"context"
	"strings"
	"testing"

	"github.com/fenced-project/fenced/arrayclients"
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
	a, err := NewPowerScale(context.Background(), arrayclients.Config{Name: "p", Endpoint: "http://127.0.0.1:1", Username: "u", Password: "p"}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string, override bool) {
		n := arrayclients.Node{Name: "n", CSINodeIDs: map[string]string{arrayclients.DriverPowerScale: s}}
		if override {
			n = arrayclients.Node{Name: "n", Override: s}
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
