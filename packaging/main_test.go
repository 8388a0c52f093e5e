package main

import (
	"os/exec"
	"testing"
	"time"

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
		{"abc1234", "0.0.0~git20260102030405.abc1234"},
		{"abc1234-dirty", "0.0.0~git20260102030405.abc1234+dirty"},
		{"81a4838", "0.0.0~git20260102030405.81a4838"},
	}
	commit := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range tcs {
		t.Run(tc.in, func(t *testing.T) {
			got, err := DebianVersion(tc.in, commit)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	for _, bad := range []string{"", "  ", "v1.2 3", "1.2.3_4"} {
		_, err := DebianVersion(bad, commit)
		require.Error(t, err, "%q", bad)
	}
	_, err := DebianVersion("abc1234", time.Time{})
	assert.ErrorContains(t, err, "untagged: give -commit-time")
}

// TestUntaggedVersionsSort checks with dpkg that untagged builds sort by
// commit time whatever their hashes, before any tagged release.
func TestUntaggedVersionsSort(t *testing.T) {
	dpkg, err := exec.LookPath("dpkg")
	if err != nil {
		t.Skip("dpkg is missing")
	}
	older, err := DebianVersion("ffff000", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	require.NoError(t, err)
	newer, err := DebianVersion("0000fff-dirty", time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC))
	require.NoError(t, err)
	tagged, err := DebianVersion("v0.0.1", time.Time{})
	require.NoError(t, err)
	for _, pair := range [][2]string{{older, newer}, {newer, tagged}} {
		out, err := exec.Command(dpkg, "--compare-versions", pair[0], "lt", pair[1]).CombinedOutput()
		assert.NoError(t, err, "%s < %s: %s", pair[0], pair[1], out)
	}
}
