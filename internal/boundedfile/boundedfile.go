// Package boundedfile reads files a user names (certificates, keys, CA
// bundles, tokens, kubeconfigs) with a size bound, so that a path naming
// /dev/zero, a FIFO that never ends or a runaway file is refused with an
// error naming the file and the bound instead of exhausting memory.
package boundedfile

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Read reads the file at path when it holds at most limit bytes. It reads
// at most limit+1 bytes, whatever the file is.
func Read(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes: not a file fenced reads", path, limit)
	}
	return b, nil
}
