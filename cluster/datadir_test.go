package cluster

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// devConfig is a single replica without TLS (in-memory transport) on dir.
func devConfig(dir string) Config {
	cfg := DefaultConfig()
	cfg.ID, cfg.DataDir, cfg.BindAddr = "dev", dir, "127.0.0.1:7441"
	return cfg
}

// devLedger starts a single replica on dir, commits notes and stops it.
func devLedger(t *testing.T, dir string, notes int) {
	t.Helper()
	n, err := Open(devConfig(dir), newTestLogger(t), nil)
	require.NoError(t, err)
	leader, l := waitLeader(t, []*Node{n}, waitLong)
	applyNotes(t, leader, l, "kept", notes)
	require.NoError(t, n.Close())
}

// openDev opens a single replica on dir and checks that it leads and
// commits, and that the notes kept-0..kept-(kept-1) are in its ledger.
func openDev(t *testing.T, dir string, kept int) {
	t.Helper()
	n, err := Open(devConfig(dir), newTestLogger(t), nil)
	require.NoError(t, err)
	defer n.Close()
	leader, l := waitLeader(t, []*Node{n}, waitLong)
	for i := range kept {
		assert.True(t, hasNote(n.Ledger().Copy(), "kept-"+string(rune('0'+i))), "kept-%d", i)
	}
	applyNotes(t, leader, l, "after", 1)
}

func refused(t *testing.T, dir, problem string) *DataDirError {
	t.Helper()
	n, err := Open(devConfig(dir), newTestLogger(t), nil)
	if n != nil {
		n.Close()
	}
	require.Error(t, err)
	require.ErrorIs(t, err, ErrDataDir)
	var de *DataDirError
	require.ErrorAs(t, err, &de)
	assert.Contains(t, de.Problem, problem)
	assert.Contains(t, err.Error(), "fenced datadir recover --rejoin", "the refusal names the way out")
	return de
}

// inUse opens the data directory dir of a running replica and checks the
// refusal names the process and tells to stop it, not to recover a store
// that is intact.
func inUse(t *testing.T, dir string) {
	t.Helper()
	n, err := Open(devConfig(dir), newTestLogger(t), nil)
	if n != nil {
		n.Close()
	}
	require.ErrorIs(t, err, ErrDataDir)
	var de *DataDirError
	require.ErrorAs(t, err, &de)
	assert.True(t, de.InUse)
	assert.Contains(t, de.Problem, fmt.Sprintf("is locked by process %d", os.Getpid()), "the holder is named")
	assert.Contains(t, err.Error(), "stop it first")
	assert.NotContains(t, err.Error(), "datadir recover", "a store in use is never to be recovered")
}

func storePath(dir string) string { return filepath.Join(dir, "raft", storeFile) }

func TestZeroLengthStoreIsRefusedAfterTheLedgerWasHeld(t *testing.T) {
	dir := t.TempDir()
	devLedger(t, dir, 3)
	require.NoError(t, os.Truncate(storePath(dir), 0))
	_ = refused(t, dir, "is empty (0 bytes)")
	// Still refused on the next try: nothing was bootstrapped meanwhile.
	_ = refused(t, dir, "is empty (0 bytes)")
	fi, err := os.Stat(storePath(dir))
	require.NoError(t, err)
	assert.Zero(t, fi.Size())

	require.NoError(t, os.Remove(storePath(dir)))
	_ = refused(t, dir, "is missing")

	// The explicit way out: a new group, the old state kept aside.
	moved, err := RecoverDataDir(dir, Bootstrap, time.Now())
	require.NoError(t, err)
	assert.DirExists(t, moved)
	assert.FileExists(t, filepath.Join(moved, markerHeld))
	openDev(t, dir, 0)
}

func TestZeroLengthStoreOnFirstStartBootstraps(t *testing.T) {
	// BoltDB creates the file before it writes its first pages: a first
	// start killed in between leaves it empty, with nothing ever written.
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "raft"), 0o700))
	require.NoError(t, os.WriteFile(storePath(dir), nil, 0o600))
	openDev(t, dir, 0)
}

