package simcore

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// AuditRecord is one line of an audit file (SetAuditFile): the array's
// state when the file was opened (Kind "start"), then every request
// (Kind "request") with the fields of AuditEntry.
type AuditRecord struct {
	Kind string `json:"kind"`
	// Array is the simulated array's name (on the "start" line).
	Array string `json:"array,omitempty"`
	// Family is the Go type of the family (on the "start" line).
	Family string `json:"family,omitempty"`
	// State is the whole state, as /_sim/state shows it (on the "start"
	// line).
	State json.RawMessage `json:"state,omitempty"`
	*AuditEntry
}

// Kinds of AuditRecord.
const (
	AuditRecordStart   = "start"
	AuditRecordRequest = "request"
)

// ObjectChange is one object a write changed: an element of one of the
// state's top-level lists (or a top-level member that is not a list), as
// the state showed it before and after the write. Before is absent for an
// object the write made, After for one it removed. The access entries an
// array keeps (mappings, initiators, export client lists) are members of
// these objects, so Before and After show what access the write gave or
// took.
type ObjectChange struct {
	// Object names the object as AuditEntry.Change does: "hosts[h1]",
	// "volumes[3]" (by position, for lists without a unique key), or a
	// member name.
	Object string          `json:"object"`
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
}

// auditFile is where the server writes its audit as JSON lines.
type auditFile struct {
	w    io.WriteCloser
	path string
	err  error
}

// SetAuditFile makes the server write its audit to path as JSON lines
// (AuditRecord): first the whole state, then every request as it is
// recorded, each write with the objects it changed (AuditEntry.Objects).
// Recording the objects takes a full snapshot before and after every
// write. The file is created (or truncated); CloseAuditFile closes it.
func (s *Server) SetAuditFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("array %s: create the audit file: %w", s.name, err)
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	start := AuditRecord{Kind: AuditRecordStart, Array: s.name, Family: fmt.Sprintf("%T", s.fam),
		State: snapshotJSON(s.fam.Snapshot())}
	line, err := json.Marshal(start)
	if err == nil {
		_, err = f.Write(append(line, '\n'))
	}
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("array %s: write the audit file %s: %w", s.name, path, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.file != nil {
		_ = s.file.w.Close()
	}
	s.file = &auditFile{w: f, path: path}
	return nil
}

// CloseAuditFile stops writing the audit file and closes it; it returns
// the first error writing it met, if any.
func (s *Server) CloseAuditFile() error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.file == nil {
		return nil
	}
	err := s.file.err
	if cerr := s.file.w.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("array %s: close the audit file %s: %w", s.name, s.file.path, cerr)
	}
	s.file = nil
	return err
}

// recordingObjects reports whether writes record the objects they
// changed. The caller holds writeMu.
func (s *Server) recordingObjects() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.file != nil
}

// writeAuditLine appends an entry to the audit file. The caller holds s.mu.
func (s *Server) writeAuditLine(e *AuditEntry) {
	if s.file == nil || s.file.err != nil {
		return
	}
	line, err := json.Marshal(AuditRecord{Kind: AuditRecordRequest, AuditEntry: e})
	if err == nil {
		_, err = s.file.w.Write(append(line, '\n'))
	}
	if err != nil {
		s.file.err = fmt.Errorf("array %s: write the audit file %s: %w", s.name, s.file.path, err)
		s.logger.Error("audit file not written", "error", err)
	}
}

// changedObjects returns the objects that differ between two marshalled
// snapshots, each before and after.
func changedObjects(before, after []byte) []ObjectChange {
	var paths []string
	if !diffRaw("$", before, after, &paths) {
		return []ObjectChange{{Object: "$", Before: before, After: after}}
	}
	bm, okB := objectMembers(before)
	am, okA := objectMembers(after)
	if !okB || !okA {
		return []ObjectChange{{Object: "$", Before: before, After: after}}
	}
	var out []ObjectChange
	seen := map[string]bool{}
	for _, p := range paths {
		member, elem, ok := topObject(p)
		if !ok {
			continue
		}
		name := member
		if elem != "" {
			name += "[" + elem + "]"
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		c := ObjectChange{Object: name}
		if elem == "" {
			c.Before, c.After = bm[member], am[member]
		} else {
			c.Before = listElement(bm[member], am[member], elem, true)
			c.After = listElement(bm[member], am[member], elem, false)
		}
		out = append(out, c)
	}
	return out
}

// topObject splits a change path ("+$.hosts[h1].initiators[0]") into its
// top-level member and list element ("hosts", "h1"); elem is "" for a
// member that is not a list.
func topObject(path string) (member, elem string, ok bool) {
	p := strings.TrimLeft(path, "+-")
	p, ok = strings.CutPrefix(p, "$.")
	if !ok {
		return "", "", false
	}
	end := strings.IndexAny(p, ".[")
	if end < 0 {
		return p, "", true
	}
	member = p[:end]
	if p[end] != '[' {
		return member, "", true
	}
	close := strings.IndexByte(p[end:], ']')
	if close < 0 {
		return "", "", false
	}
	return member, p[end+1 : end+close], true
}

// listElement finds elem in the before (or after) list, the way diffRaw
// keyed it: by key when both lists are keyed, else by position. It
// returns nil when the element is not there.
func listElement(beforeList, afterList []byte, elem string, wantBefore bool) json.RawMessage {
	lb, okB := arrayElements(beforeList)
	la, okA := arrayElements(afterList)
	if !okB && !okA {
		return nil
	}
	list := la
	if wantBefore {
		list = lb
	}
	kb, keyedB := keyedRaw(lb)
	ka, keyedA := keyedRaw(la)
	if okB && okA && keyedB && keyedA {
		if wantBefore {
			return kb[elem]
		}
		return ka[elem]
	}
	i, err := strconv.Atoi(elem)
	if err != nil || i < 0 || i >= len(list) {
		return nil
	}
	return list[i]
}

// requesterOf is the tag a listener put before a request's remote address
// ("csi/127.0.0.1:5000" -> "csi"), "" for an untagged one.
func requesterOf(remote string) string {
	if i := strings.IndexByte(remote, '/'); i >= 0 {
		return remote[:i]
	}
	return ""
}

// doneNow is the time a request's answer was written.
func doneNow() time.Time { return time.Now().UTC() }
