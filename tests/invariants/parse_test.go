package invariants

import (
	"strings"
	"testing"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const kubeLine = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"1","stage":"ResponseComplete",` +
	`"requestURI":"/api/v1/namespaces/db/pods/web-0","verb":"delete","user":{"username":"fenced-a","groups":["system:authenticated"]},` +
	`"objectRef":{"resource":"pods","namespace":"db","name":"web-0","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},` +
	`"requestReceivedTimestamp":"2025-03-01T12:00:05.500000Z","stageTimestamp":"2025-03-01T12:00:05.510000Z"}`

const arrayLine = `{"seq":7,"time":"2025-03-01T12:00:02.5Z","remote":"a/127.0.0.1:4000","method":"POST","path":"/api/x","status":200,"changed":true,"change":"-$.a"}`

func TestParseKubeAudit(t *testing.T) {
	evs, err := ParseKubeAudit(strings.NewReader(kubeLine + "\n\n" + kubeLine + "\n"))
	require.NoError(t, err)
	require.Len(t, evs, 2)
	e := evs[0]
	assert.Equal(t, "delete", e.Verb)
	assert.Equal(t, "fenced-a", e.User.Username)
	assert.Equal(t, "web-0", e.ObjectRef.Name)
	assert.True(t, e.Succeeded())
	assert.Equal(t, at(5500), e.Received)
}

func TestParseErrorsNameTheLine(t *testing.T) {
	tcs := []struct {
		name  string
		parse func(string) error
		input string
		want  string
	}{
		{"kube: cut-short line", kubeParse, kubeLine + "\n" + kubeLine[:80] + "\n", "apiserver audit log line 2:"},
		{"kube: not an object", kubeParse, "\n[1,2]\n", "apiserver audit log line 2: not a JSON object"},
		{"kube: missing verb", kubeParse, `{"stage":"ResponseComplete","requestReceivedTimestamp":"2025-03-01T12:00:00Z"}`, "line 1: field verb is missing"},
		{"kube: bad time", kubeParse, `{"stage":"x","verb":"get","requestReceivedTimestamp":"yesterday"}`, "line 1:"},
		{"array: bad seq", arrayParse, arrayLine + "\n" + strings.Replace(arrayLine, `"seq":7`, `"seq":0`, 1), "array audit log line 2: field seq is 0"},
		{"array: no method", arrayParse, strings.Replace(arrayLine, `"method":"POST",`, "", 1), "line 1: field method is missing"},
		{"array: wrong type", arrayParse, strings.Replace(arrayLine, `"status":200`, `"status":"ok"`, 1), "line 1:"},
		{"timeline: no kind", timelineParse, `{"time":"2025-03-01T12:00:00Z"}`, "timeline line 1: field kind is missing"},
		{"placements: bad resource", placementParse, `{"time":"2025-03-01T12:00:00Z","resource":"nodes","name":"x","node":"n"}`, `placements line 1: field resource is "nodes"`},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.parse(tc.input)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func kubeParse(s string) error      { _, err := ParseKubeAudit(strings.NewReader(s)); return err }
func arrayParse(s string) error     { _, err := ParseArrayAudit(strings.NewReader(s)); return err }
func timelineParse(s string) error  { _, err := ParseTimeline(strings.NewReader(s)); return err }
func placementParse(s string) error { _, err := ParsePlacements(strings.NewReader(s)); return err }

func TestParseLedgerState(t *testing.T) {
	fsm := ledger.New()
	st := ledger.NewState()
	st.Leaders = []ledger.Epoch{{Replica: "a", Term: 2, At: at(0)}}
	st.Clusters[cl] = &ledger.ClusterState{Nodes: map[string]*ledger.NodeState{node: {Fence: good().fence()}}}
	b, err := jsonMarshal(st)
	require.NoError(t, err)
	got, err := ParseLedgerState(b)
	require.NoError(t, err)
	h := FromState(got)
	require.Len(t, h.Fences, 1)
	assert.Equal(t, "fence-10", h.Fences[0].ID)
	require.Len(t, h.Epochs, 1)

	// The snapshot format (header line, then the state).
	snap, err := fsm.Snapshot()
	require.NoError(t, err)
	var buf strings.Builder
	require.NoError(t, snap.Persist(&sink{w: &buf}))
	_, err = ParseLedgerState([]byte(buf.String()))
	require.NoError(t, err)

	for _, bad := range []string{"", "[]", `{"clusters":{"c1":null}}`, `{"clusters":{"c1":{"nodes":{"n":null}}}}`, `{} {}`,
		`{"format":"fenced-ledger","version":99}` + "\n{}"} {
		_, err := ParseLedgerState([]byte(bad))
		assert.Error(t, err, "input %q", bad)
	}
}
