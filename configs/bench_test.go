package configs

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkParse measures parsing and validating the production example.
func BenchmarkParse(b *testing.B) {
	data, err := os.ReadFile("production-mgmt1.yaml")
	require.NoError(b, err)
	dir := b.TempDir()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data, dir, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
