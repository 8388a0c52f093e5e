package replica

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/kube"
)

// statusObjectPeriod is how often the leader looks whether a cluster's
// FencedStatus must change; statusObjectRefresh is how old its updatedAt
// may grow while nothing changes.
const (
	statusObjectPeriod  = 2 * time.Second
	statusObjectRefresh = 30 * time.Second
)

// ClusterStatusObject is what a cluster's FencedStatus shows: the
// leader's /status for that cluster (clusters[] entry and its fences),
// with counts for kubectl's columns.
type ClusterStatusObject struct {
	Leader           string                   `json:"leader"`
	Term             uint64                   `json:"term"`
	UpdatedAt        time.Time                `json:"updatedAt"`
	Paused           bool                     `json:"paused"`
	Pause            *status.Pause            `json:"pause,omitempty"`
	DryRun           bool                     `json:"dryRun"`
	Doubt            string                   `json:"doubt,omitempty"`
	Nodes            *status.NodeCounts       `json:"nodes,omitempty"`
	ProtectedNodes   int                      `json:"protectedNodes"`
	UnprotectedNodes int                      `json:"unprotectedNodes"`
	Unprotected      []status.UnprotectedNode `json:"unprotected,omitempty"`
	Unhealthy        []status.Node            `json:"unhealthy,omitempty"`
	Storm            *status.Storm            `json:"storm,omitempty"`
	OpenFences       int                      `json:"openFences"`
	Fences           []StatusObjectFence      `json:"fences,omitempty"`
}

// StatusObjectFence is one fence of the cluster with its phase.
type StatusObjectFence struct {
	ID      string `json:"id"`
	Node    string `json:"node"`
	Kind    string `json:"kind,omitempty"`
	Phase   string `json:"phase"`
	Origin  string `json:"origin,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Blocked string `json:"blocked,omitempty"`
}

// closedPhases are the phases of finished fences.
var closedPhases = map[string]bool{"closed": true, "aborted": true}

// clusterStatusObject cuts the cluster's part out of the status document.
func clusterStatusObject(st status.Status, cluster string, now time.Time) (ClusterStatusObject, bool) {
	out := ClusterStatusObject{Leader: st.ReplicaID, UpdatedAt: now.UTC().Truncate(time.Second)}
	if st.Raft != nil {
		out.Term = st.Raft.Term
	}
	found := false
	for _, c := range st.Clusters {
		if c.Name != cluster {
			continue
		}
		found = true
		out.Paused, out.Pause, out.DryRun, out.Doubt = c.Paused, c.Pause, c.DryRun, c.Doubt
		out.Nodes, out.Unprotected, out.Unhealthy, out.Storm = c.Nodes, c.Unprotected, c.Unhealthy, c.Storm
		if c.Nodes != nil {
			out.UnprotectedNodes = c.Nodes.Unprotected
			out.ProtectedNodes = c.Nodes.Total - c.Nodes.Unprotected
		}
	}
	for _, f := range st.Fences {
		if f.Cluster != cluster {
			continue
		}
		if !closedPhases[f.Phase] {
			out.OpenFences++
		}
		out.Fences = append(out.Fences, StatusObjectFence{ID: f.ID, Node: f.Node, Kind: f.Kind, Phase: f.Phase,
			Origin: f.Origin, Reason: f.Reason, Blocked: f.Blocked})
	}
	return out, found
}

// publishStatusObject keeps, while this replica leads, the FencedStatus of
// the cluster up to date: written when what it shows changed, and at
// least every statusObjectRefresh (its updatedAt says how fresh it is).
func (f *fencing) publishStatusObject(ctx context.Context, cr *clusterRuntime, obj *kube.StatusObject) {
	var last []byte
	var lastAt time.Time
	t := time.NewTicker(statusObjectPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if l, _ := f.node.Leadership(); !l.Leader {
			last = nil
			continue
		}
		now := time.Now()
		so, ok := clusterStatusObject(f.d.Status(ctx), cr.cfg.Name, now)
		if !ok {
			continue
		}
		cmp := so
		cmp.UpdatedAt = time.Time{}
		key, err := json.Marshal(cmp)
		if err != nil {
			continue
		}
		if string(key) == string(last) && now.Sub(lastAt) < statusObjectRefresh {
			continue
		}
		m, err := toMap(so)
		if err == nil {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err = obj.Write(wctx, m)
			cancel()
		}
		if err != nil {
			f.log.Warn("cannot update the cluster's FencedStatus", "cluster", cr.cfg.Name, "error", err)
			continue
		}
		last, lastAt = key, now
	}
}

func toMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode FencedStatus: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("encode FencedStatus: %w", err)
	}
	return m, nil
}
