package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BinaryEnv names the environment variable holding the fenced binary the
// harness runs.
const BinaryEnv = "FENCED_E2E_BINARY"

// ModuleRoot returns the directory of the repository's go.mod, found from
// the working directory upwards.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(data), "module github.com/fenced-project/fenced\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find module root: no go.mod of github.com/fenced-project/fenced above the working directory")
		}
		dir = parent
	}
}

// BuildFenced builds ./cmd/fenced of this tree, with the given build tags,
// into outDir and returns the binary's path.
func BuildFenced(ctx context.Context, outDir string, tags ...string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(outDir, "fenced")
	args := []string{"build", "-o", out}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/fenced")...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/fenced: %w\n%s", err, b)
	}
	return out, nil
}
