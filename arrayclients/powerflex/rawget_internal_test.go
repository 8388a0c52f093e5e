package powerflex

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSelectedStatisticsNeedEveryProperty: an entry of a bulk statistics
// answer counts as a reading only with both counters powerFlexIO judges;
// one that lacks either (a gateway that drops a property it does not
// know) is no reading, never zero I/O, so the sweep reads that SDC on its
// own instead of recording a quiet sample.
func TestSelectedStatisticsNeedEveryProperty(t *testing.T) {
	var answer map[string]*selectedSdcStatistics
	require.NoError(t, json.Unmarshal([]byte(`{
		"a": {"userDataReadBwc": {"numOccured": 0, "numSeconds": 1}, "userDataWriteBwc": {"numOccured": 3, "numSeconds": 1}},
		"b": {"userDataReadBwc": {"numOccured": 0, "numSeconds": 1}},
		"c": {},
		"d": null
	}`), &answer))
	st, ok := answer["a"].statistics()
	require.True(t, ok)
	assert.Equal(t, 3, st.UserDataWriteBwc.NumOccured)
	for _, id := range []string{"b", "c", "d", "missing"} {
		_, ok := answer[id].statistics()
		assert.False(t, ok, id)
	}
}
