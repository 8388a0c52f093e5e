package simcore

import (
	"bytes"
	"encoding/json"
)

// The audit diff splits marshalled snapshots with this small scanner instead
// of encoding/json, which validates and decodes the whole document on every
// call: at a thousand hosts that cost more than the write being audited.
// The input is json.Marshal output (compact, valid); the scanner never
// reads out of bounds on anything else and reports false where it cannot
// split, which the diff reports as a change of the whole document.

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the string that starts at b[i] == '"'.
func skipString(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

// skipValue returns the index after the value that starts at b[i].
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, ok := skipString(b, i)
				if !ok {
					return 0, false
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
		}
		return 0, false
	default:
		start := i
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i, i > start
			}
			i++
		}
		return i, i > start
	}
}

// openList skips the opening byte of a JSON array or object: empty reports
// one with nothing in it, i the index of its first item.
func openList(b []byte, open, close byte) (i int, empty, ok bool) {
	i = skipSpace(b, 0)
	if i >= len(b) || b[i] != open {
		return 0, false, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == close {
		return i, true, skipSpace(b, i+1) == len(b)
	}
	return i, false, true
}

// nextItem moves past the separator after an item that ends at end: more
// reports that another item follows at i; ok is false when neither a
// comma nor the closing byte (ending the input) comes next.
func nextItem(b []byte, end int, close byte) (i int, more, ok bool) {
	i = skipSpace(b, end)
	switch {
	case i >= len(b):
		return 0, false, false
	case b[i] == ',':
		return skipSpace(b, i+1), true, true
	case b[i] == close:
		return 0, false, skipSpace(b, i+1) == len(b)
	}
	return 0, false, false
}

// eachElement calls fn with each element of the JSON array b.
func eachElement(b []byte, fn func(raw []byte)) bool {
	i, empty, ok := openList(b, '[', ']')
	if !ok || empty {
		return ok
	}
	for {
		end, ok := skipValue(b, i)
		if !ok {
			return false
		}
		fn(b[i:end])
		var more bool
		if i, more, ok = nextItem(b, end, ']'); !more {
			return ok
		}
	}
}

// eachMember calls fn with the raw (still quoted) name and the value of each
// member of the JSON object b.
func eachMember(b []byte, fn func(name, raw []byte)) bool {
	i, empty, ok := openList(b, '{', '}')
	if !ok || empty {
		return ok
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return false
		}
		nameEnd, ok := skipString(b, i)
		if !ok {
			return false
		}
		name := b[i:nameEnd]
		i = skipSpace(b, nameEnd)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		end, ok := skipValue(b, i)
		if !ok {
			return false
		}
		fn(name, b[i:end])
		var more bool
		if i, more, ok = nextItem(b, end, '}'); !more {
			return ok
		}
	}
}

// memberName unquotes a raw member name.
func memberName(raw []byte) (string, bool) {
	if len(raw) >= 2 && bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// objectMembers splits a JSON object into its members (the last of a
// repeated name wins, as in encoding/json).
func objectMembers(b []byte) (map[string][]byte, bool) {
	m := map[string][]byte{}
	ok := true
	if !eachMember(b, func(name, raw []byte) {
		n, good := memberName(name)
		if !good {
			ok = false
			return
		}
		m[n] = raw
	}) || !ok {
		return nil, false
	}
	return m, true
}

// arrayElements splits a JSON array into its elements.
func arrayElements(b []byte) ([][]byte, bool) {
	var out [][]byte
	if !eachElement(b, func(raw []byte) { out = append(out, raw) }) {
		return nil, false
	}
	return out, true
}
