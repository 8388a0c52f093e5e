package invariants

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"
)

// ReplayDataDir rebuilds a stopped replica's ledger from its data directory
// (raft/raft.db and raft/snapshots): the latest snapshot, then every log
// entry after it, applied to a fresh ledger. Unlike a State, the History it
// returns holds every leadership epoch and every version of every fence
// record the log still has. The replica must be stopped: the log store is
// opened read-only and waits at most lockWait for the file lock.
func ReplayDataDir(dataDir string, lockWait time.Duration) (*History, error) {
	dir := filepath.Join(dataDir, "raft")
	fsm := ledger.New()
	var snapIndex uint64
	if _, err := os.Stat(filepath.Join(dir, "snapshots")); err == nil {
		snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(dir, "snapshots"), 1, hclog.NewNullLogger())
		if err != nil {
			return nil, fmt.Errorf("replay %s: open snapshots: %w", dataDir, err)
		}
		list, err := snaps.List()
		if err != nil {
			return nil, fmt.Errorf("replay %s: list snapshots: %w", dataDir, err)
		}
		if len(list) > 0 {
			meta, rc, err := snaps.Open(list[0].ID)
			if err != nil {
				return nil, fmt.Errorf("replay %s: open snapshot %s: %w", dataDir, list[0].ID, err)
			}
			err = fsm.Restore(rc)
			if err != nil {
				return nil, fmt.Errorf("replay %s: restore snapshot %s: %w", dataDir, meta.ID, err)
			}
			snapIndex = meta.Index
		}
	}
	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(dir, "raft.db"),
		BoltOptions: &bolt.Options{ReadOnly: true, Timeout: lockWait},
	})
	if err != nil {
		return nil, fmt.Errorf("replay %s: open log store (is the replica stopped?): %w", dataDir, err)
	}
	defer store.Close()
	first, err := store.FirstIndex()
	if err != nil {
		return nil, fmt.Errorf("replay %s: first index: %w", dataDir, err)
	}
	last, err := store.LastIndex()
	if err != nil {
		return nil, fmt.Errorf("replay %s: last index: %w", dataDir, err)
	}
	if first > snapIndex+1 && last > 0 {
		return nil, fmt.Errorf("replay %s: the log starts at %d but the snapshot ends at %d", dataDir, first, snapIndex)
	}
	h := FromState(fsm.Copy())
	fences := map[string]*ledger.Fence{}
	for _, f := range h.Fences {
		fences[f.ID] = f
	}
	for idx := max(first, snapIndex+1); idx <= last && last > 0; idx++ {
		var l raft.Log
		if err := store.GetLog(idx, &l); err != nil {
			if errors.Is(err, raft.ErrLogNotFound) {
				continue
			}
			return nil, fmt.Errorf("replay %s: read entry %d: %w", dataDir, idx, err)
		}
		if l.Type != raft.LogCommand || len(l.Data) == 0 {
			continue
		}
		if fsm.Apply(&l) != nil {
			continue // refused: the state did not change
		}
		t := ledger.MessageType(l.Data[0])
		if t == ledger.TypeLeaderEpoch {
			if e, ok := fsm.Copy().CurrentEpoch(); ok {
				h.Epochs = append(h.Epochs, e)
			}
			continue
		}
		var subject struct {
			Cluster string `json:"cluster"`
			Node    string `json:"node"`
		}
		if json.Unmarshal(l.Data[1:], &subject) != nil || subject.Node == "" {
			continue
		}
		fsm.Read(func(s *ledger.State) {
			n := s.Node(subject.Cluster, subject.Node)
			if n == nil {
				return
			}
			for _, f := range append(append([]*ledger.Fence(nil), n.History...), n.Fence) {
				if f != nil {
					fences[f.ID] = cloneFence(f)
				}
			}
			if f := n.Fence; f != nil && f.State == ledger.StateFenced && lastIndex(f) == idx {
				h.AtFenced = append(h.AtFenced, cloneFence(f))
			}
		})
	}
	h.Final = fsm.Copy()
	h.Fences = h.Fences[:0]
	for _, f := range fences {
		h.Fences = append(h.Fences, f)
	}
	final := FromState(h.Final)
	final.AtFenced = nil // the replay saw each fenced step as it committed
	out := Merge(h, final)
	out.Final = h.Final
	return out, nil
}

// cloneFence deep-copies a record through JSON.
func cloneFence(f *ledger.Fence) *ledger.Fence {
	b, err := json.Marshal(f)
	if err != nil {
		return f
	}
	var c ledger.Fence
	if json.Unmarshal(b, &c) != nil {
		return f
	}
	return &c
}
