package opclient

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNormalizeAddr(t *testing.T) {
	for _, c := range []struct{ addr, scheme, want, err string }{
		{addr: "https://mgmt1:7440/", want: "https://mgmt1:7440"},
		{addr: "http://127.0.0.1:7440", scheme: "https", want: "http://127.0.0.1:7440"},
		{addr: "mgmt1:7440", scheme: "https", want: "https://mgmt1:7440"},
		{addr: "mgmt1:7440", scheme: "http", want: "http://mgmt1:7440"},
		{addr: "mgmt1.example.com:7440", want: "https://mgmt1.example.com:7440"},
		{addr: "127.0.0.1:7440", want: "http://127.0.0.1:7440"},
		{addr: "[::1]:7440", want: "http://[::1]:7440"},
		{addr: "localhost:7440", want: "http://localhost:7440"},
		{addr: " 10.0.0.5:7440 ", want: "https://10.0.0.5:7440"},
		{addr: "ftp://mgmt1:7440", err: `--addr "ftp://mgmt1:7440"`},
		{addr: "https://", err: "want https://host:port"},
		{addr: "https://mgmt1:7440/status", err: "want https://host:port"},
		{addr: "https://u:p@mgmt1:7440", err: "want https://host:port"},
		{addr: "mgmt1:7440\n", want: "https://mgmt1:7440"},
	} {
		got, err := normalizeAddr(c.addr, c.scheme)
		if c.err != "" {
			require.ErrorContains(t, err, c.err, c.addr)
			continue
		}
		require.NoError(t, err, c.addr)
		assert.Equal(t, c.want, got, c.addr)
	}
}

func TestOperatorNameFromSudo(t *testing.T) {
	host := func() (string, error) { return "mgmt1", nil }
	none := func() string { return "nobody" }
	assert.Equal(t, "alice@mgmt1", operatorName("alice", "root", none, host), "sudo names the person, not root")
	assert.Equal(t, "root@mgmt1", operatorName("root", "root", none, host))
	assert.Equal(t, "bob@mgmt1", operatorName("", "bob", none, host))
	assert.Equal(t, "nobody@mgmt1", operatorName("", "", none, host))
	assert.Equal(t, "bob", operatorName("", "bob", none, func() (string, error) { return "", errors.New("no name") }))
}

// FollowLeader follows a follower's 307 to the leader with the method and
// body, drops the API token when the leader is another host or port than
// the one the operator named, and refuses other redirects, downgrades to
// plain HTTP and endless chains.
func TestFollowLeader(t *testing.T) {
	first, err := http.NewRequest(http.MethodPost, "https://mgmt2.example:7440/v1/pause", nil)
	require.NoError(t, err)
	next := func(to string, code int) *http.Request {
		r, err := http.NewRequest(http.MethodPost, to, nil)
		require.NoError(t, err)
		r.Header.Set("Authorization", "Bearer the-api-token")
		r.Response = &http.Response{StatusCode: code, Status: fmt.Sprintf("%d %s", code, http.StatusText(code))}
		return r
	}
	r := next("https://mgmt1.example:7440/v1/pause", http.StatusTemporaryRedirect)
	require.NoError(t, FollowLeader(r, []*http.Request{first}))
	assert.Empty(t, r.Header.Get("Authorization"), "the token stays with the host the operator named")
	r = next("https://mgmt2.example:7441/v1/pause", http.StatusPermanentRedirect)
	require.NoError(t, FollowLeader(r, []*http.Request{first}))
	assert.Empty(t, r.Header.Get("Authorization"), "another port is another endpoint")
	r = next("https://mgmt2.example:7440/v1/pause", http.StatusTemporaryRedirect)
	require.NoError(t, FollowLeader(r, []*http.Request{first}))
	assert.NotEmpty(t, r.Header.Get("Authorization"), "the same endpoint")

	err = FollowLeader(next("https://mgmt1.example:7440/v1/pause", http.StatusFound), []*http.Request{first})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "only 307 and 308 redirects are followed")
	err = FollowLeader(next("http://mgmt1.example:7440/v1/pause", http.StatusTemporaryRedirect), []*http.Request{first})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "refusing a redirect from https to http://mgmt1.example:7440/v1/pause")
	err = FollowLeader(next("https://mgmt1.example:7440/v1/pause", http.StatusTemporaryRedirect), []*http.Request{first, first, first})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "stopped after 3 redirects")
}
