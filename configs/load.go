package configs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

// EnvPrefix is the prefix of environment variables that override scalar
// settings outside lists: FENCED_HTTP_LISTEN overrides http.listen,
// FENCED_REPLICA_DATADIR overrides replica.dataDir.
const EnvPrefix = "FENCED"

// Options adjust how a configuration is checked.
type Options struct {
	// CredentialsDir resolves credential:NAME references when checking that
	// referenced files exist. Empty leaves credential references unchecked;
	// Config.UncheckedCredentials lists them.
	CredentialsDir string
	// SkipFileChecks skips checking that referenced files exist.
	SkipFileChecks bool
	// CheckContents also reads every referenced file and checks what is in
	// it, as `fenced config validate` does: certificates and keys match,
	// are valid, and carry the names and extended key usages peers and
	// clients check; CA bundles, secrets, the API token and CHAP secrets
	// parse; kubeconfigs load and name a server (CheckKubeconfig). Certificates that expire
	// within ExpiryWarning are reported by Config.Warnings.
	CheckContents bool
	// Now is the time certificates are checked at; zero means now.
	Now time.Time
	// CheckKubeconfig loads a kubeconfig the way the runtime does and
	// returns the API server it names (kube.CheckKubeconfig); CheckContents
	// uses it for clusters[].kubeconfig. Nil: kubeconfigs are only read.
	// It is a hook so that this package does not depend on the Kubernetes
	// client.
	CheckKubeconfig func(path string) (server string, err error)
}

// Load reads, decodes and validates the configuration file at path.
// Relative file references are resolved against the file's directory. Any
// problem with the content is reported as *ProblemsError listing all of them.
func Load(path string, opts Options) (*Config, error) {
	data, err := ReadFileLimited(path, MaxConfigBytes)
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	cfg, err := Parse(data, filepath.Dir(abs), opts)
	var pe *ProblemsError
	if errors.As(err, &pe) {
		pe.File = path
	}
	return cfg, err
}

// Parse decodes and validates a configuration. baseDir anchors relative file
// references. It never panics: every problem becomes a Problem in the
// returned *ProblemsError.
func Parse(data []byte, baseDir string, opts Options) (*Config, error) {
	root, probs := parseYAML(data)
	secrets := inlineSecrets(root)
	if len(probs) > 0 {
		return nil, newProblemsError(root, probs, secrets)
	}
	cfg, probs := decode(data, root)
	if cfg == nil {
		return nil, newProblemsError(root, probs, secrets)
	}
	cfg.baseDir = baseDir
	cfg.absolutize(baseDir)
	for i := range cfg.Arrays {
		cfg.Arrays[i].applyFamilyDefaults()
	}
	if cfg.Replica.RaftAdvertiseAddress == "" && !unspecifiedHost(cfg.Replica.RaftBindAddress) {
		cfg.Replica.RaftAdvertiseAddress = cfg.Replica.RaftBindAddress
	}
	vprobs, warns := validate(cfg, root, opts)
	warns = append(warns, envWarnings(os.Environ())...)
	probs = append(probs, dropCovered(vprobs, probs)...)
	if len(probs) > 0 {
		return nil, newProblemsError(root, probs, secrets)
	}
	if len(warns) > 0 {
		cfg.warnings = newProblemsError(root, warns, secrets).Problems
	}
	cfg.addArrayDrivers()
	return cfg, nil
}

// parseYAML parses data into a node tree and checks its structure: one
// document, a mapping at the top, plain keys without dots, and no key given
// twice (keys are case-insensitive).
func parseYAML(data []byte) (*yaml.Node, []Problem) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, []Problem{yamlProblem(err)}
	}
	var probs []Problem
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		probs = append(probs, yamlProblem(err))
	default:
		probs = append(probs, Problem{Line: extra.Line, Message: "more than one YAML document; want exactly one"})
	}
	if len(doc.Content) == 0 {
		return nil, probs
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, probs
	}
	if root.Kind != yaml.MappingNode {
		return root, append(probs, Problem{Line: root.Line, Message: "the top level must be a mapping of settings"})
	}
	probs = append(probs, checkKeys(root, "", 0)...)
	return root, probs
}

// yamlProblem turns a YAML syntax error into a Problem with its line.
func yamlProblem(err error) Problem {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, after, ok := strings.Cut(rest, ": "); ok {
			if _, err := fmt.Sscanf(n, "%d", &line); err == nil {
				msg = after
			}
		}
	}
	return Problem{Line: line, Message: "invalid YAML: " + msg}
}

// maxDepth bounds the nesting checkKeys descends; the schema is far shallower.
const maxDepth = 64

