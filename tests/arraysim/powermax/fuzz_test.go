package powermax_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/powermax"
)

// FuzzSpec: any spec section is a simulator or an error, never a panic.
func FuzzSpec(f *testing.F) {
	f.Add(`{generate: {clusterPrefix: TST, volumesPerNode: 2}}`)
	f.Add(`{hosts: [{id: h, type: Fibre, initiators: [{id: "10000000c9a0b0ff", paths: ["FA-1D:4"]}], volumes: ["00200"]}]}`)
	f.Add(`{symmetrixID: "1", metricsIntervalSeconds: -1}`)
	f.Fuzz(func(t *testing.T, spec string) {
		fx, err := fixture.Parse([]byte("nodes:\n  - {name: w1, ip: 127.0.0.2, iqn: iqn.x:w1, wwpns: [\"10000000c9a0b001\"]}\narrays:\n  - name: p\n    family: powermax\n    spec: " + spec + "\n"))
		if err != nil {
			return
		}
		sim, err := powermax.New(&fx.Arrays[0].Spec, fx.Nodes)
		if err == nil {
			require.NotNil(t, sim.Snapshot())
		}
	})
}

// FuzzHostEdit: any PUT host body gets a 200, 400 or 404 with a JSON body.
func FuzzHostEdit(f *testing.F) {
	f.Add(`{"editHostActionParam":{"removeInitiatorParam":{"initiator":["iqn.1994-05.com.redhat:worker-1"]}}}`)
	f.Add(`{"editHostActionParam":{"addInitiatorParam":{"initiator":["x"]},"removeInitiatorParam":{}}}`)
	f.Add(`{"editHostActionParam":null}`)
	fx, err := fixture.Parse([]byte(testFixture))
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, body string) {
		sim, err := powermax.New(&fx.Arrays[0].Spec, fx.Nodes)
		require.NoError(t, err)
		req := httptest.NewRequest(http.MethodPut, "/univmax/restapi/100/sloprovisioning/symmetrix/"+sym+"/host/csi-node-TST-worker-1", strings.NewReader(body))
		req.SetBasicAuth("smc", "secret")
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, req)
		require.Contains(t, []int{http.StatusOK, http.StatusBadRequest, http.StatusNotFound}, rec.Code)
		require.True(t, strings.HasPrefix(rec.Body.String(), "{"), rec.Body.String())
	})
}
