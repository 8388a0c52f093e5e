package arrayclients_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// requireReadOnlyProbes checks that every write-method request the
// simulator has seen so far (resolving and probing a node) was a declared
// query: health probes run for every node each round, and a simulator
// serialises real writes, so a probe it took for a write would queue
// behind fences at scale.
func requireReadOnlyProbes(t *testing.T, srv *simcore.Server) {
	t.Helper()
	for _, e := range srv.Audit() {
		if simcore.IsWrite(e.Method) {
			assert.True(t, e.Query, "%s %s is served as a write", e.Method, e.Path)
		}
	}
}
