package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenced-project/fenced/cluster/ledger"
)

// LedgerVersionsPath is the replica HTTP route where a replica advertises
// the ledger versions it applies (LedgerVersions). The leader reads it from
// every voter, as etcd's leader reads each member's version, to decide the
// group ledger version.
const LedgerVersionsPath = "/v1/replica/ledger-versions"

// LedgerVersions is what a replica advertises at LedgerVersionsPath.
type LedgerVersions struct {
	Replica string `json:"replica"`
	// Min and Max are the oldest and newest ledger versions it applies.
	Min int `json:"min"`
	Max int `json:"max"`
	// Group is the group ledger version its ledger holds.
	Group int `json:"group"`
	// Halted, when set, says its ledger met an entry it cannot apply.
	Halted *ledger.Halt `json:"halted,omitempty"`
	// ArrayTimeoutMillis is its longest array request timeout in
	// milliseconds (0 from builds that do not say): a leader elected after
	// it waits out its requests for that long (Leadership.PeerArrayTimeout).
	ArrayTimeoutMillis int64 `json:"arrayTimeoutMs,omitempty"`
}

// ErrLedgerVersion means a command was composed with a ledger version
// newer than the group runs: a voter may not apply it.
var ErrLedgerVersion = errors.New("ledger version not run by the group")

// LedgerVersions is what this replica advertises.
func (n *Node) LedgerVersions() LedgerVersions {
	v := LedgerVersions{Replica: n.cfg.ID, Min: ledger.MinVersion, Max: ledger.Version, Halted: n.fsm.Halted()}
	n.fsm.Read(func(s *ledger.State) { v.Group = s.GroupVersion() })
	n.mu.Lock()
	v.ArrayTimeoutMillis = n.arrayTimeout.Milliseconds()
	n.mu.Unlock()
	return v
}

// LedgerVersionsHandler serves LedgerVersions. Mount it behind the replica
// authentication at LedgerVersionsPath.
func (n *Node) LedgerVersionsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(n.LedgerVersions())
	})
}

// VersionProbe asks a peer which ledger versions it applies. The daemon
// gives one that calls the peer's LedgerVersionsPath with the replica
// client certificate (see HTTPVersionProbe).
type VersionProbe func(ctx context.Context, p Peer) (LedgerVersions, error)

// SetVersionProbe sets how the leader asks voters for their ledger
// versions. Without one the group stays at the version it holds.
func (n *Node) SetVersionProbe(p VersionProbe) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.versionProbe = p
}

// HTTPVersionProbe asks a peer over HTTP. A peer that answers 404 runs a
// build from before ledger versions were advertised: it applies versions
// 1 to ledger.LegacyVersion.
func HTTPVersionProbe(client *http.Client) VersionProbe {
	return func(ctx context.Context, p Peer) (LedgerVersions, error) {
		base, err := httpBase(p.HTTPAddr)
		if err != nil {
			return LedgerVersions{}, fmt.Errorf("peer %s HTTP address: %w", p.ID, err)
		}
		u := *base
		u.Path = strings.TrimSuffix(base.Path, "/") + LedgerVersionsPath
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return LedgerVersions{}, fmt.Errorf("ask peer %s for its ledger versions: %w", p.ID, err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return LedgerVersions{}, fmt.Errorf("ask peer %s for its ledger versions: %w", p.ID, err)
		}
		defer resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
		case http.StatusNotFound:
			return LedgerVersions{Replica: p.ID, Min: 1, Max: ledger.LegacyVersion}, nil
		default:
			return LedgerVersions{}, fmt.Errorf("ask peer %s for its ledger versions: HTTP %d", p.ID, resp.StatusCode)
		}
		var v LedgerVersions
		if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&v); err != nil {
			return LedgerVersions{}, fmt.Errorf("decode the ledger versions of peer %s: %w", p.ID, err)
		}
		if v.Replica != p.ID || v.Min < 1 || v.Max < v.Min {
			return LedgerVersions{}, fmt.Errorf("peer %s advertised ledger versions %d..%d as replica %q", p.ID, v.Min, v.Max, v.Replica)
		}
		return v, nil
	}
}

