package detector

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseLimit(t *testing.T) {
	tcs := []struct {
		in      string
		want    Limit
		wantErr bool
	}{
		{"3", Limit{Value: 3}, false},
		{" 33% ", Limit{Value: 33, Percent: true}, false},
		{"0", Limit{}, false},
		{"100%", Limit{Value: 100, Percent: true}, false},
		{"101%", Limit{}, true},
		{"-1", Limit{}, true},
		{"%", Limit{}, true},
		{"three", Limit{}, true},
		{"", Limit{}, true},
	}
	for _, tc := range tcs {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseLimit(tc.in)
			if tc.wantErr {
				require.ErrorContains(t, err, "limit")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestLimitOf(t *testing.T) {
	assert.Equal(t, 3, Limit{Value: 33, Percent: true}.Of(10))
	assert.Equal(t, 1, Limit{Value: 33, Percent: true}.Of(2), "never below 1 in a non-empty cluster")
	assert.Equal(t, 0, Limit{Value: 33, Percent: true}.Of(0))
	assert.Equal(t, 0, Limit{Value: 0, Percent: true}.Of(10))
	assert.Equal(t, 5, Limit{Value: 5}.Of(3))
}

func TestPolicyValidateNamesTheField(t *testing.T) {
	require.NoError(t, DefaultPolicy().Validate())
	tcs := []struct {
		field  string
		mutate func(*Policy)
	}{
		{"heartbeatGrace", func(p *Policy) { p.HeartbeatGrace = 0 }},
		{"pollInterval", func(p *Policy) { p.PollInterval = -time.Second }},
		{"probeAfter", func(p *Policy) { p.ProbeAfter = time.Hour }},
		{"stormCooldown", func(p *Policy) { p.StormCooldown = -1 }},
		{"apiCheckMaxAge", func(p *Policy) { p.APICheckMaxAge = time.Second }},
		{"corroboration", func(p *Policy) { p.Corroboration = "maybe" }},
		{"partitioned", func(p *Policy) { p.Partitioned = "" }},
		{"maxUnhealthy", func(p *Policy) { p.MaxUnhealthy = Limit{Value: 150, Percent: true} }},
	}
	for _, tc := range tcs {
		t.Run(tc.field, func(t *testing.T) {
			p := DefaultPolicy()
			tc.mutate(&p)
			require.ErrorContains(t, p.Validate(), tc.field)
		})
	}
}

func FuzzParseLimit(f *testing.F) {
	for _, s := range []string{"3", "33%", "0", "100%", "-1", "%", "", " 7 ", "1e3", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLimit(s)
		if err != nil {
			return
		}
		require.GreaterOrEqual(t, l.Value, 0)
		back, err := ParseLimit(l.String())
		require.NoError(t, err)
		require.Equal(t, l, back)
		for _, n := range []int{0, 1, 7, 1000} {
			require.GreaterOrEqual(t, l.Of(n), 0)
		}
	})
}
