package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cmd/fenced/status"
)

// TestNodeCompletion: fence, plan and history --node complete the nodes
// the replica's /status knows of the --cluster given; unfence and confirm
// only the fenced ones. When the replica cannot be asked (nothing listens,
// it never answers) completion offers nothing and prints nothing.
func TestNodeCompletion(t *testing.T) {
	st := status.Status{
		Clusters: []status.Cluster{
			{Name: "prod", Unhealthy: []status.Node{{Name: "p-suspect", Verdict: "suspect"}, {Name: "p-reboot", Verdict: "needs-reboot"}},
				Unprotected: []status.UnprotectedNode{{Name: "p-gap"}}},
			{Name: "lab", Unhealthy: []status.Node{{Name: "l-failed", Verdict: "failed"}}},
		},
		Fences: []status.Fence{
			{Cluster: "prod", Node: "p-fenced", Phase: "evicted"},
			{Cluster: "prod", Node: "p-done", Phase: "closed"},
			{Cluster: "lab", Node: "l-fencing", Phase: "fencing"},
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/status" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(st)
	}))
	t.Cleanup(srv.Close)

	complete := func(args ...string) ([]string, string) {
		var out, errb bytes.Buffer
		require.Equal(t, exitOK, run(context.Background(), append([]string{"__complete"}, args...), &out, &errb), errb.String())
		var names []string
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			// Skip the directive line and the required flags cobra offers
			// when no argument is.
			if l != "" && !strings.HasPrefix(l, ":") && !strings.HasPrefix(l, "-") {
				names = append(names, l)
			}
		}
		return names, errb.String()
	}
	got, _ := complete("fence", "--addr", srv.URL, "--cluster", "prod", "")
	assert.Equal(t, []string{"p-fenced", "p-gap", "p-reboot", "p-suspect"}, got)
	got, _ = complete("fence", "--addr", srv.URL, "")
	assert.Equal(t, []string{"l-failed", "l-fencing", "p-fenced", "p-gap", "p-reboot", "p-suspect"}, got)
	got, _ = complete("plan", "--addr", srv.URL, "--cluster", "lab", "")
	assert.Equal(t, []string{"l-failed", "l-fencing"}, got)
	got, _ = complete("history", "--addr", srv.URL, "--cluster", "lab", "--node", "")
	assert.Equal(t, []string{"l-failed", "l-fencing"}, got)
	for _, cmd := range []string{"unfence", "confirm"} {
		got, _ = complete(cmd, "--addr", srv.URL, "--cluster", "prod", "")
		assert.Equal(t, []string{"p-fenced", "p-reboot"}, got, cmd)
	}
	got, _ = complete("unfence", "--addr", srv.URL, "--cluster", "prod", "p-fenced", "")
	assert.Empty(t, got, "one node only")

	// Nothing listens.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	// Accepts and never answers.
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = hang.Close() })
	go func() {
		for {
			c, err := hang.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	for _, addr := range []string{closed, "http://" + hang.Addr().String(), "not a url"} {
		got, errOut := complete("confirm", "--addr", addr, "--timeout", "300ms", "--cluster", "prod", "")
		assert.Empty(t, got, addr)
		// Cobra notes its directive on standard error (the shell scripts
		// discard it); nothing else is written there.
		assert.Equal(t, "Completion ended with directive: ShellCompDirectiveNoFileComp\n", errOut, addr)
	}
}
