package arrayclients_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/all"
)

func TestParseExternalAccess(t *testing.T) {
	nets, err := arrayclients.ParseExternalAccess([]string{"10.20.0.0/16", "192.0.2.7", "2001:db8::/32"})
	require.NoError(t, err)
	assert.Len(t, nets, 3)
	_, err = arrayclients.ParseExternalAccess([]string{"10.20.0.0/16", "nat-gw.example.com"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `externalAccess[1]: "nat-gw.example.com"`)
	_, err = arrayclients.ParseExternalAccess([]string{"10.0.0.0/33"})
	require.Error(t, err)
}

// TestExternalAccessConfigChecked: the entries are refused on a family
// whose driver adds none, and when they do not parse, naming the array.
func TestExternalAccessConfigChecked(t *testing.T) {
	for _, tc := range []struct {
		family arrayclients.Family
		list   []string
		want   string
	}{
		{arrayclients.Unity, []string{"10.0.0.1"}, "arrays[a1].externalAccess: only PowerStore and PowerFlex"},
		{arrayclients.PowerStore, []string{"ten"}, `arrays[a1].externalAccess[0]: "ten"`},
	} {
		_, err := all.New([]arrayclients.Config{{Name: "a1", Family: tc.family, Endpoint: "https://192.0.2.1",
			Username: "u", Password: "p", ExternalAccess: tc.list}}, arrayclients.Options{Registry: prometheus.NewRegistry()})
		require.Error(t, err)
		assert.Contains(t, err.Error(), tc.want)
	}
}
