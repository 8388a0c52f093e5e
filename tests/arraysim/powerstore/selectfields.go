package powerstore

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
)

// The array returns only the attributes a query selects: "select
// specifies a comma-separated list of attributes to return in a response.
// If you do not use this parameter, a query returns the id attribute
// only" (Dell PowerStore REST API Developers Guide, "Request parameters").
// gopowerstore selects "*" (every attribute, e.g. Host) or a list with
// related resources in parentheses ("volume(appliance_id)",
// HostVolumeMapping). A selected attribute the object does not have is
// left out.

// selection is a parsed select parameter: nil sub means the whole value.
type selection map[string]selection

// parseSelect parses a select value: attributes separated by commas, a
// related resource's attributes in parentheses after its name.
func parseSelect(v string) selection {
	out := selection{}
	depth, start := 0, 0
	add := func(item string) {
		item = strings.TrimSpace(item)
		if item == "" {
			return
		}
		name, rest, nested := strings.Cut(item, "(")
		if nested {
			out[strings.TrimSpace(name)] = parseSelect(strings.TrimSuffix(rest, ")"))
			return
		}
		out[item] = nil
	}
	for i, c := range v {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				add(v[start:i])
				start = i + 1
			}
		}
	}
	add(v[start:])
	return out
}

// project keeps the selected attributes of a decoded JSON value (an
// object, or an array of objects).
func (sel selection) project(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = sel.project(e)
		}
		return out
	case map[string]any:
		if _, all := sel["*"]; all && len(sel) == 1 {
			return x
		}
		out := map[string]any{}
		for k, sub := range sel {
			if k == "*" {
				for kk, vv := range x {
					if _, ok := out[kk]; !ok {
						out[kk] = vv
					}
				}
				continue
			}
			val, ok := x[k]
			if !ok {
				continue
			}
			if sub != nil {
				val = sub.project(val)
			}
			out[k] = val
		}
		return out
	}
	return v
}

// withSelect serves a GET query through fn and writes its answer with only
// the selected attributes (only id without a select parameter). Errors
// and non-JSON answers pass unchanged.
func withSelect(w http.ResponseWriter, r *http.Request, fn func(w http.ResponseWriter)) {
	if r.Method != http.MethodGet {
		fn(w)
		return
	}
	sw := httptest.NewRecorder() // holds the answer so that its body can be projected
	fn(sw)
	maps.Copy(w.Header(), sw.Header())
	body := sw.Body.Bytes()
	var v any
	if (sw.Code == http.StatusOK || sw.Code == http.StatusPartialContent) && json.Unmarshal(body, &v) == nil {
		sel := selection{"id": nil}
		if vals, ok := r.URL.Query()["select"]; ok {
			sel = parseSelect(vals[len(vals)-1])
		}
		if b, err := json.Marshal(sel.project(v)); err == nil {
			body = b
		}
	}
	w.WriteHeader(sw.Code)
	_, _ = w.Write(body)
}
