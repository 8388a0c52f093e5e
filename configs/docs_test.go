package configs

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReferenceDocumentsEveryKey checks docs/config.md names every key of
// the schema, so the reference cannot fall behind the code. Keys below a
// section are written relative to it: `tls.certFile`, `nodes[].name`.
func TestReferenceDocumentsEveryKey(t *testing.T) {
	b, err := os.ReadFile("../docs/config.md")
	require.NoError(t, err)
	doc := string(b)
	documented := func(key string) {
		if !strings.Contains(doc, "`"+key+"`") {
			t.Errorf("docs/config.md lacks `%s`", key)
		}
	}
	structOf := func(t reflect.Type) (reflect.Type, string) {
		switch {
		case t.Kind() == reflect.Struct && t != stormLimitType:
			return t, "."
		case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
			return t.Elem(), "[]."
		}
		return nil, ""
	}
	var walk func(reflect.Type, string)
	walk = func(typ reflect.Type, prefix string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			tag := f.Tag.Get("mapstructure")
			if tag == "" {
				continue
			}
			if st, sep := structOf(f.Type); st != nil {
				walk(st, prefix+tag+sep)
				continue
			}
			documented(prefix + tag)
		}
	}
	top := reflect.TypeFor[Config]()
	for i := range top.NumField() {
		f := top.Field(i)
		tag := f.Tag.Get("mapstructure")
		if tag == "" {
			continue
		}
		documented(tag)
		if st, _ := structOf(f.Type); st != nil {
			walk(st, "")
		}
	}
}
