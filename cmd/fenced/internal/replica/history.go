package replica

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/cmd/fenced/status"
)

// MaxHistoryLimit bounds the limit parameter of the history.
const MaxHistoryLimit = 10000

// HistoryHandler serves status.History from the replica's ledger.
// configured names the clusters of the replica's configuration: a cluster
// asked for that is neither configured nor in the ledger is answered 404
// naming the known ones (a misspelled name is no empty history).
func HistoryHandler(replicaID string, l *ledger.FSM, configured []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		cluster, node := q.Get("cluster"), q.Get("node")
		if cluster != "" {
			if known := knownClusters(l, configured); !slices.Contains(known, cluster) {
				msg := fmt.Sprintf("no cluster %q on replica %s", cluster, replicaID)
				if len(known) > 0 {
					msg += ": its clusters are " + strings.Join(known, ", ")
				}
				http.Error(w, msg, http.StatusNotFound)
				return
			}
		}
		limit := 0
		if v := q.Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > MaxHistoryLimit {
				http.Error(w, fmt.Sprintf("limit %q: want 0 to %d", v, MaxHistoryLimit), http.StatusBadRequest)
				return
			}
			limit = n
		}
		h := ReadHistory(l, cluster, node, limit)
		h.ReplicaID = replicaID
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(h)
	})
}

// knownClusters are the configured clusters and those the ledger holds
// records of (a cluster removed from the configuration keeps its history),
// sorted.
func knownClusters(l *ledger.FSM, configured []string) []string {
	known := slices.Clone(configured)
	l.Read(func(s *ledger.State) {
		for name := range s.Clusters {
			known = append(known, name)
		}
	})
	slices.Sort(known)
	return slices.Compact(known)
}

// ReadHistory lists the ledger's finished records, newest first, of one
// cluster and node when given; limit 0 means all.
func ReadHistory(l *ledger.FSM, cluster, node string, limit int) status.History {
	h := status.History{Fences: []status.Fence{}}
	var recs []*ledger.Fence
	l.Read(func(s *ledger.State) {
		h.AppliedIndex = s.Index
		for name, c := range s.Clusters {
			if cluster != "" && name != cluster {
				continue
			}
			for nname, n := range c.Nodes {
				if node != "" && nname != node {
					continue
				}
				recs = append(recs, n.History...)
			}
		}
		for _, f := range recs {
			e := FinishedFence(f)
			for _, st := range f.Steps {
				e.Steps = append(e.Steps, status.FenceStep{To: string(st.To), At: st.At, By: st.By,
					Operator: st.Operator, Note: st.Note, Forced: st.Forced})
			}
			for _, sc := range f.Scopes {
				rs := status.RestoreScope{At: sc.At, By: sc.By, Note: sc.Note}
				for array, w := range sc.Restore {
					if len(w.Wanted) > 0 {
						if rs.Wanted == nil {
							rs.Wanted = map[string][]string{}
						}
						rs.Wanted[array] = slices.Clone(w.Wanted)
					}
				}
				e.Scopes = append(e.Scopes, rs)
			}
			h.Fences = append(h.Fences, e)
		}
	})
	slices.SortStableFunc(h.Fences, func(a, b status.Fence) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	if limit > 0 && len(h.Fences) > limit {
		h.Fences = h.Fences[:limit]
	}
	return h
}
