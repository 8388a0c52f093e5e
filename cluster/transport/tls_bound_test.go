package transport

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Certificate, key and CA files are read with a bound (/dev/zero is
// refused, naming the file and the bound).
func TestLoadCredentialsBoundsFiles(t *testing.T) {
	want := fmt.Sprintf("/dev/zero is larger than %d bytes", MaxPEMBytes)
	for _, args := range [][3]string{
		{"/dev/zero", "/dev/null", "/dev/null"},
		{"/dev/null", "/dev/zero", "/dev/null"},
	} {
		_, err := LoadCredentials(args[0], args[1], args[2], "")
		require.Error(t, err)
		assert.Contains(t, err.Error(), want)
	}
}
