package arrayclients

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An array's caFile is read with a bound before a Dell client reads it
// whole: /dev/zero is refused, naming the array, the field and the bound.
func TestArrayCAFileIsBounded(t *testing.T) {
	_, err := New([]Config{{Name: "pf1", Family: Families[0], Endpoint: "https://127.0.0.1:1", CAFile: "/dev/zero"}}, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "arrays[pf1].caFile")
	assert.Contains(t, err.Error(), fmt.Sprintf("/dev/zero is larger than %d bytes", MaxCABytes))
}
