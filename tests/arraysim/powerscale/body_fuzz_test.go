package powerscale

import (
	"testing"
)

// FuzzExportBody: a PUT body never panics the simulator, and a rejected
// body changes nothing.
func FuzzExportBody(f *testing.F) {
	for _, s := range []string{`{"clients":["a"]}`, `{"clients":null}`, `{"paths":[]}`, `[]`, `{"x":1}`, `{"read_only_clients":[1]}`, `{"zone":"Other"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		e := &export{ID: 1, Zone: DefaultZone, Paths: []string{"/ifs/a"}, Lists: map[string][]string{
			"clients": {"localhost"}, "root_clients": {}, "read_write_clients": {}, "read_only_clients": {"b"},
		}}
		fields, ae := parseExportBody(body, DefaultZone)
		if ae != nil {
			return
		}
		before := renderExportLocked(e)
		if ae := applyExportFields(e, fields); ae != nil {
			after := renderExportLocked(e)
			for _, k := range append([]string{"paths"}, ListNames...) {
				if len(before[k].([]string)) != len(after[k].([]string)) {
					t.Fatalf("rejected body %q changed %s", body, k)
				}
			}
			return
		}
		for _, k := range ListNames {
			if e.Lists[k] == nil {
				t.Fatalf("list %s became nil after %q", k, body)
			}
		}
	})
}
