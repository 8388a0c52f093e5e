// Package conformance replays the requests Dell's CSI drivers send, row by
// row of tests/arraysim/CONFORMANCE.md, against a simulator, and checks
// that each is served (it reaches the family's handler under the method
// and path the driver's client library uses) and answered as the driver
// reads the answer.
package conformance

import (
	"context"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// Row is one row of the conformance table.
type Row struct {
	// ID is the row's ID in CONFORMANCE.md (e.g. "PS-P3").
	ID string
	// Method and Path are the request the driver's client library sends:
	// the HTTP method and a Go regexp the URL path with its query
	// (simcore.AuditEntry.Path) must match.
	Method, Path string
	// Status is the HTTP status the simulator must answer with, as the
	// array does in that state; 0 accepts any 2xx, AnyStatus any status
	// (the driver reads only the answer's text, and no source gives the
	// array's status).
	Status int
	// Do sends the request with the real client library call the driver
	// makes and checks the answer as the driver reads it (the error it
	// tolerates, the fields it uses). It runs after every earlier row.
	Do func(ctx context.Context, t *testing.T)
}

// AnyStatus is a Row.Status that leaves the status unchecked.
const AnyStatus = -1

// Run replays rows in order against srv. For each row it runs Do, then
// requires that the audit log holds a request the row names, the last of
// them answered with the row's status.
func Run(t *testing.T, srv *simcore.Server, rows []Row) {
	t.Helper()
	ctx := context.Background()
	for _, r := range rows {
		ok := t.Run(r.ID, func(t *testing.T) {
			re, err := regexp.Compile(r.Path)
			require.NoError(t, err, "row %s: path pattern", r.ID)
			since := srv.LastSeq()
			r.Do(ctx, t)
			var seen []string
			var last *simcore.AuditEntry
			for _, e := range srv.AuditSince(since) {
				seen = append(seen, e.Method+" "+e.Path)
				if e.Method == r.Method && re.MatchString(e.Path) {
					last = &e
				}
			}
			if last == nil {
				t.Errorf("row %s: no %s request matching %q was sent; saw %q", r.ID, r.Method, r.Path, seen)
				return
			}
			// The row's request is the last one of its kind that Do sent.
			switch r.Status {
			case AnyStatus:
			case 0:
				assert.True(t, last.Status >= 200 && last.Status < 300, "row %s: %s %s answered %d, want 2xx", r.ID, last.Method, last.Path, last.Status)
			default:
				assert.Equal(t, r.Status, last.Status, "row %s: %s %s", r.ID, last.Method, last.Path)
			}
		})
		if !ok {
			// Later rows build on earlier ones.
			return
		}
	}
}
