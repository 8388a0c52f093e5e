package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrDataDir is wrapped by the errors of Open that refuse to start on a
// data directory whose Raft store is missing, empty, unreadable or damaged
// while the directory shows it held the group's log. Starting anyway would
// bootstrap a new group or replay a rolled-back log, losing the fencing
// ledger. RecoverDataDir is the operator's explicit way out.
var ErrDataDir = errors.New("raft data directory refused")

// DataDirError is the error Open returns for a refused data directory.
type DataDirError struct {
	// Path is the file or directory at fault.
	Path string
	// Problem says what is wrong with it.
	Problem string
	// Err is the underlying error, if any.
	Err error
	// InUse marks a data directory another process holds: nothing is
	// wrong with it, and the way out is to stop that process, never to
	// recover the store.
	InUse bool
}

func (e *DataDirError) Error() string {
	msg := fmt.Sprintf("raft store %s %s", e.Path, e.Problem)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	if e.InUse {
		return msg + "; refusing to start. Another fenced is running on this data directory: stop it first " +
			"(systemctl stop fenced), or give this replica its own replica.dataDir. Do not move the store aside " +
			"or recover it: it is in use and intact"
	}
	return msg + "; refusing to start, which could lose the fencing ledger. " +
		"If the other replicas run, move the store aside and copy the ledger from them with " +
		"`fenced datadir recover --rejoin`; if no replica holds the ledger, start a new group with " +
		"`fenced datadir recover --bootstrap` (see docs/operations.md, \"Data directory\")"
}

func (e *DataDirError) Unwrap() []error { return []error{ErrDataDir, e.Err} }

// Files in the raft directory besides the stores.
const (
	// markerHeld exists once the store has held a log entry (or state from
	// an earlier version was found): from then on a missing or empty store
	// is data loss, not a first start.
	markerHeld = "ledger-held"
	// markerRejoin is left by RecoverDataDir(Rejoin): the replica starts
	// without state and waits for the leader instead of bootstrapping.
	markerRejoin = "rejoin"
	storeFile    = "raft.db"
	// lockFile is the data directory's lock: a replica holds an exclusive
	// flock on it from before it looks at the store until it closes, so
	// that a second process on the same directory changes nothing.
	lockFile = "fenced.lock"
)

// RecoveryMode is how RecoverDataDir prepares a data directory.
type RecoveryMode int

const (
	// Rejoin moves the Raft state aside and makes the next start wait to
	// be brought up to date by the leader of the running group.
	Rejoin RecoveryMode = iota + 1
	// Bootstrap moves the Raft state aside so that the next start
	// bootstraps a new group from the configured peers: the ledger starts
	// empty. Only for a group none of whose replicas holds the ledger.
	Bootstrap
)

// RecoverDataDir moves the Raft state in dataDir (the raft directory, with
// the store and the snapshots) aside to raft.damaged-TIMESTAMP, never
// deleting it, and prepares the next start as mode says. It returns the path
// the old state was moved to ("" when there was none). The replica must not
// be running.
func RecoverDataDir(dataDir string, mode RecoveryMode, now time.Time) (string, error) {
	if mode != Rejoin && mode != Bootstrap {
		return "", fmt.Errorf("recover data directory %s: unknown mode %d", dataDir, mode)
	}
	dir := filepath.Join(dataDir, "raft")
	for _, f := range []string{lockFile, storeFile} {
		if err := storeNotInUse(filepath.Join(dir, f)); err != nil {
			return "", err
		}
	}
	var moved string
	if _, err := os.Stat(dir); err == nil {
		moved = filepath.Join(dataDir, "raft.damaged-"+now.UTC().Format("20060102T150405Z"))
		if err := os.Rename(dir, moved); err != nil {
			return "", fmt.Errorf("move %s aside: %w", dir, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("recover data directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return moved, fmt.Errorf("create %s: %w", dir, err)
	}
	if mode == Rejoin {
		if err := writeMarker(dir, markerRejoin, "start without state and wait for the group's leader\n"); err != nil {
			return moved, err
		}
	}
	return moved, syncDir(dataDir)
}

// storeNotInUse refuses when a running replica holds the store's lock
// (BoltDB takes an exclusive flock on it).
func storeNotInUse(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check whether a replica uses %s: %w", path, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("%s is in use: stop the replica first", path)
		}
		return fmt.Errorf("check whether a replica uses %s: %w", path, err)
	}
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}

// lockDataDir takes the exclusive lock of the raft directory dir, waiting
// up to wait for a replica that is still stopping. The caller holds the
// lock as long as the file stays open.
func lockDataDir(dir string, wait time.Duration) (*os.File, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, &DataDirError{Path: path, Problem: "cannot be opened", Err: err}
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			// Who holds it, for the refusal of the next opener; the lock
			// is the flock, the content only a hint.
			if f.Truncate(0) == nil {
				_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
			}
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			defer f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, &DataDirError{Path: path, Problem: "is locked by " + lockHolder(f), InUse: true}
			}
			return nil, &DataDirError{Path: path, Problem: "cannot be locked", Err: err}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lockHolder names the process holding a data directory's lock from the
// process ID it wrote there, with its command line where /proc shows it.
func lockHolder(f *os.File) string {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil || pid <= 0 {
		return "another process"
	}
	cmd, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || len(cmd) == 0 {
		return fmt.Sprintf("process %d", pid)
	}
	if len(cmd) > 200 {
		cmd = cmd[:200]
	}
	return fmt.Sprintf("process %d (%s)", pid, strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " ")))
}

