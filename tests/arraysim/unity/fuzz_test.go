package unity_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/unity"
)

// FuzzSpec: any spec section is a simulator or an error, never a panic.
func FuzzSpec(f *testing.F) {
	f.Add(`{generate: {lunsPerNode: 2}}`)
	f.Add(`{hosts: [{name: a}, {name: a}], luns: [{name: l, hostAccess: [{host: a, hlu: 1}]}]}`)
	f.Add(`{luns: [{name: l, hostAccess: [{host: w1.x, hlu: -1, accessMask: "9"}]}]}`)
	f.Fuzz(func(t *testing.T, spec string) {
		fx, err := fixture.Parse([]byte("nodes:\n  - {name: w1, ip: 127.0.0.2, fqdn: w1.x, iqn: iqn.x:w1}\narrays:\n  - name: u\n    family: unity\n    spec: " + spec + "\n"))
		if err != nil {
			return
		}
		sim, err := unity.New(&fx.Arrays[0].Spec, fx.Nodes)
		if err == nil {
			require.NotNil(t, sim.Snapshot())
		}
	})
}

// FuzzModifyLun: any modifyLun body gets 204, 404 or 422, never a panic.
func FuzzModifyLun(f *testing.F) {
	f.Add(`{"lunParameters":{"hostAccess":[{"host":{"id":"Host_1"},"accessMask":"1"}]}}`)
	f.Add(`{"lunParameters":{"hostAccess":[{"host":{"id":"Host_1"},"accessMask":7}]}}`)
	f.Add(`{"lunParameters":{"hostAccess":[]}}`)
	f.Add(`{"lunParameters":{}}`)
	fx, err := fixture.Parse([]byte(testFixture))
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, body string) {
		sim, err := unity.New(&fx.Arrays[0].Spec, fx.Nodes)
		require.NoError(t, err)
		req := httptest.NewRequest(http.MethodPost, "/api/instances/storageResource/sv_1/action/modifyLun", strings.NewReader(body))
		req.SetBasicAuth("admin", "secret")
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, req)
		// Basic auth without a session cookie cannot carry the CSRF token.
		require.Equal(t, http.StatusUnauthorized, rec.Code)
		login := httptest.NewRequest(http.MethodGet, "/api/types/loginSessionInfo", nil)
		login.SetBasicAuth("admin", "secret")
		login.Header.Set("X-EMC-REST-CLIENT", "true")
		lrec := httptest.NewRecorder()
		sim.ServeHTTP(lrec, login)
		require.Equal(t, http.StatusOK, lrec.Code)
		req = httptest.NewRequest(http.MethodPost, "/api/instances/storageResource/sv_1/action/modifyLun", strings.NewReader(body))
		for _, c := range lrec.Result().Cookies() {
			req.AddCookie(c)
		}
		req.Header.Set("EMC-CSRF-TOKEN", lrec.Header().Get("EMC-CSRF-TOKEN"))
		rec = httptest.NewRecorder()
		sim.ServeHTTP(rec, req)
		require.Contains(t, []int{http.StatusNoContent, http.StatusNotFound, http.StatusUnprocessableEntity}, rec.Code, rec.Body.String())
	})
}

// FuzzHostLUNFilter: any hostLUN filter gets 200 or 422, never a panic.
func FuzzHostLUNFilter(f *testing.F) {
	f.Add(`host.id eq "Host_1"`)
	f.Add(`host.id eq "Host_1" and lun.id eq "sv_7"`)
	f.Add(`hlu eq 3 AND type eq 1`)
	f.Add(`name lk "x"`)
	f.Add(`id eq "`)
	fx, err := fixture.Parse([]byte(testFixture))
	require.NoError(f, err)
	sim, err := unity.New(&fx.Arrays[0].Spec, fx.Nodes)
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, filter string) {
		req := httptest.NewRequest(http.MethodGet, "/api/types/hostLUN/instances?filter="+url.QueryEscape(filter), nil)
		req.SetBasicAuth("admin", "secret")
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, req)
		require.Contains(t, []int{http.StatusOK, http.StatusUnprocessableEntity}, rec.Code, rec.Body.String())
	})
}
