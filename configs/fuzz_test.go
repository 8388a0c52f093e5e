package configs

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParse feeds arbitrary documents to the parser: it must never panic,
// and a refusal must always be a list of problems with messages.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"dev-single.yaml", "production-mgmt1.yaml"} {
		b, err := os.ReadFile(name)
		require.NoError(f, err)
		f.Add(b)
	}
	for _, s := range []string{
		validYAML,
		"",
		"replica: r1\n",
		"clusters:\n  - name: c\n    stormLimit: 33%\n    heartbeatGrace: 40\n    nodes: [{name: n, arrays: {a: b}}]\n",
		"arrays:\n  - &a {name: x, family: unity}\n  - *a\n",
		"a: &x [*x]\n",
		"<<: {replica: {id: r}}\n",
		"replica:\n  id: r\n---\n- 1\n",
		"? [a, b]\n: c\n",
		"raft: {snapshotThreshold: -1, heartbeatTimeout: 1e9}\n",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, dir, Options{CredentialsDir: dir})
		if err == nil {
			require.NotNil(t, cfg)
			return
		}
		var pe *ProblemsError
		require.ErrorAs(t, err, &pe)
		require.NotEmpty(t, pe.Problems)
		for _, p := range pe.Problems {
			require.NotEmpty(t, p.Message)
		}
	})
}
