package ops

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildBin != "" {
		_ = os.RemoveAll(filepath.Dir(buildBin))
	}
	os.Exit(code)
}
