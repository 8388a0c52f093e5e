package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/powerstore"
)

// TestAuthorizationEchoIsRedacted points fenced at a PowerStore simulator
// behind a gateway that answers every authenticated call with an error body
// echoing the Authorization header, as a misconfigured proxy does. The
// array's error reaches the log, /status and /readyz (none of which shows
// the password, base64 "user:password" or the header's value), trimmed.
func TestAuthorizationEchoIsRedacted(t *testing.T) {
	const user, password = "admin", "ps-Secret:42/echo"
	sim, err := powerstore.NewFromSpec(powerstore.Spec{Username: user, Password: password}, nil)
	require.NoError(t, err)
	echo := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		if auth == "" {
			sim.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		cred := strings.TrimPrefix(auth, "Basic ")
		msg := fmt.Sprintf("gateway echo: request had Authorization: %s (credential %s) %s", auth, cred, strings.Repeat("padding ", 200))
		_ = json.NewEncoder(w).Encode(map[string]any{"messages": []map[string]any{{
			"code": "0xE04040030001", "severity": "Error", "message_l10n": msg, "arguments": []string{auth}}}})
	}))
	defer echo.Close()

	bin := buildFenced(t)
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	require.NoError(t, os.WriteFile(pw, []byte(password+"\n"), 0o600))
	extra := fmt.Sprintf(`clusters: []
arrays:
  - name: pstore-1
    family: powerstore
    endpoint: %s/api/rest
    username: %s
    passwordFile: %s
    insecure: true
    requestTimeout: 3s
`, echo.URL, user, pw)
	addr := freeAddr(t)
	base := "http://" + addr
	p := start(t, bin, "run", "--config", devConfig(t, addr, extra), "--log-format", "json")
	waitHealthy(t, p, base)

	var readyz, st string
	require.Eventually(t, func() bool {
		_, readyz = httpGet(t, base+"/readyz")
		_, st = httpGet(t, base+"/status")
		return strings.Contains(readyz, "gateway echo") && strings.Contains(st, "gateway echo")
	}, 30*time.Second, 100*time.Millisecond, "the array's error should show:\n%s\n%s\n%s", readyz, st, p.stderr)
	require.Eventually(t, func() bool { return strings.Contains(p.stderr.String(), "gateway echo") },
		10*time.Second, 50*time.Millisecond, "the array's error should be logged")

	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	for name, text := range map[string]string{"log": p.stderr.String(), "/status": st, "/readyz": readyz} {
		assert.NotContains(t, text, basic, "%s shows base64 user:password", name)
		assert.NotContains(t, text, password, "%s shows the password", name)
		assert.NotContains(t, text, strings.TrimRight(basic, "="), "%s shows base64 user:password unpadded", name)
		assert.Contains(t, text, "[REDACTED]", name)
	}
	for name, text := range map[string]string{"/status": st, "/readyz": readyz} {
		assert.NotContains(t, text, strings.Repeat("padding ", 100), "%s shows the whole error body", name)
	}
}
