package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sio "github.com/dell/goscaleio"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const fixtureYAML = `
nodes:
  - {name: worker-1, ip: 127.0.10.1, sdcGUID: 6A1B0001-0000-4000-8000-000000000001}
arrays:
  - name: pflex-1
    family: powerflex
    spec: {perNode: {volumes: 2}}
  - name: pflex-2
    family: powerflex
`

func TestServesFixtureArrays(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[useTLS], func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "fixture.yaml")
			require.NoError(t, os.WriteFile(path, []byte(fixtureYAML), 0o600))
			args := []string{"-fixture", path, "-cert-dir", dir}
			if useTLS {
				args = append(args, "-tls")
			}
			ctx, cancel := context.WithCancel(context.Background())
			pr, pw := io.Pipe()
			done := make(chan error, 1)
			go func() { done <- run(ctx, args, pw, io.Discard); _ = pw.Close() }()

			sc := bufio.NewScanner(pr)
			var lines [][]string
			for len(lines) < 2 && sc.Scan() {
				lines = append(lines, strings.Fields(sc.Text()))
			}
			require.Len(t, lines, 2)
			for _, f := range lines {
				if useTLS {
					require.Len(t, f, 4)
					assert.True(t, strings.HasPrefix(f[2], "https://127.0.0.1:"))
				} else {
					require.Len(t, f, 3)
					assert.True(t, strings.HasPrefix(f[2], "http://127.0.0.1:"))
				}
				assert.Equal(t, "powerflex", f[1])
			}
			assert.Equal(t, "pflex-1", lines[0][0])

			caFile := ""
			if useTLS {
				caFile = lines[0][3]
			}
			c, err := sio.NewClientWithArgs(lines[0][2], "", 5, false, false, caFile)
			require.NoError(t, err)
			_, err = c.Authenticate(&sio.ConfigConnect{Username: "admin", Password: "Password123!"})
			require.NoError(t, err)
			systems, err := c.GetSystems()
			require.NoError(t, err)
			require.Len(t, systems, 1)
			sys := sio.NewSystem(c)
			sys.System = systems[0]
			sdcs, err := sys.GetSdc()
			require.NoError(t, err)
			require.Len(t, sdcs, 1)

			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("arraysim did not stop")
			}
		})
	}
}

func TestFlagErrors(t *testing.T) {
	tcs := []struct {
		name string
		args []string
		want string
	}{
		{"no fixture", nil, "-fixture is required"},
		{"non-loopback host", []string{"-fixture", "x", "-host", "10.0.0.1"}, `-host: "10.0.0.1"`},
		{"missing file", []string{"-fixture", filepath.Join(t.TempDir(), "none.yaml")}, "read fixture"},
		{"extra argument", []string{"-fixture", "x", "y"}, `unexpected argument "y"`},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			err := run(context.Background(), tc.args, io.Discard, io.Discard)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestUnsupportedFamilyIsClear(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.yaml")
	require.NoError(t, os.WriteFile(path, []byte("arrays: [{name: x, family: powerflex, spec: {bogus: 1}}]"), 0o600))
	err := run(context.Background(), []string{"-fixture", path}, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "arrays[x]")
	assert.Contains(t, err.Error(), "bogus")
}
