package configs

import (
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// segment is one step of a field path: a key or a list index.
type segment struct {
	key   string
	index int
	isIdx bool
}

// splitPath splits "clusters[1].nodes[0].arrays[pstore-1]" (the decoder's
// form) or "clusters[1].nodes[0].arrays.pstore-1" into segments.
func splitPath(path string) []segment {
	var segs []segment
	for i := 0; i < len(path); {
		switch path[i] {
		case '.':
			i++
		case '[':
			end := strings.IndexByte(path[i:], ']')
			if end < 0 {
				segs = append(segs, segment{key: path[i+1:]})
				return segs
			}
			inner := path[i+1 : i+end]
			if n, err := strconv.Atoi(inner); err == nil {
				segs = append(segs, segment{index: n, isIdx: true})
			} else {
				segs = append(segs, segment{key: inner})
			}
			i += end + 1
		default:
			end := strings.IndexAny(path[i:], ".[")
			if end < 0 {
				end = len(path) - i
			}
			segs = append(segs, segment{key: path[i : i+end]})
			i += end
		}
	}
	return segs
}

// locate returns the canonical spelling of a field path (the schema's
// camelCase names; the file's spelling for keys the schema does not know)
// and the YAML line of the field, or of its nearest parent present in the
// file.
func locate(root *yaml.Node, path string) (string, int) {
	var b strings.Builder
	t := reflect.TypeFor[Config]()
	n := root
	line := 0
	if root != nil {
		line = root.Line
	}
	for _, s := range splitPath(path) {
		n = deref(n)
		if s.isIdx {
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
			if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
				t = t.Elem()
			} else {
				t = nil
			}
			if n != nil && n.Kind == yaml.SequenceNode && s.index >= 0 && s.index < len(n.Content) {
				n = n.Content[s.index]
				line = n.Line
			} else {
				n = nil
			}
			continue
		}
		name := s.key
		var keyNode *yaml.Node
		if n != nil && n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if strings.EqualFold(n.Content[i].Value, s.key) {
					keyNode, n = n.Content[i], n.Content[i+1]
					break
				}
			}
		}
		if keyNode == nil {
			n = nil
		} else {
			line = keyNode.Line
			name = keyNode.Value
		}
		switch {
		case t != nil && t.Kind() == reflect.Struct:
			if f, ok := fieldByTag(t, s.key); ok {
				name, t = f.Tag.Get("mapstructure"), f.Type
			} else {
				t = nil
			}
		case t != nil && t.Kind() == reflect.Map:
			t = t.Elem()
		default:
			t = nil
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(name)
	}
	return b.String(), line
}

// deref follows YAML aliases.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < maxDepth; i++ {
		n = n.Alias
	}
	return n
}

// fieldByTag finds the struct field whose mapstructure tag matches key,
// ignoring case.
func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if tag := f.Tag.Get("mapstructure"); tag != "" && strings.EqualFold(tag, key) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// lookup returns the node at path, or nil when the file does not have it.
func lookup(root *yaml.Node, path string) *yaml.Node {
	n := root
	for _, s := range splitPath(path) {
		n = deref(n)
		if n == nil {
			return nil
		}
		if s.isIdx {
			if n.Kind != yaml.SequenceNode || s.index < 0 || s.index >= len(n.Content) {
				return nil
			}
			n = n.Content[s.index]
			continue
		}
		if n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if strings.EqualFold(n.Content[i].Value, s.key) {
				next = n.Content[i+1]
				break
			}
		}
		n = next
	}
	return deref(n)
}
