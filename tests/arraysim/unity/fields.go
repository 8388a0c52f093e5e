package unity

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
)

// The array returns the attributes a query's fields parameter names, and
// id: "Specifies a comma-separated list of attributes to return in a
// response" (Unity Unisphere Management REST API Programmer's Guide,
// "Request parameters"); related resources' attributes in dot notation
// ("Specifying the attributes to return in a query response"; its example
// @base echoes the list with ",id" appended). gounity's lists carry a
// literal '?' after some names ("originalParentLun?fields",
// "nfsShare?fields"): the name before it is the attribute, as gounity's
// parsing of real answers requires. The guide also says a query without
// fields returns id only; that is not modelled (an answer without fields
// is whole): gounity's queries without fields (metricQueryResult by
// filter, basicSystemInfo) are decoded in full by the Dell drivers, and
// how the array answers those is not documented here.

// fieldSet is a parsed fields parameter: nil means the whole value.
type fieldSet map[string]fieldSet

func parseFields(v string) fieldSet {
	out := fieldSet{"id": nil}
	for _, name := range strings.Split(v, ",") {
		name, _, _ = strings.Cut(strings.TrimSpace(name), "?")
		if name == "" {
			continue
		}
		cur := out
		parts := strings.Split(name, ".")
		for i, p := range parts {
			sub, seen := cur[p]
			if i == len(parts)-1 {
				cur[p] = nil // the whole attribute wins over a part of it
				break
			}
			if seen && sub == nil {
				break // already whole
			}
			if sub == nil {
				sub = fieldSet{}
				cur[p] = sub
			}
			cur = sub
		}
	}
	return out
}

// project keeps the named attributes of an object, or of each object of a
// list.
func (fs fieldSet) project(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fs.project(e)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, sub := range fs {
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

// projectContent applies fs to the "content" of a single answer
// ({"content":{…}}) or of each entry of a list ({"entries":[…]}).
func (fs fieldSet) projectContent(doc map[string]any) {
	if c, ok := doc["content"]; ok {
		doc["content"] = fs.project(c)
	}
	if es, ok := doc["entries"].([]any); ok {
		for _, e := range es {
			if m, ok := e.(map[string]any); ok {
				if c, ok := m["content"]; ok {
					m["content"] = fs.project(c)
				}
			}
		}
	}
}

// withFields serves a GET with a fields parameter through fn and writes
// its answer with only the named attributes and id. Other requests, errors
// and non-JSON answers pass unchanged.
func withFields(w http.ResponseWriter, r *http.Request, fn func(w http.ResponseWriter)) {
	vals, ok := r.URL.Query()["fields"]
	if r.Method != http.MethodGet || !ok {
		fn(w)
		return
	}
	fw := httptest.NewRecorder() // holds the answer so that its body can be projected
	fn(fw)
	maps.Copy(w.Header(), fw.Header())
	body := fw.Body.Bytes()
	var doc map[string]any
	if fw.Code == http.StatusOK && json.Unmarshal(body, &doc) == nil {
		parseFields(vals[len(vals)-1]).projectContent(doc)
		if b, err := json.Marshal(doc); err == nil {
			body = b
		}
	}
	w.WriteHeader(fw.Code)
	_, _ = w.Write(body)
}
