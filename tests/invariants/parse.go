package invariants

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// maxLine bounds one line of a JSON-lines input.
const maxLine = 16 << 20

// parseLines decodes JSON lines into values of T, checking each with
// check. Blank lines are skipped. Every error names the input and the line.
func parseLines[T any](r io.Reader, what string, check func(*T) error) ([]T, error) {
	var out []T
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if b[0] != '{' {
			return out, fmt.Errorf("%s line %d: not a JSON object", what, line)
		}
		var v T
		if err := json.Unmarshal(b, &v); err != nil {
			return out, fmt.Errorf("%s line %d: %w", what, line, err)
		}
		if err := check(&v); err != nil {
			return out, fmt.Errorf("%s line %d: %w", what, line, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("%s line %d: %w", what, line+1, err)
	}
	return out, nil
}

// ParseKubeAudit reads an apiserver audit log (audit.k8s.io/v1 Event JSON
// lines). Every event needs a stage, a verb and requestReceivedTimestamp.
func ParseKubeAudit(r io.Reader) ([]KubeEvent, error) {
	return parseLines(r, "apiserver audit log", func(e *KubeEvent) error {
		switch {
		case e.Stage == "":
			return errors.New("field stage is missing")
		case e.Verb == "":
			return errors.New("field verb is missing")
		case e.Received.IsZero():
			return errors.New("field requestReceivedTimestamp is missing")
		}
		return nil
	})
}

// ParseArrayAudit reads a simulator's audit log (/_sim/audit: JSON lines of
// simcore.AuditEntry). Every entry needs a positive seq, a time and a
// method.
func ParseArrayAudit(r io.Reader) ([]simcore.AuditEntry, error) {
	return parseLines(r, "array audit log", func(e *simcore.AuditEntry) error {
		switch {
		case e.Seq <= 0:
			return fmt.Errorf("field seq is %d, want a positive number", e.Seq)
		case e.Time.IsZero():
			return errors.New("field time is missing")
		case e.Method == "":
			return errors.New("field method is missing")
		}
		return nil
	})
}

// ParseTimeline reads a fault timeline (JSON lines of Event). Every event
// needs a time and a kind.
func ParseTimeline(r io.Reader) ([]Event, error) {
	return parseLines(r, "timeline", func(e *Event) error {
		switch {
		case e.Time.IsZero():
			return errors.New("field time is missing")
		case e.Kind == "":
			return errors.New("field kind is missing")
		}
		return nil
	})
}

// ParsePlacements reads placements (JSON lines of Placement).
func ParsePlacements(r io.Reader) ([]Placement, error) {
	return parseLines(r, "placements", func(p *Placement) error {
		switch {
		case p.Time.IsZero():
			return errors.New("field time is missing")
		case p.Resource != "pods" && p.Resource != "volumeattachments":
			return fmt.Errorf("field resource is %q, want pods or volumeattachments", p.Resource)
		case p.Name == "":
			return errors.New("field name is missing")
		case p.Node == "":
			return errors.New("field node is missing")
		}
		return nil
	})
}

// ParseLedgerState reads a ledger: either the JSON of a ledger.State or a
// ledger snapshot (a header line, then the state).
func ParseLedgerState(data []byte) (*ledger.State, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, errors.New("ledger state: empty input")
	}
	if first, _, _ := bytes.Cut(trimmed, []byte("\n")); bytes.Contains(first, []byte(`"fenced-ledger"`)) {
		st, err := ledger.ReadSnapshot(bytes.NewReader(trimmed))
		if err != nil {
			return nil, fmt.Errorf("ledger snapshot: %w", err)
		}
		if err := checkState(st); err != nil {
			return nil, fmt.Errorf("ledger snapshot: %w", err)
		}
		return st, nil
	}
	st := ledger.NewState()
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(st); err != nil {
		return nil, fmt.Errorf("ledger state: %w", err)
	}
	if dec.More() {
		return nil, errors.New("ledger state: data after the JSON object")
	}
	if err := checkState(st); err != nil {
		return nil, fmt.Errorf("ledger state: %w", err)
	}
	return st, nil
}

// checkState refuses null entries where the ledger keeps records.
func checkState(st *ledger.State) error {
	for name, c := range st.Clusters {
		if c == nil {
			return fmt.Errorf("clusters[%s] is null", name)
		}
		for node, n := range c.Nodes {
			if n == nil {
				return fmt.Errorf("clusters[%s].nodes[%s] is null", name, node)
			}
			for i, h := range n.History {
				if h == nil {
					return fmt.Errorf("clusters[%s].nodes[%s].history[%d] is null", name, node, i)
				}
			}
		}
	}
	return nil
}
