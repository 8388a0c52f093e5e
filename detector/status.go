package detector

import "time"

// Status is one cluster's section of fenced's /status.
type Status struct {
	Cluster     string        `json:"cluster"`
	EvaluatedAt time.Time     `json:"evaluatedAt,omitzero"`
	Counts      map[State]int `json:"counts"`
	// Doubt is set while this replica doubts its own view of the cluster.
	Doubt Reason     `json:"doubt,omitempty"`
	Storm StormState `json:"storm"`
	// StorageStorm holds each array's storage storm guard when the storage
	// path loss path is on.
	StorageStorm []StorageStormState `json:"storageStorm,omitempty"`
	Self         SelfStatus          `json:"self"`
	// LeaseTiming is set while nodes renew their Leases too seldom for
	// the cluster's timing (see LeaseTiming).
	LeaseTiming *LeaseTiming `json:"leaseTiming,omitempty"`
	// Nodes holds every node that is not Healthy, with its evidence.
	Nodes []Verdict `json:"nodes"`
}

// SelfStatus is this replica's view of itself.
type SelfStatus struct {
	APIReachable bool      `json:"apiReachable"`
	APICheckedAt time.Time `json:"apiCheckedAt,omitzero"`
	APIError     string    `json:"apiError,omitempty"`
	WatchSynced  bool      `json:"watchSynced"`
	WatchError   string    `json:"watchError,omitempty"`
	Quorum       bool      `json:"quorum"`
	Paused       bool      `json:"paused"`
}

// NewStatus builds the status section from an evaluation.
func NewStatus(res Result, self Self, at time.Time) Status {
	st := Status{
		Cluster: res.Cluster, EvaluatedAt: at, Counts: map[State]int{},
		Doubt: res.Doubt, Storm: res.Storm, Nodes: []Verdict{}, LeaseTiming: res.LeaseTiming,
		Self: SelfStatus{
			APIReachable: self.APIReachable, APICheckedAt: self.APICheckedAt, APIError: self.APIError,
			WatchSynced: self.WatchSynced, WatchError: self.WatchError, Quorum: self.Quorum, Paused: self.Paused,
		},
	}
	for _, s := range States {
		st.Counts[s] = res.Counts[s]
	}
	for _, v := range res.Verdicts {
		if v.State != Healthy {
			st.Nodes = append(st.Nodes, v)
		}
	}
	return st
}