// boltPages returns the store's page size and the ids of the pages of the
// given type that are in use (reachable from the newest meta page).
func boltPages(t *testing.T, path string, flags uint16) (pageSize int64, ids []uint64) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	fi, err := f.Stat()
	require.NoError(t, err)
	c := &boltChecker{f: f, size: fi.Size(), seen: map[uint64]bool{}, free: map[uint64]bool{}}
	require.NoError(t, c.check())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	for id := range c.hwm {
		p := b[int64(id)*c.pageSize:]
		if c.seen[id] && binary.NativeEndian.Uint16(p[8:]) == flags {
			ids = append(ids, id)
		}
	}
	return c.pageSize, ids
}

// logValue returns the offset in the file of the value of the first log
// entry in a leaf page in use (keys of the logs bucket are 8-byte indexes).
func logValue(t *testing.T, path string) int64 {
	t.Helper()
	pageSize, leaves := boltPages(t, path, boltLeafPage)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, id := range leaves {
		p := b[int64(id)*pageSize:]
		for i := range int(binary.NativeEndian.Uint16(p[10:])) {
			e := p[boltPageHeader+i*boltElement:]
			if binary.NativeEndian.Uint32(e) != 0 || binary.NativeEndian.Uint32(e[8:]) != 8 {
				continue
			}
			pos := uint64(binary.NativeEndian.Uint32(e[4:]))
			return int64(id)*pageSize + int64(boltPageHeader+i*boltElement) + int64(pos) + 8
		}
	}
	t.Fatal("no log entry found")
	return 0
}

func patch(t *testing.T, path string, off int64, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(data, off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func TestDamagedMetaPageIsRefusedNotRolledBack(t *testing.T) {
	for _, meta := range []int64{0, 1} {
		t.Run(string(rune('0'+meta)), func(t *testing.T) {
			dir := t.TempDir()
			devLedger(t, dir, 3)
			pageSize, _ := boltPages(t, storePath(dir), boltMetaPage)
			// One byte of the meta's txid: BoltDB would fall back to the
			// other meta page, an older transaction.
			patch(t, storePath(dir), meta*pageSize+boltPageHeader+48, []byte{0x5a})
			de := refused(t, dir, "is damaged")
			assert.Contains(t, de.Err.Error(), "checksum")
		})
	}
}

func TestDamagedDataPageIsRefused(t *testing.T) {
	cases := map[string]func(t *testing.T, path string){
		"garbage leaf page": func(t *testing.T, path string) {
			pageSize, leaves := boltPages(t, path, boltLeafPage)
			require.NotEmpty(t, leaves)
			junk := make([]byte, pageSize-8)
			r := rand.New(rand.NewPCG(1, 2))
			for i := range junk {
				junk[i] = byte(r.UintN(256))
			}
			// Keep the page id so that only the contents are damaged.
			patch(t, path, int64(leaves[len(leaves)-1])*pageSize+8, junk)
		},
		"zeroed leaf page": func(t *testing.T, path string) {
			pageSize, leaves := boltPages(t, path, boltLeafPage)
			require.NotEmpty(t, leaves)
			patch(t, path, int64(leaves[0])*pageSize, make([]byte, pageSize))
		},
		"freelist lists a page in use": func(t *testing.T, path string) {
			pageSize, lists := boltPages(t, path, boltFreelistPage)
			_, leaves := boltPages(t, path, boltLeafPage)
			require.NotEmpty(t, lists)
			b := make([]byte, 12)
			binary.NativeEndian.PutUint16(b, 1) // count
			binary.NativeEndian.PutUint64(b[4:], leaves[0])
			patch(t, path, int64(lists[0])*pageSize+10, b[:2])
			patch(t, path, int64(lists[0])*pageSize+boltPageHeader, b[4:])
		},
		"truncated file": func(t *testing.T, path string) {
			pageSize, _ := boltPages(t, path, boltMetaPage)
			require.NoError(t, os.Truncate(path, 3*pageSize))
		},
		"damaged log entry": func(t *testing.T, path string) {
			// The structure is intact; the entry no longer decodes (0xc1
			// is never used in MessagePack).
			patch(t, path, logValue(t, path), []byte{0xc1})
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			devLedger(t, dir, 3)
			damage(t, storePath(dir))
			de := refused(t, dir, "")
			require.ErrorIs(t, de, ErrStoreDamaged)
			t.Log(de)
		})
	}
}

func TestUnreadableStoreIsRefused(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads files whatever their mode")
	}
	dir := t.TempDir()
	devLedger(t, dir, 1)
	require.NoError(t, os.Chmod(storePath(dir), 0))
	_ = refused(t, dir, "cannot be read")
}

func TestSecondProcessOnTheDataDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	n, err := Open(devConfig(dir), newTestLogger(t), nil)
	require.NoError(t, err)
	defer n.Close()
	inUse(t, dir)
}

// A replica holds its data directory's lock from before it looks at the
// store: a second opener on the directory of a live replica whose store is
// still empty (created, first pages not yet written) is refused and
// removes nothing, and the replica's store is the same file afterwards.
func TestSecondOpenerCannotRemoveALiveReplicasEmptyStore(t *testing.T) {
	dir := t.TempDir()
	raftDir := filepath.Join(dir, "raft")
	require.NoError(t, os.MkdirAll(raftDir, 0o700))
	// The live replica: it holds the lock and has just created its store.
	live, err := lockDataDir(raftDir, 0)
	require.NoError(t, err)
	defer live.Close()
	require.NoError(t, os.WriteFile(storePath(dir), nil, 0o600))
	before, err := os.Stat(storePath(dir))
	require.NoError(t, err)

	inUse(t, dir)
	after, err := os.Stat(storePath(dir))
	require.NoError(t, err, "the live replica's store was removed")
	assert.True(t, os.SameFile(before, after), "the live replica's store was replaced")

	// The offline recovery is refused too.
	_, err = RecoverDataDir(dir, Rejoin, time.Now())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "in use")
	assert.DirExists(t, raftDir)

	// Once the replica is gone, a start on the empty store goes on.
	require.NoError(t, live.Close())
	openDev(t, dir, 0)
}

// killAfter stops the test process with SIGKILL right after the store
// wrote a non-zero value under key (Raft writes the term 0 it starts with
// too): a crash at that point of the first bootstrap.
type killAfter struct {
	raftStore
	key string
}

func (k killAfter) SetUint64(key []byte, v uint64) error {
	err := k.raftStore.SetUint64(key, v)
	if string(key) == k.key && v != 0 {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	return err
}

// TestBootstrapChild is the replica the SIGKILL tests run in a child
// process; it does nothing in a normal run.
func TestBootstrapChild(t *testing.T) {
	dir := os.Getenv("FENCED_TEST_BOOTSTRAP_DIR")
	if dir == "" {
		t.Skip("run by TestSIGKILLDuringFirstBootstrap")
	}
	cfg := devConfig(dir)
	if key := os.Getenv("FENCED_TEST_KILL_AFTER"); key != "" {
		cfg.wrapStore = func(s raftStore) raftStore { return killAfter{s, key} }
	}
	n, err := Open(cfg, nil, nil)
	require.NoError(t, err)
	leader, l := waitLeader(t, []*Node{n}, waitLong)
	applyNotes(t, leader, l, "kept", 1)
	require.NoError(t, n.Close())
}

func runBootstrapChild(t *testing.T, dir, killAfter string, killIn time.Duration) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBootstrapChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FENCED_TEST_BOOTSTRAP_DIR="+dir, "FENCED_TEST_KILL_AFTER="+killAfter)
	require.NoError(t, cmd.Start())
	if killIn > 0 {
		time.AfterFunc(killIn, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
	}
	_ = cmd.Wait()
}

func TestSIGKILLDuringFirstBootstrap(t *testing.T) {
	t.Run("between the term and the configuration", func(t *testing.T) {
		dir := t.TempDir()
		runBootstrapChild(t, dir, string(keyCurrentTerm), 0)
		// The child died with the term written and no configuration.
		s, err := raftboltdb.New(raftboltdb.Options{Path: storePath(dir)})
		require.NoError(t, err)
		term, err := s.GetUint64(keyCurrentTerm)
		require.NoError(t, err)
		last, err := s.LastIndex()
		require.NoError(t, err)
		require.NoError(t, s.Close())
		require.Equal(t, uint64(1), term)
		require.Zero(t, last)
		assert.NoFileExists(t, filepath.Join(dir, "raft", markerHeld))
		openDev(t, dir, 0)
	})
	t.Run("at random moments", func(t *testing.T) {
		r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 19))
		for i := range 12 {
			dir := t.TempDir()
			killIn := time.Duration(r.IntN(120)) * time.Millisecond
			runBootstrapChild(t, dir, "", killIn+time.Millisecond)
			t.Logf("try %d: killed after %s", i, killIn)
			n, err := Open(devConfig(dir), newTestLogger(t), nil)
			require.NoError(t, err, "try %d", i)
			leader, l := waitLeader(t, []*Node{n}, waitLong)
			if hasNote(n.Ledger().Copy(), "kept-0") {
				t.Logf("try %d: the child had committed before it was killed; its note is kept", i)
			}
			applyNotes(t, leader, l, "after", 1)
			require.NoError(t, n.Close())
		}
	})
}

