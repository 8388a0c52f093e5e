package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDebianVersion(t *testing.T) {
	tcs := []struct{ in, want string }{
		{"v1.2.3", "1.2.3"},
		{"1.2.3", "1.2.3"},
		{"v1.2.3-4-gabc1234", "1.2.3+4.gabc1234"},
		{"v1.2.3-rc1", "1.2.3~rc1"},
		{"v1.2.3-rc1-4-gabc1234", "1.2.3~rc1+4.gabc1234"},
		{"v1.2.3-dirty", "1.2.3+dirty"},
		{"abc1234", "0.0.0~gitabc1234"},
		{"abc1234-dirty", "0.0.0~gitabc1234+dirty"},
		{"81a4838", "0.0.0~git81a4838"},
	}
	for _, tc := range tcs {
		t.Run(tc.in, func(t *testing.T) {
			got, err := DebianVersion(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	for _, bad := range []string{"", "  ", "v1.2 3", "1.2.3_4"} {
		_, err := DebianVersion(bad)
		assert.Error(t, err, "%q", bad)
	}
}
