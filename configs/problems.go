package configs

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-viper/mapstructure/v2"
	"go.yaml.in/yaml/v3"
)

// Problem is one thing wrong with a configuration.
type Problem struct {
	// Path is the field, e.g. clusters[1].arrays[0]; empty for problems
	// with the document as a whole.
	Path string
	// Line is the YAML line of the field (or of its nearest parent in the
	// file when the field is absent); 0 when unknown.
	Line int
	// Env names the environment variable the value came from, if any.
	Env string
	// Message says what is wrong. It never contains a secret.
	Message string
}

// String formats the problem as `path: message (line N)`.
func (p Problem) String() string {
	var b strings.Builder
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	switch {
	case p.Env != "":
		fmt.Fprintf(&b, " (from $%s)", p.Env)
	case p.Line > 0:
		fmt.Fprintf(&b, " (line %d)", p.Line)
	}
	return b.String()
}

// ProblemsError lists every problem found in a configuration.
type ProblemsError struct {
	// File is the configuration file's path, when loaded from a file.
	File     string
	Problems []Problem
}

// Error implements error.
func (e *ProblemsError) Error() string {
	var b strings.Builder
	name := "configuration"
	if e.File != "" {
		name = "configuration " + e.File
	}
	n := len(e.Problems)
	fmt.Fprintf(&b, "%s has %d problem", name, n)
	if n != 1 {
		b.WriteString("s")
	}
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// newProblemsError resolves every problem's path and line, removes secrets
// from messages and sorts the problems by line.
func newProblemsError(root *yaml.Node, probs []Problem, secrets []string) *ProblemsError {
	out := make([]Problem, 0, len(probs))
	seen := map[string]bool{}
	for _, p := range probs {
		if p.Path != "" {
			display, line := locate(root, p.Path)
			p.Path = display
			if p.Line == 0 {
				p.Line = line
			}
			if env := envFor(p.Path); env != "" {
				p.Env = env
			}
		}
		p.Message = redact(p.Message, secrets)
		key := strings.ToLower(p.Path) + "\x00" + p.Message
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, p)
	}
	sort.SliceStable(out, func(i, j int) bool {
		li, lj := out[i].Line, out[j].Line
		if li == 0 || lj == 0 {
			return li != 0 && lj == 0
		}
		return li < lj
	})
	return &ProblemsError{Problems: out}
}

// envFor returns the FENCED_* variable that set path, if it is set.
func envFor(path string) string {
	if path == "" || strings.ContainsAny(path, "[]") {
		return ""
	}
	name := EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
	if _, ok := os.LookupEnv(name); ok {
		return name
	}
	return ""
}

// redact replaces every secret in s.
func redact(s string, secrets []string) string {
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, redacted)
		}
	}
	return s
}

// inlineSecrets collects scalar values of keys that look like secrets, so
// that no message can echo them.
func inlineSecrets(n *yaml.Node) []string {
	var out []string
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		if n == nil || depth > maxDepth {
			return
		}
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				low := strings.ToLower(k.Value)
				if v.Kind == yaml.ScalarNode && (strings.Contains(low, "password") || strings.Contains(low, "secret") || strings.Contains(low, "token")) {
					if !strings.HasSuffix(low, "file") {
						out = append(out, v.Value)
					}
				}
			}
		}
		for _, c := range n.Content {
			walk(c, depth+1)
		}
	}
	walk(n, 0)
	return out
}

// decodeProblems turns mapstructure's joined decode errors into problems,
// one per unknown key.
func decodeProblems(err error) []Problem {
	var out []Problem
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		de, ok := e.(*mapstructure.DecodeError) //nolint:errorlint // the walk unwraps one level at a time itself
		if !ok {
			if u := errors.Unwrap(e); u != nil {
				walk(u)
				return
			}
			out = append(out, Problem{Message: e.Error()})
			return
		}
		inner := de.Unwrap()
		var nested *mapstructure.DecodeError
		if _, ok := inner.(interface{ Unwrap() []error }); ok || errors.As(inner, &nested) {
			walk(inner)
			return
		}
		if keys, ok := strings.CutPrefix(inner.Error(), "has invalid keys: "); ok {
			parent := de.Name()
			if strings.HasPrefix(parent, "configs.") {
				parent = "" // the decoder names the top level by its type
			}
			for _, k := range strings.Split(keys, ", ") {
				out = append(out, Problem{Path: joinPath(parent, k), Message: "unknown setting"})
			}
			return
		}
		out = append(out, Problem{Path: de.Name(), Message: friendly(inner)})
	}
	walk(err)
	return out
}

// friendly rewords decoder errors in the file's terms.
func friendly(err error) string {
	var ute *mapstructure.UnconvertibleTypeError
	if errors.As(err, &ute) {
		return fmt.Sprintf("want %s, got %s", want(ute.Expected.Type()), describe(ute.Value))
	}
	var pe *mapstructure.ParseError
	if errors.As(err, &pe) {
		return fmt.Sprintf("want %s, got %s", want(pe.Expected.Type()), describe(pe.Value))
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "expected a map or struct, got "); ok {
		return "want a mapping of settings, got a " + strings.Trim(rest, `"`)
	}
	return msg
}

// want names what a field of type t accepts.
func want(t reflect.Type) string {
	switch t {
	case durationType:
		return `a duration like "40s"`
	case stormLimitType:
		return `a count ("3") or a percentage ("33%")`
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	default:
		return "a mapping"
	}
}

// describe names a decoded YAML value for a message. Strings are quoted
// and shortened.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "nothing"
	case string:
		if utf8.RuneCountInString(x) > 40 {
			x = string([]rune(x)[:40]) + "..."
		}
		return strconv.Quote(x)
	case []any:
		return "a list"
	case map[string]any, map[any]any:
		return "a mapping"
	case bool, int, int64, uint64, float64:
		return fmt.Sprint(x)
	}
	return "a " + reflect.TypeOf(v).Kind().String()
}