// fullDisk fails writes with ENOSPC while full is set.
type fullDisk struct {
	raftStore
	full *atomic.Bool
}

func (d fullDisk) err() error {
	if d.full.Load() {
		return &os.PathError{Op: "write", Path: "raft.db", Err: syscall.ENOSPC}
	}
	return nil
}

func (d fullDisk) StoreLogs(logs []*raft.Log) error {
	if err := d.err(); err != nil {
		return err
	}
	return d.raftStore.StoreLogs(logs)
}

func (d fullDisk) StoreLog(l *raft.Log) error { return d.StoreLogs([]*raft.Log{l}) }

func (d fullDisk) Set(k, v []byte) error {
	if err := d.err(); err != nil {
		return err
	}
	return d.raftStore.Set(k, v)
}

func (d fullDisk) SetUint64(k []byte, v uint64) error {
	if err := d.err(); err != nil {
		return err
	}
	return d.raftStore.SetUint64(k, v)
}

func (d fullDisk) DeleteRange(lo, hi uint64) error {
	if err := d.err(); err != nil {
		return err
	}
	return d.raftStore.DeleteRange(lo, hi)
}

func TestFullDiskHoldsWithoutElections(t *testing.T) {
	g := newGroup(t, 3)
	full := map[string]*atomic.Bool{}
	for _, id := range g.ids() {
		f := &atomic.Bool{}
		full[id] = f
		cfg := g.cfgs[id]
		cfg.wrapStore = func(s raftStore) raftStore { return fullDisk{s, f} }
		cfg.storeRetry = 100 * time.Millisecond
		// A full disk shorter than the handover bound: held, no election
		// (TestFullDiskLeaderHandsOver shows what happens after it).
		cfg.Timings.StorageFullHandover = time.Hour
		g.cfgs[id] = cfg
	}
	g.startAll()
	leader, l := waitLeader(t, g.running(), waitLong)
	index := applyNotes(t, leader, l, "before", 2)
	waitSameLedger(t, g.running(), index)
	term := leader.Status().Term

	check := func(t *testing.T, n *Node, want float64) {
		t.Helper()
		assert.InDelta(t, want, testutil.ToFloat64(n.metrics.storageFull), 0)
		if want == 1 {
			require.ErrorIs(t, n.StorageFull(), ErrStorageFull)
			assert.Contains(t, n.StorageFull().Error(), "no space left on device")
		} else {
			require.NoError(t, n.StorageFull())
		}
	}

	t.Run("the leader's disk", func(t *testing.T) {
		full[leader.ID()].Store(true)
		ctx, cancel := context.WithTimeout(l.Ctx, 2*time.Second)
		_, err := leader.Apply(ctx, note(l, "during"))
		cancel()
		require.Error(t, err, "nothing commits while the leader cannot write")
		check(t, leader, 1)
		// Five heartbeat timeouts: no election, no term change anywhere.
		time.Sleep(5 * g.cfgs["r1"].Timings.HeartbeatTimeout)
		for _, n := range g.running() {
			assert.Equal(t, term, n.Status().Term, "replica %s", n.ID())
			li, ok := n.Leader()
			assert.True(t, ok)
			assert.Equal(t, leader.ID(), li.ID)
		}
		full[leader.ID()].Store(false)
		require.Eventually(t, func() bool { return leader.StorageFull() == nil }, waitLong, 20*time.Millisecond)
		check(t, leader, 0)
		_, l2 := waitLeader(t, g.running(), waitLong)
		index := applyNotes(t, leader, l2, "after-leader", 1)
		st := waitSameLedger(t, g.running(), index)
		assert.Contains(t, st, "before-1")
		assert.Contains(t, st, "after-leader-0")
		assert.Positive(t, testutil.ToFloat64(leader.metrics.storeWriteErrors))
	})

	t.Run("a follower's disk", func(t *testing.T) {
		leader, l := waitLeader(t, g.running(), waitLong)
		term := leader.Status().Term
		var follower *Node
		for _, n := range g.running() {
			if n != leader {
				follower = n
				break
			}
		}
		full[follower.ID()].Store(true)
		index := applyNotes(t, leader, l, "follower-full", 2)
		require.Eventually(t, func() bool { return follower.StorageFull() != nil }, waitLong, 20*time.Millisecond)
		check(t, follower, 1)
		time.Sleep(5 * g.cfgs["r1"].Timings.HeartbeatTimeout)
		for _, n := range g.running() {
			assert.Equal(t, term, n.Status().Term, "replica %s", n.ID())
		}
		full[follower.ID()].Store(false)
		waitSameLedger(t, g.running(), index)
		check(t, follower, 0)
	})
}