// dataDirState is what prepareDataDir found before the store is opened.
type dataDirState struct {
	// lock is the data directory's lock (lockDataDir), held until the
	// replica closes; nil when prepareDataDir failed.
	lock   *os.File
	dir    string
	held   bool // the store has held the log
	rejoin bool // RecoverDataDir(Rejoin) prepared this start
	fresh  bool // no store yet: a first start
}

// prepareDataDir creates the raft directory and decides, before BoltDB
// touches the store, whether this start may go on: a first start (no store,
// or an empty one left by a start killed before BoltDB wrote its first
// pages) goes on; a store that is missing, empty or unreadable after it held
// the log, or whose structure is damaged, is refused with a DataDirError.
//
// It takes the data directory's lock first and returns it held in
// dataDirState.lock: nothing is decided, and no empty store removed,
// while another replica may be running on the directory.
func prepareDataDir(dataDir string) (dataDirState, error) {
	st, err := inspectDataDir(dataDir)
	if err != nil && st.lock != nil {
		st.lock.Close()
		st.lock = nil
	}
	return st, err
}

func inspectDataDir(dataDir string) (dataDirState, error) {
	st := dataDirState{dir: filepath.Join(dataDir, "raft")}
	if err := os.MkdirAll(st.dir, 0o700); err != nil {
		return st, fmt.Errorf("create raft data dir: %w", err)
	}
	lock, err := lockDataDir(st.dir, storeLockWait)
	if err != nil {
		return st, err
	}
	st.lock = lock
	held, err := exists(filepath.Join(st.dir, markerHeld))
	if err != nil {
		return st, &DataDirError{Path: st.dir, Problem: "cannot be read", Err: err}
	}
	st.held = held
	if st.rejoin, err = exists(filepath.Join(st.dir, markerRejoin)); err != nil {
		return st, &DataDirError{Path: st.dir, Problem: "cannot be read", Err: err}
	}
	snaps, err := hasSnapshots(filepath.Join(st.dir, "snapshots"))
	if err != nil {
		return st, &DataDirError{Path: filepath.Join(st.dir, "snapshots"), Problem: "cannot be read", Err: err}
	}
	path := filepath.Join(st.dir, storeFile)
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if held || snaps {
			return st, &DataDirError{Path: path, Problem: "is missing but this data directory held the group's log" + snapshotsNote(snaps)}
		}
		st.fresh = true
		return st, nil
	case err != nil:
		return st, &DataDirError{Path: path, Problem: "cannot be read", Err: err}
	case !info.Mode().IsRegular():
		return st, &DataDirError{Path: path, Problem: "is not a regular file"}
	case info.Size() == 0:
		if held || snaps {
			return st, &DataDirError{Path: path, Problem: "is empty (0 bytes) but this data directory held the group's log" + snapshotsNote(snaps)}
		}
		// BoltDB creates the file, then writes its first pages: a first
		// start killed in between leaves it empty, and nothing was written.
		if err := os.Remove(path); err != nil {
			return st, &DataDirError{Path: path, Problem: "is empty and cannot be removed", Err: err}
		}
		st.fresh = true
		return st, nil
	}
	if err := checkBoltFile(path); err != nil {
		problem := "is damaged"
		if !errors.Is(err, ErrStoreDamaged) {
			problem = "cannot be read"
		}
		return st, &DataDirError{Path: path, Problem: problem, Err: err}
	}
	return st, nil
}

func snapshotsNote(snaps bool) string {
	if snaps {
		return " (its snapshots are still there)"
	}
	return ""
}

func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// hasSnapshots tells whether the snapshot store holds a snapshot (a
// directory with its meta.json; raft's temporary ".tmp" ones do not count).
func hasSnapshots(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		if ok, err := exists(filepath.Join(dir, e.Name(), "meta.json")); err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// writeMarker writes a small file durably: written, synced, renamed into
// place and the directory synced.
func writeMarker(dir, name, content string) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	_, err = f.WriteString(content)
	err = errors.Join(err, f.Sync(), f.Close())
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}
