package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPprofOnlyWhenConfiguredAndOnlyForOperators(t *testing.T) {
	fetch := func(t *testing.T, url, token string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}

	off := httptest.NewServer(New(Options{Token: "tok"}).Handler())
	t.Cleanup(off.Close)
	assert.Equal(t, http.StatusNotFound, fetch(t, off.URL+"/debug/pprof/heap", "tok"), "not configured: not served")

	on := httptest.NewServer(New(Options{Token: "tok", Pprof: true}).Handler())
	t.Cleanup(on.Close)
	assert.Equal(t, http.StatusUnauthorized, fetch(t, on.URL+"/debug/pprof/heap", ""), "profiles are for operators")
	assert.Equal(t, http.StatusUnauthorized, fetch(t, on.URL+"/debug/pprof/goroutine", "wrong"))
	assert.Equal(t, http.StatusOK, fetch(t, on.URL+"/debug/pprof/heap", "tok"))
	assert.Equal(t, http.StatusOK, fetch(t, on.URL+"/debug/pprof/goroutine?debug=1", "tok"))
	assert.Equal(t, http.StatusOK, fetch(t, on.URL+"/debug/pprof/", "tok"))
}
