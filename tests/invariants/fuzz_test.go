package invariants

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/hashicorp/raft"
)

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// sink is a raft.SnapshotSink writing into a builder.
type sink struct{ w io.Writer }

func (s *sink) Write(p []byte) (int, error) { return s.w.Write(p) }
func (s *sink) Close() error                { return nil }
func (s *sink) ID() string                  { return "test" }
func (s *sink) Cancel() error               { return nil }

var _ raft.SnapshotSink = (*sink)(nil)

// lineErrorOK checks that a parse error names the input's line.
func lineErrorOK(t *testing.T, err error) {
	if err != nil && !strings.Contains(err.Error(), " line ") {
		t.Fatalf("error does not name a line: %v", err)
	}
}

func FuzzParseKubeAudit(f *testing.F) {
	f.Add([]byte(kubeLine + "\n"))
	f.Add([]byte(kubeLine[:60]))
	f.Add([]byte("{}\n\n{\"stage\":1}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, err := ParseKubeAudit(bytes.NewReader(data))
		lineErrorOK(t, err)
		if err == nil {
			// Parsed events go through the checker without a panic.
			Check(Inputs{Kube: map[string][]KubeEvent{cl: evs}, Ledger: good().in.Ledger}, good().opts)
		}
	})
}

func FuzzParseArrayAudit(f *testing.F) {
	f.Add([]byte(arrayLine + "\n" + arrayLine))
	f.Add([]byte(`{"seq":-1}`))
	f.Add([]byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := ParseArrayAudit(bytes.NewReader(data))
		lineErrorOK(t, err)
		if err == nil {
			Check(Inputs{Arrays: map[string][]simcore.AuditEntry{pflex: es}, Ledger: good().in.Ledger}, good().opts)
		}
	})
}

func FuzzParseTimeline(f *testing.F) {
	f.Add([]byte(`{"time":"2025-03-01T12:00:00Z","kind":"storm-start","detail":"c1"}`))
	f.Add([]byte(`{"time":"2025-03-01T12:00:00Z","kind":"node-reboot","detail":"c1/worker-1"}` + "\n{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tl, err := ParseTimeline(bytes.NewReader(data))
		lineErrorOK(t, err)
		if err == nil {
			r := good()
			r.in.Timeline = tl
			r.check()
		}
	})
}

func FuzzParseLedgerState(f *testing.F) {
	b, _ := json.Marshal(FromState(nil))
	f.Add(b)
	st, _ := json.Marshal(map[string]any{"clusters": map[string]any{"c1": map[string]any{"nodes": map[string]any{
		"n": map[string]any{"fence": good().fence()}}}}})
	f.Add(st)
	f.Add([]byte(`{"format":"fenced-ledger","version":1}` + "\n{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseLedgerState(data)
		if err != nil {
			return
		}
		r := good()
		r.in.Ledger = FromState(s)
		r.check()
	})
}

func FuzzDiffStates(f *testing.F) {
	f.Add([]byte(`{"a":[1,{"id":"x"}]}`), []byte(`{"a":[{"id":"x","connected":true}]}`))
	f.Add([]byte(`[]`), []byte(`null`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		d, err := DiffStates(a, b, DefaultSignalKeys)
		if err == nil && bytes.Equal(a, b) && len(d) > 0 {
			t.Fatalf("identical documents differ: %v", d)
		}
	})
}
