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
	}{
		{in: "3", str: "3"},
		{in: "33%", str: "33%"},
		{in: " 100% ", str: "100%"},
		{in: "1%", str: "1%"},
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
			var back StormLimit
			b, err := l.MarshalText()
			require.NoError(t, err)
			require.NoError(t, back.UnmarshalText(b))
			assert.Equal(t, l, back)
		})
	}
}