// checkKeys walks mappings and reports non-scalar keys, keys with dots and
// keys given twice when compared without case (viper folds case).
func checkKeys(n *yaml.Node, path string, depth int) []Problem {
	if depth > maxDepth {
		return []Problem{{Path: path, Line: n.Line, Message: "nested too deeply"}}
	}
	var probs []Problem
	switch n.Kind {
	case yaml.MappingNode:
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				probs = append(probs, Problem{Path: path, Line: k.Line, Message: "keys must be plain names"})
				continue
			}
			if k.Value == "<<" {
				continue // merge key: its content is checked where it is defined
			}
			kp := joinPath(path, k.Value)
			if strings.Contains(k.Value, ".") || k.Value == "" {
				probs = append(probs, Problem{Path: kp, Line: k.Line, Message: fmt.Sprintf("invalid key %q: keys are names without dots", k.Value)})
				continue
			}
			low := strings.ToLower(k.Value)
			if prev, dup := seen[low]; dup {
				probs = append(probs, Problem{Path: kp, Line: k.Line, Message: fmt.Sprintf("key given twice (also at line %d; keys ignore case)", prev)})
				continue
			}
			seen[low] = k.Line
			probs = append(probs, checkKeys(v, kp, depth+1)...)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			probs = append(probs, checkKeys(c, fmt.Sprintf("%s[%d]", path, i), depth+1)...)
		}
	}
	return probs
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// decode reads the document through viper (defaults, FENCED_* environment
// overrides) and decodes it strictly: unknown keys are errors.
func decode(data []byte, root *yaml.Node) (*Config, []Problem) {
	v := viper.New()
	v.SetConfigType("yaml")
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	def := DefaultConfig()
	for key, val := range scalarDefaults(reflect.ValueOf(def), "") {
		v.SetDefault(key, val)
	}
	if root != nil {
		if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
			return nil, []Problem{{Message: "invalid YAML: cannot read the document as settings"}}
		}
	}

	// List elements start from their defaults: decoding a list onto
	// existing elements keeps every field the file does not set.
	cfg := def
	if n := listLen(v.Get("clusters")); n > 0 {
		cfg.Clusters = make([]Cluster, n)
		for i := range cfg.Clusters {
			cfg.Clusters[i] = DefaultCluster()
		}
	}
	if n := listLen(v.Get("arrays")); n > 0 {
		cfg.Arrays = make([]Array, n)
		for i := range cfg.Arrays {
			cfg.Arrays[i] = DefaultArray()
		}
	}

	err := v.UnmarshalExact(&cfg, func(dc *mapstructure.DecoderConfig) {
		dc.DecodeHook = mapstructure.ComposeDecodeHookFunc(durationHook, stormLimitHook)
	})
	return &cfg, decodeProblems(err)
}

// scalarDefaults flattens the non-list settings of a default Config into
// viper keys, so that AutomaticEnv knows every key it may override.
func scalarDefaults(v reflect.Value, prefix string) map[string]any {
	out := map[string]any{}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("mapstructure")
		if tag == "" || !f.IsExported() {
			continue
		}
		key := joinPath(prefix, strings.ToLower(tag))
		fv := v.Field(i)
		switch {
		case fv.Kind() == reflect.Struct && f.Type != reflect.TypeFor[StormLimit]():
			for k, val := range scalarDefaults(fv, key) {
				out[k] = val
			}
		case fv.Kind() == reflect.Slice || fv.Kind() == reflect.Map:
			// lists are not overridable from the environment
		default:
			out[key] = fv.Interface()
		}
	}
	return out
}

func listLen(v any) int {
	if l, ok := v.([]any); ok {
		return len(l)
	}
	return 0
}

var (
	durationType   = reflect.TypeFor[time.Duration]()
	stormLimitType = reflect.TypeFor[StormLimit]()
)

// durationHook parses durations and refuses bare numbers: "40" would
// otherwise mean 40 nanoseconds.
func durationHook(from, to reflect.Type, data any) (any, error) {
	if to != durationType || from == durationType {
		return data, nil
	}
	switch d := data.(type) {
	case string:
		v, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil {
			return nil, fmt.Errorf("invalid duration %q: want a number with a unit, like \"40s\" or \"1m30s\"", d)
		}
		return v, nil
	case int, int64, uint64, float64:
		if fmt.Sprint(d) == "0" {
			return time.Duration(0), nil
		}
		return nil, fmt.Errorf("duration %v has no unit: write \"%vs\" for seconds", d, d)
	case nil:
		return data, nil
	}
	return nil, fmt.Errorf("want a duration like \"40s\", got %s", describe(data))
}

// stormLimitHook parses "3" and "33%" (and the number 3).
func stormLimitHook(from, to reflect.Type, data any) (any, error) {
	if to != stormLimitType || from == stormLimitType {
		return data, nil
	}
	switch d := data.(type) {
	case string:
		return ParseStormLimit(d)
	case int, int64, uint64:
		return ParseStormLimit(fmt.Sprint(d))
	case float64:
		return nil, fmt.Errorf("invalid limit %v: want a whole count (\"3\") or a percentage (\"33%%\")", d)
	case nil:
		return data, nil
	}
	return nil, fmt.Errorf("want a count (\"3\") or a percentage (\"33%%\"), got %s", describe(data))
}

// dropCovered drops validation problems at or under a path the decoder
// already reported: a value that did not decode need not also be "required".
func dropCovered(probs, decoded []Problem) []Problem {
	out := probs[:0]
	for _, p := range probs {
		lp := strings.ToLower(p.Path)
		covered := false
		for _, d := range decoded {
			ld := strings.ToLower(d.Path)
			if d.Path != "" && (lp == ld || strings.HasPrefix(lp, ld+".") || strings.HasPrefix(lp, ld+"[")) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, p)
		}
	}
	return out
}
