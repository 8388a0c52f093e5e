package configs

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// clientEnv are the FENCED_* variables the fenced command reads itself
// (the operator commands' flags), besides the settings' overrides.
func clientEnv() []string {
	return []string{"FENCED_ADDR", "FENCED_CONFIG", "FENCED_TOKEN_FILE", "FENCED_CERT_FILE", "FENCED_KEY_FILE", "FENCED_CA_FILE"}
}

// EnvWarnings names the FENCED_* variables of environ that are neither a
// setting's override nor read by the fenced command, for commands that
// load no configuration (Parse reports them among its warnings).
func EnvWarnings(environ []string) []Problem { return envWarnings(environ) }

// envWarnings names the FENCED_* variables of environ that neither
// override a setting nor are read by the fenced command: a misspelled
// override is otherwise ignored without a word, whereas an unknown key in
// the file is an error. Variables of the project's own test harnesses
// (FENCED_E2E..., FENCED_TEST_..., FENCED_CHAOS_...) are not settings and
// are passed over.
func envWarnings(environ []string) []Problem {
	known := map[string]bool{}
	for _, n := range clientEnv() {
		known[n] = true
	}
	for key := range scalarDefaults(reflect.ValueOf(DefaultConfig()), "") {
		known[settingEnv(key)] = true
	}
	var names []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix+"_") || known[name] || testEnv(name) {
			continue
		}
		names = append(names, name)
	}
	slices.Sort(names)
	var out []Problem
	for _, name := range slices.Compact(names) {
		msg := fmt.Sprintf("environment variable %s is not a setting and is ignored", name)
		if near := nearest(name, known); near != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", near)
		} else {
			msg += fmt.Sprintf(" (a setting's variable is %s_ and its path in capitals, dots as _, e.g. %s)",
				EnvPrefix, settingEnv("replica.datadir"))
		}
		// The message names the variable: no Env, or it would say it twice.
		out = append(out, Problem{Message: msg})
	}
	return out
}

// settingEnv is the variable that overrides the setting at key.
func settingEnv(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

func testEnv(name string) bool {
	for _, p := range []string{"FENCED_E2E", "FENCED_TEST_", "FENCED_CHAOS_", "FENCED_ALERT_TESTS", "FENCED_OLD_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// nearest is the known name closest to name, within two edits.
func nearest(name string, known map[string]bool) string {
	best, dist := "", 3
	for k := range known {
		if d := editDistance(name, k); d < dist || (d == dist && k < best) {
			best, dist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
