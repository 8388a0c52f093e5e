package replica

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/fenced-project/fenced/cluster"
	"github.com/fenced-project/fenced/cmd/fenced/status"
)

// Every field of the cluster's Raft status reaches /status under the same
// JSON name, or is listed here with where it shows instead: a field added
// to cluster.Status and documented as part of /status but never copied is
// what this catches (storageHandover was).
func TestRaftStatusCarriesEveryClusterField(t *testing.T) {
	elsewhere := map[string]string{
		"id":                 "replicaID at the top of /status",
		"leader":             "leaderID and leaderAddress",
		"leaderSince":        "not shown",
		"lastContactSeconds": "lastContact",
		"ledgerIndex":        "appliedIndex",
		"lastSnapshotIndex":  "fenced_raft_last_snapshot_index",
		"lastSnapshotTerm":   "not shown",
		"peers":              "members",
	}
	shown := jsonNames(reflect.TypeFor[status.Raft]())
	for _, name := range jsonNames(reflect.TypeFor[cluster.Status]()) {
		if _, ok := elsewhere[name]; ok {
			continue
		}
		assert.Contains(t, shown, name, "cluster.Status field %q is not in /status raft", name)
	}
}

func jsonNames(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}