func TestRejoinAfterLosingTheStore(t *testing.T) {
	g := newGroup(t, 3)
	g.startAll()
	leader, l := waitLeader(t, g.running(), waitLong)
	index := applyNotes(t, leader, l, "kept", 3)
	waitSameLedger(t, g.running(), index)
	lost := "r3"
	if leader.ID() == lost {
		lost = "r2"
	}
	g.stop(lost)
	path := storePath(g.cfgs[lost].DataDir)
	require.NoError(t, os.Truncate(path, 0))

	_, err := Open(g.cfgs[lost], g.log, nil)
	require.ErrorIs(t, err, ErrDataDir)
	assert.Contains(t, err.Error(), "is empty (0 bytes) but this data directory held the group's log")

	moved, err := RecoverDataDir(g.cfgs[lost].DataDir, Rejoin, time.Now())
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(moved, storeFile))
	n := g.start(lost)
	leader, l = waitLeader(t, g.running(), waitLong)
	index = applyNotes(t, leader, l, "after", 1)
	st := waitSameLedger(t, g.running(), index)
	assert.Contains(t, st, "kept-2")
	assert.True(t, hasNote(n.Ledger().Copy(), "kept-0"))
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(g.cfgs[lost].DataDir, "raft", markerRejoin))
		return os.IsNotExist(err)
	}, waitLong, 20*time.Millisecond, "the rejoin marker goes once the replica has caught up with a leader")
	assert.FileExists(t, filepath.Join(g.cfgs[lost].DataDir, "raft", markerHeld))
}

