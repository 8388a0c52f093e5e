package boundedfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(p, []byte("12345"), 0o600))
	b, err := Read(p, 5)
	require.NoError(t, err)
	assert.Equal(t, "12345", string(b))

	_, err = Read(p, 4)
	require.EqualError(t, err, p+" is larger than 4 bytes: not a file fenced reads")
	_, err = Read("/dev/zero", 1<<20)
	require.EqualError(t, err, "/dev/zero is larger than 1048576 bytes: not a file fenced reads")
	_, err = Read(filepath.Join(dir, "missing"), 5)
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), "missing")
}
