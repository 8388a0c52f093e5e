package configs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStormLimit(t *testing.T) {
	tcs := []struct {
		in      string
		wantErr bool
		str     string
		max     map[int]int // total nodes -> allowed
	}{
		{in: "3", str: "3", max: map[int]int{1: 3, 10: 3}},
		{in: "33%", str: "33%", max: map[int]int{0: 0, 1: 1, 3: 1, 4: 2, 10: 4, 100: 33}},
		{in: " 100% ", str: "100%", max: map[int]int{7: 7}},
		{in: "1%", str: "1%", max: map[int]int{1000: 10, 5: 1}},
		{in: "0", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "0%", wantErr: true},
		{in: "101%", wantErr: true},
		{in: "33.3%", wantErr: true},
		{in: "%", wantErr: true},
		{in: "", wantErr: true},
		{in: "three", wantErr: true},
	}
	for _, tc := range tcs {
		t.Run(tc.in, func(t *testing.T) {
			l, err := ParseStormLimit(tc.in)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.str, l.String())
			for total, want := range tc.max {
				assert.Equal(t, want, l.Max(total), "total %d", total)
			}
			var back StormLimit
			b, err := l.MarshalText()
			require.NoError(t, err)
			require.NoError(t, back.UnmarshalText(b))
			assert.Equal(t, l, back)
		})
	}
}