// FuzzCheckBoltFile damages a real store at random: the check never
// panics, and a store it passes opens and reads its log without panicking
// or faulting.
func FuzzCheckBoltFile(f *testing.F) {
	seedPath := filepath.Join(f.TempDir(), storeFile)
	s, err := raftboltdb.New(raftboltdb.Options{Path: seedPath})
	require.NoError(f, err)
	for i := uint64(1); i <= 200; i++ {
		data := []byte(strings.Repeat("entry ", int(i%40)))
		require.NoError(f, s.StoreLog(&raft.Log{Index: i, Term: 1 + i/50, Type: raft.LogCommand, Data: data}))
	}
	require.NoError(f, s.DeleteRange(1, 20))
	require.NoError(f, s.SetUint64(keyCurrentTerm, 5))
	require.NoError(f, s.Close())
	seed, err := os.ReadFile(seedPath)
	require.NoError(f, err)
	require.NoError(f, checkBoltFile(seedPath))
	f.Add(uint32(0), []byte{0xff})
	f.Add(uint32(4096+16), []byte{1, 2, 3, 4})
	f.Add(uint32(2*4096+10), []byte{0xff, 0xff})
	f.Add(uint32(3*4096), make([]byte, 64))
	f.Fuzz(func(t *testing.T, off uint32, patch []byte) {
		b := append([]byte(nil), seed...)
		at := int(off) % len(b)
		copy(b[at:], patch)
		path := filepath.Join(t.TempDir(), storeFile)
		require.NoError(t, os.WriteFile(path, b, 0o600))
		if checkBoltFile(path) != nil {
			return
		}
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		s, err := raftboltdb.New(raftboltdb.Options{Path: path})
		if err != nil {
			return
		}
		_ = checkStoredLog(s)
		_ = s.Close()
	})
}

// TestFullTmpfs fills a small tmpfs under a real single replica: BoltDB's
// ENOSPC reaches the guard, the write is held with no election, and once
// space is freed the held entry and the ones before it are all there. It
// needs to mount a tmpfs (root); elsewhere TestFullDiskHoldsWithoutElections
// covers the same with an injected fault.
func TestFullTmpfs(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })

	cfg := devConfig(dir)
	cfg.storeRetry = 50 * time.Millisecond
	n, err := Open(cfg, newTestLogger(t), nil)
	require.NoError(t, err)
	defer n.Close()
	leader, l := waitLeader(t, []*Node{n}, waitLong)
	applyNotes(t, leader, l, "kept", 3)
	term := n.Status().Term

	ballast, err := os.Create(filepath.Join(dir, "ballast"))
	require.NoError(t, err)
	chunk := make([]byte, 64<<10)
	for {
		if _, err := ballast.Write(chunk); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			break
		}
	}
	require.NoError(t, ballast.Close())

	// Notes big enough to need new pages.
	big := strings.Repeat("x", 4000)
	ctx, cancel := context.WithTimeout(l.Ctx, 3*time.Second)
	var held error
	for i := 0; held == nil && i < 64; i++ {
		_, held = n.Apply(ctx, note(l, big+"-"+string(rune('a'+i%26))))
	}
	cancel()
	require.Error(t, held, "the tmpfs never filled")
	t.Logf("apply on a full disk: %v", held)
	require.ErrorIs(t, n.StorageFull(), ErrStorageFull)
	assert.Contains(t, n.StorageFull().Error(), "no space left on device")
	assert.InDelta(t, 1.0, testutil.ToFloat64(n.metrics.storageFull), 0)
	time.Sleep(3 * cfg.Timings.HeartbeatTimeout)
	assert.Equal(t, term, n.Status().Term, "no election while the disk is full")

	require.NoError(t, os.Remove(filepath.Join(dir, "ballast")))
	require.Eventually(t, func() bool { return n.StorageFull() == nil }, waitLong, 20*time.Millisecond)
	leader, l = waitLeader(t, []*Node{n}, waitLong)
	applyNotes(t, leader, l, "after", 1)
	st := n.Ledger().Copy()
	for _, r := range []string{"kept-0", "kept-1", "kept-2", "after-0"} {
		assert.True(t, hasNote(st, r), r)
	}
	assert.Equal(t, term, n.Status().Term)
	require.NoError(t, n.Close())
	require.NoError(t, checkBoltFile(storePath(dir)), "the store is sound after the full disk")
}
