package arrayclients_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFamiliesImportNoOtherFamily fails if a family package imports
// another family package, directly or through another package.
func TestFamiliesImportNoOtherFamily(t *testing.T) {
	const root = "github.com/fenced-project/fenced/arrayclients/"
	families := []string{"powerflex", "powerstore", "powerscale", "powermax", "unity"}
	isFamily := map[string]bool{}
	for _, f := range families {
		isFamily[root+f] = true
	}
	out, err := exec.Command("go", "list", "-e", "-deps", "-test", "-json=ImportPath,Deps", "./...").Output()
	require.NoError(t, err, "go list the arrayclients packages")
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for dec.More() {
		var p struct {
			ImportPath string
			Deps       []string
		}
		require.NoError(t, dec.Decode(&p))
		fam := strings.TrimSuffix(strings.SplitN(p.ImportPath, " ", 2)[0], "_test")
		if !isFamily[fam] {
			continue
		}
		seen++
		for _, d := range p.Deps {
			if isFamily[d] && d != fam {
				t.Errorf("%s imports family package %s: a family package must not import another", p.ImportPath, d)
			}
		}
	}
	require.NotZero(t, seen, "no family package listed")
}
