package ops

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/e2e"
)

// plantedSecret returns a recognisable random secret.
func plantedSecret(t *testing.T, what string) string {
	t.Helper()
	b := make([]byte, 8)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return "PLANTED-" + what + "-" + hex.EncodeToString(b)
}

// leakCheck collects outputs and checks none holds a secret.
type leakCheck struct {
	secrets map[string]string // what -> value
	outputs map[string]string // where -> text
}

func (l *leakCheck) add(where, text string) {
	if l.outputs == nil {
		l.outputs = map[string]string{}
	}
	l.outputs[where] += text
}

func (l *leakCheck) check(t *testing.T) {
	t.Helper()
	for where, text := range l.outputs {
		require.NotEmpty(t, text, "%s: nothing collected", where)
		for what, secret := range l.secrets {
			assert.NotContains(t, text, secret, "the %s leaked into %s", what, where)
		}
	}
}

// TestSecretsNeverLeak plants an array password, the API token and a
// kubeconfig bearer token, runs `fenced run` (text and JSON logs) against
// an array simulator that refuses the password and an API server that is
// not there, and checks that no secret appears in the logs, /status,
// /readyz, /metrics, `fenced status`, the answer to a request with a wrong
// token, or the errors of `fenced config validate`.
func TestSecretsNeverLeak(t *testing.T) {
	secrets := map[string]string{
		"array password":   plantedSecret(t, "array-pw"),
		"API token":        plantedSecret(t, "api-token"),
		"kubeconfig token": plantedSecret(t, "kube-token"),
	}
	dir := t.TempDir()

	// A Unity simulator that accepts only its own password.
	fx, err := e2e.MakeFixture(nil, []byte("- name: unity-1\n  family: unity\n  spec: {username: admin, password: Password123!}\n"))
	require.NoError(t, err)
	arrays, err := e2e.StartArrays(fx, []string{"ops"}, filepath.Join(dir, "certs"), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { arrays["unity-1"].Close() })
	unity := arrays["unity-1"].Listeners["ops"]

	kc := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: %s}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, freeAddr(t), secrets["kubeconfig token"])), 0o600))
	pw := filepath.Join(dir, "unity-1.password")
	// Readable by others on purpose: fenced must warn, without the content.
	require.NoError(t, os.WriteFile(pw, []byte(secrets["array password"]+"\n"), 0o644))
	require.NoError(t, os.Chmod(pw, 0o644))
	token := filepath.Join(dir, "api-token")
	require.NoError(t, os.WriteFile(token, []byte(secrets["API token"]+"\n"), 0o600))

	leaks := &leakCheck{secrets: secrets}
	for _, format := range []string{"text", "json"} {
		t.Run("run with "+format+" logs", func(t *testing.T) {
			httpAddr := freeAddr(t)
			cfg := filepath.Join(t.TempDir(), "fenced.yaml")
			require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`replica:
  id: ops
  dataDir: %s
  raftBindAddress: %s
http:
  listen: %s
  tokenFile: %s
log:
  level: debug
clusters:
  - name: lab
    kubeconfig: %s
    arrays: [unity-1]
arrays:
  - name: unity-1
    family: unity
    endpoint: %s
    username: admin
    passwordFile: %s
    insecure: true
    requestTimeout: 5s
`, filepath.Join(t.TempDir(), "data"), freeAddr(t), httpAddr, token, kc, unity.URL, pw)), 0o600))

			d := startDaemon(t, cfg, httpAddr, "--log-format", format)
			require.Eventually(t, func() bool {
				return strings.Contains(d.out.String(), "array unreachable") && strings.Contains(d.out.String(), "cluster API server unreachable")
			}, 60*time.Second, 100*time.Millisecond, "the failed array login and API server probe were never logged:\n%s", d.out.String())
			for _, line := range strings.Split(d.out.String(), "\n") {
				if strings.Contains(line, "array unreachable") {
					t.Logf("the failed login, as logged: %s", line)
				}
			}
			assert.Contains(t, d.out.String(), "secret file is readable by group or others")
			assert.Contains(t, d.out.String(), "arrays[0].passwordFile")

			for _, path := range []string{"/status", "/readyz?verbose", "/metrics", "/healthz"} {
				_, body := get(t, d.base+path)
				leaks.add(format+" run: GET "+path, body)
			}
			_, status := get(t, d.base+"/status")
			assert.Contains(t, status, "unity-1", "the array's error is in /status")

			// A mutating call with a wrong token that embeds the real one.
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, d.base+"/v1/pause", strings.NewReader(`{"reason":"test"}`))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer x"+secrets["API token"])
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			var body bytes.Buffer
			_, _ = body.ReadFrom(resp.Body)
			_ = resp.Body.Close()
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
			leaks.add(format+" run: POST /v1/pause with a wrong token", resp.Status+body.String())

			for _, args := range [][]string{{"status", "--addr", d.base}, {"status", "--addr", d.base, "-o", "json"}} {
				out, _ := exec.Command(fencedBinary(t), args...).CombinedOutput()
				leaks.add(format+" run: fenced "+strings.Join(args, " "), string(out))
			}
			d.stop(t)
			leaks.add(format+" run: logs", d.out.String())
		})
	}

	t.Run("config validate errors", func(t *testing.T) {
		chap := filepath.Join(dir, "chap.yaml")
		require.NoError(t, os.WriteFile(chap, []byte("iqn.1993-08.org.debian:01:abc "+secrets["array password"]+"\n"), 0o600))
		badKC := filepath.Join(dir, "bad-kubeconfig")
		require.NoError(t, os.WriteFile(badKC, []byte("users: [{{ token: "+secrets["kubeconfig token"]+"\n"), 0o600))
		base := "replica:\n  id: r1\n  raftBindAddress: 127.0.0.1:7441\n" +
			"http:\n  tokenFile: " + token + "\n" +
			"clusters:\n  - name: c1\n    kubeconfig: " + kc + "\n    arrays: [a1]\n" +
			"arrays:\n  - name: a1\n    family: powerstore\n    endpoint: https://127.0.0.1:8080\n    username: u\n    passwordFile: " + pw + "\n"
		for name, doc := range map[string]string{
			"inline password":                   strings.Replace(base, "    passwordFile: "+pw+"\n", "    password: "+secrets["array password"]+"\n", 1),
			"misspelt key":                      base + "    pasword: " + secrets["array password"] + "\n",
			"bad CHAP file":                     base + "    powerstore:\n      chapSecretsFile: " + chap + "\n",
			"unparsable kubeconfig":             strings.Replace(base, kc, badKC, 1),
			"password pasted into passwordFile": strings.Replace(base, "passwordFile: "+pw, "passwordFile: "+secrets["array password"], 1),
		} {
			f := filepath.Join(t.TempDir(), "fenced.yaml")
			require.NoError(t, os.WriteFile(f, []byte(doc), 0o600))
			out, err := exec.Command(fencedBinary(t), "config", "validate", f).CombinedOutput()
			if err == nil && name == "bad CHAP file" {
				// validate only checks the file exists; fenced run reads it
				// and refuses to start.
				out, err = exec.Command(fencedBinary(t), "run", "--config", f).CombinedOutput()
				name += " (fenced run)"
			}
			if err == nil && name == "unparsable kubeconfig" {
				// validate only checks the file exists; fenced run reports
				// it through the API server probe (the runs above cover
				// that path with a valid kubeconfig).
				continue
			}
			require.Error(t, err, "%s: want a refusal:\n%s", name, out)
			leaks.add("fenced config validate: "+name, string(out))
		}
	})

	leaks.check(t)
	t.Logf("checked %d outputs for %d planted secrets", len(leaks.outputs), len(secrets))
}
