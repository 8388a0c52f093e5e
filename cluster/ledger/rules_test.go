package ledger

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// rulesLock records, for each ledger version, the SHA-256 of the files
// that hold Apply's rules as they were when that version was last changed.
const rulesLock = "rules.lock"

var updateRules = flag.Bool("update-rules", false, "record the hash of the FSM rule files for ledger.Version in "+rulesLock)

// ruleFiles are the files whose contents decide what Apply does with an
// entry: a change to any of them is a rule change.
func ruleFiles(t *testing.T) []string {
	files, err := filepath.Glob("apply_*.go")
	require.NoError(t, err)
	files = append(files, "transitions.go", "validate.go")
	files = slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, "_test.go") })
	slices.Sort(files)
	return files
}

func rulesHash(t *testing.T) string {
	h := sha256.New()
	for _, f := range ruleFiles(t) {
		buf, err := os.ReadFile(f)
		require.NoError(t, err)
		fmt.Fprintf(h, "%s\n%d\n", f, len(buf))
		h.Write([]byte(strings.ReplaceAll(string(buf), "\r\n", "\n")))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func readRulesLock(t *testing.T) map[int]string {
	f, err := os.Open(rulesLock)
	require.NoError(t, err)
	defer f.Close()
	out := map[int]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		require.Len(t, fields, 2, "%s: line %q is not \"<version> <sha256>\"", rulesLock, line)
		v, err := strconv.Atoi(fields[0])
		require.NoError(t, err, "%s: line %q", rulesLock, line)
		out[v] = fields[1]
	}
	require.NoError(t, sc.Err())
	return out
}

// TestRulesLocked fails when Apply's rules (transitions.go, validate.go,
// apply_*.go) changed while ledger.Version stayed the same: replicas of
// two builds would then apply the same committed log differently.
func TestRulesLocked(t *testing.T) {
	got := rulesHash(t)
	lock := readRulesLock(t)
	if *updateRules {
		lock[Version] = got
		var b strings.Builder
		b.WriteString("# SHA-256 of the ledger's FSM rule files (transitions.go, validate.go, apply_*.go)\n")
		b.WriteString("# for each ledger version, written by: go test ./cluster/ledger -run TestRulesLocked -update-rules\n")
		b.WriteString("# Read TestRulesLocked before changing this file.\n")
		for _, v := range slices.Sorted(func(yield func(int) bool) {
			for v := range lock {
				if !yield(v) {
					return
				}
			}
		}) {
			fmt.Fprintf(&b, "%d %s\n", v, lock[v])
		}
		require.NoError(t, os.WriteFile(rulesLock, []byte(b.String()), 0o644))
		return
	}
	want, ok := lock[Version]
	require.True(t, ok, "ledger.Version is %d but %s has no hash for it.\n"+
		"If you bumped Version for a rule change, record the new rules:\n"+
		"  go test ./cluster/ledger -run TestRulesLocked -update-rules", Version, rulesLock)
	require.Equal(t, want, got, "The ledger's FSM rules changed (transitions.go, validate.go or an apply_*.go file) "+
		"but ledger.Version is still %d.\n"+
		"A committed log must apply identically on every build that accepts it, so a rule change is a new version:\n"+
		"  1. bump ledger.Version (commands.go) and say what the version adds;\n"+
		"  2. keep the old rule for entries of the old version (select it by the entry's Meta.V, as rules[v] in transitions.go does);\n"+
		"  3. add the version's rules to every table keyed by version, and a test that an entry of each version keeps its rule;\n"+
		"  4. record the new hash: go test ./cluster/ledger -run TestRulesLocked -update-rules\n"+
		"Leaders write the new version only once every voter advertises it (the group ledger version).\n"+
		"If the change cannot alter any outcome, error text or state of any entry (a comment, a rename), "+
		"re-record the hash with -update-rules and say why in the commit message.", Version)
}
