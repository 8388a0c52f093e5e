package auditcheck

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// arrayLine is one line of an array's audit file.
type arrayLine struct {
	Kind      string          `json:"kind"`
	Array     string          `json:"array"`
	State     json.RawMessage `json:"state"`
	Seq       int64           `json:"seq"`
	Time      time.Time       `json:"time"`
	Done      time.Time       `json:"done"`
	Requester string          `json:"requester"`
	Method    string          `json:"method"`
	Path      string          `json:"path"`
	Status    int             `json:"status"`
	Objects   []struct {
		Object string          `json:"object"`
		Before json.RawMessage `json:"before"`
		After  json.RawMessage `json:"after"`
	} `json:"objects"`
}

// arrayFile is one array's record.
type arrayFile struct {
	name  string
	start map[string]json.RawMessage // object name -> JSON
	lines []arrayLine                // requests that changed objects
}

// readArray reads an array's audit file. A last line without its newline
// (still being written) is left out.
func readArray(name string, r io.Reader) (*arrayFile, error) {
	out := &arrayFile{name: name}
	br := bufio.NewReader(r)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("array %s: read: %w", name, err)
		}
		var l arrayLine
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("array %s: line %d: %w", name, line, err)
		}
		switch l.Kind {
		case "start":
			if out.start != nil {
				return nil, fmt.Errorf("array %s: line %d: a second start line", name, line)
			}
			out.start, err = splitState(l.State)
			if err != nil {
				return nil, fmt.Errorf("array %s: line %d: %w", name, line, err)
			}
		case "request":
			if out.start == nil {
				return nil, fmt.Errorf("array %s: line %d: a request before the start line", name, line)
			}
			if len(l.Objects) > 0 {
				out.lines = append(out.lines, l)
			}
		default:
			return nil, fmt.Errorf("array %s: line %d: kind %q is neither start nor request", name, line, l.Kind)
		}
	}
	if out.start == nil {
		return nil, fmt.Errorf("array %s: no start line", name)
	}
	return out, nil
}

// keyFields are the fields an object of a list is named by, in order of
// preference ("hosts[<id>]"); a list where some object has none, or two
// share one, names its objects by position ("hosts[0]").
var keyFields = []string{"id", "name", "sdcId", "port_name", "initiatorId", "maskingViewId", "volumeId", "storageGroupId"}

// splitState names the objects of a state: each element of a top-level
// list, and each other top-level member.
func splitState(state json.RawMessage) (map[string]json.RawMessage, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(state, &members); err != nil {
		return nil, fmt.Errorf("state is not a JSON object: %w", err)
	}
	out := map[string]json.RawMessage{}
	for m, raw := range members {
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil || bytes.HasPrefix(bytes.TrimSpace(raw), []byte("null")) {
			out[m] = raw
			continue
		}
		keys := make([]string, len(list))
		seen := map[string]bool{}
		keyed := true
		for i, e := range list {
			k := elementKey(e)
			if k == "" || seen[k] {
				keyed = false
				break
			}
			seen[k], keys[i] = true, k
		}
		for i, e := range list {
			k := strconv.Itoa(i)
			if keyed {
				k = keys[i]
			}
			out[m+"["+k+"]"] = e
		}
	}
	return out, nil
}

// elementKey is the value of an object's first key field, "" if none.
func elementKey(e json.RawMessage) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(e, &obj) != nil {
		return ""
	}
	for _, f := range keyFields {
		raw, ok := obj[f]
		if !ok {
			continue
		}
		var v any
		if json.Unmarshal(raw, &v) != nil || v == nil {
			return ""
		}
		s, isString := v.(string)
		if !isString {
			s = fmt.Sprint(v)
		}
		return s
	}
	return ""
}

// strings returns every string value in a JSON value, with repeats.
func stringsOf(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// identifiers returns an object's own ids and names: the string values of
// its top-level members "id", "name" and "<collection>Id" (hostId of an
// object of "hosts").
func identifiers(object string, raw json.RawMessage) []string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil
	}
	coll, _, _ := strings.Cut(object, "[")
	fields := []string{"id", "name", strings.TrimSuffix(coll, "s") + "Id"}
	var out []string
	for _, f := range fields {
		var s string
		if json.Unmarshal(obj[f], &s) == nil && s != "" {
			out = append(out, s)
		}
	}
	return out
}
