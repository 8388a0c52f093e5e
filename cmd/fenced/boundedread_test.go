package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/configs"
)

// boundedReadChildEnv makes the test binary, re-run under a memory limit,
// run the CLI with the arguments in it (one per line) and exit with its
// code.
const boundedReadChildEnv = "FENCED_TEST_BOUNDED_READ_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(boundedReadChildEnv); args != "" {
		os.Exit(run(context.Background(), splitLines(args), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func splitLines(s string) []string {
	var out []string
	for _, l := range bytes.Split([]byte(s), []byte("\n")) {
		out = append(out, string(l))
	}
	return out
}

// TestCLIFilesAreReadWithABound: a certificate, key, CA or token file
// that names /dev/zero is refused with an error naming the file and the
// bound, in a process whose address space is limited to 2 GiB (an
// unbounded read of /dev/zero would die there of "out of memory").
func TestCLIFilesAreReadWithABound(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to set a memory limit with")
	}
	self, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	// A valid-looking pair is not needed: the bound is hit before parsing.
	ok := filepath.Join(dir, "small.pem")
	require.NoError(t, os.WriteFile(ok, []byte("not pem\n"), 0o600))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"cert-file", []string{"status", "--addr", "https://127.0.0.1:1", "--cert-file", "/dev/zero", "--key-file", ok}, fmt.Sprintf("/dev/zero is larger than %d bytes", configs.MaxPEMBytes)},
		{"key-file", []string{"status", "--addr", "https://127.0.0.1:1", "--cert-file", ok, "--key-file", "/dev/zero"}, fmt.Sprintf("/dev/zero is larger than %d bytes", configs.MaxPEMBytes)},
		{"ca-file", []string{"status", "--addr", "https://127.0.0.1:1", "--ca-file", "/dev/zero"}, fmt.Sprintf("/dev/zero is larger than %d bytes", configs.MaxPEMBytes)},
		{"token-file", []string{"pause", "--addr", "http://127.0.0.1:1", "--token-file", "/dev/zero", "--reason", "x"}, fmt.Sprintf("/dev/zero is larger than %d bytes", configs.MaxSecretBytes)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args bytes.Buffer
			for i, a := range tc.args {
				if i > 0 {
					args.WriteByte('\n')
				}
				args.WriteString(a)
			}
			cmd := exec.Command("sh", "-c", `ulimit -v 2097152 && exec "$0"`, self)
			cmd.Env = append(os.Environ(), boundedReadChildEnv+"="+args.String())
			out, err := cmd.CombinedOutput()
			msg := string(out)
			if len(msg) > 2000 {
				msg = msg[:2000] // a crash's first lines say why
			}
			require.Error(t, err, "the command fails: %s", msg)
			assert.NotContains(t, msg, "out of memory")
			assert.Contains(t, msg, tc.want, "the error names the file and the bound")
			assert.Contains(t, msg, "--"+tc.name, "the error names the flag")
		})
	}
}