// groupVersion is the group ledger version this replica's ledger holds.
func (n *Node) groupVersion() int {
	v := ledger.LegacyVersion
	n.fsm.Read(func(s *ledger.State) { v = s.GroupVersion() })
	return v
}

// checkVersion refuses a command composed with a ledger version above the
// group's (SetLedgerVersion, which raises it, excepted).
func (n *Node) checkVersion(cmd ledger.Command) error {
	if cmd.Type() == ledger.TypeSetLedgerVersion {
		return nil
	}
	if v, g := ledger.VersionOf(cmd), n.groupVersion(); v > g {
		return fmt.Errorf("%w: the command is of ledger version %d, the group runs %d", ErrLedgerVersion, v, g)
	}
	return nil
}

// negotiateVersion raises the group ledger version, on the leader, to the
// newest version every voter applies. A voter that cannot be asked keeps
// the group where it is; the version is never lowered. A voter that
// applies less than the group runs is reported loudly: it refuses the
// group's entries (a build of this version or later halts its ledger).
func (n *Node) negotiateVersion(ctx context.Context, term uint64) error {
	n.mu.Lock()
	probe := n.versionProbe
	n.mu.Unlock()
	group := n.groupVersion()
	if probe == nil {
		return nil
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("read raft configuration: %w", err)
	}
	voters := map[string]int{}
	lowest := ledger.Version
	var unknown []string
	for _, s := range f.Configuration().Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		id := string(s.ID)
		max := ledger.Version
		if id != n.cfg.ID {
			p, ok := n.peer(id)
			if !ok {
				unknown = append(unknown, id+" (not configured)")
				continue
			}
			pctx, cancel := context.WithTimeout(ctx, n.cfg.Timings.ApplyTimeout)
			v, err := probe(pctx, p)
			cancel()
			if err != nil {
				unknown = append(unknown, id+": "+err.Error())
				continue
			}
			max = v.Max
			n.notePeerAdvert(v)
			if v.Halted != nil {
				n.log.Error("a voter's ledger is halted: it applies nothing until it is upgraded", "replica", id,
					"halt", v.Halted.String())
			}
		}
		voters[id] = max
		lowest = min(lowest, max)
		if max < group {
			n.log.Error("a voter does not apply the group's ledger version: it refuses the group's entries; upgrade it",
				"replica", id, "appliesUpTo", max, "groupLedgerVersion", group)
		}
	}
	n.mu.Lock()
	n.voterVersions = voters
	n.mu.Unlock()
	if len(unknown) > 0 || lowest <= group {
		if len(unknown) > 0 && group < ledger.Version {
			n.log.Info("group ledger version not raised: voters not asked", "groupLedgerVersion", group, "voters", unknown)
		}
		return nil
	}
	cmd := &ledger.SetLedgerVersion{Meta: ledger.Meta{V: lowest, Term: term, At: time.Now().UTC(), By: n.cfg.ID},
		LedgerVersion: lowest, Voters: voters}
	if _, err := n.Apply(ctx, cmd); err != nil {
		return fmt.Errorf("raise the group ledger version to %d: %w", lowest, err)
	}
	n.log.Info("group ledger version raised: every voter applies it", "from", group, "to", lowest, "voters", voters)
	return nil
}

// haltLoop reports a halted ledger loudly until the replica stops, and
// hands leadership over while it holds it.
func (n *Node) haltLoop(halted <-chan ledger.Halt) {
	defer n.wg.Done()
	var h *ledger.Halt
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case x := <-halted:
			h = &x
		case <-tick.C:
			if h == nil {
				continue
			}
		}
		n.log.Error("LEDGER HALTED: this replica met a committed entry it cannot apply and stopped applying; "+
			"it does not lead, fence or report ready until it runs a build that applies it (see docs/operations.md, upgrades)",
			"halt", h.String())
		if n.raft.State() == raft.Leader {
			if err := n.raft.LeadershipTransfer().Error(); err != nil {
				n.log.Error("hand leadership over from a halted ledger", "error", err)
			}
		}
	}
}
