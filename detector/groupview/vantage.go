package groupview

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fenced-project/fenced/cluster"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/detector"
)

// Path is the internal route a follower reports its kubelet probes
// to the leader on. It is authorized for replicas (a replica's client
// certificate over HTTPS; the API token over plain HTTP from loopback) and
// wrapped by the Raft node's forwarding, so a report that reaches a
// follower after a leader change is passed on.
const Path = "/v1/internal/vantage"

// SendTimeout bounds one report; the client a Sharing is given should
// have it as its Timeout.
const SendTimeout = 2 * time.Second

// Sharing shares the replicas' kubelet probes. A follower's probes are
// queued by its View (RecordProbe) and sent to the leader by Run; the leader keeps them, with their arrival time, on one
// detector.VantageBoard per cluster (memory only, so that a sample is not
// a ledger write), commits the changes of reachability to the ledger
// (ledger.Observe), and its detectors read the fresh ones back through
// their View (Probes).
type Sharing struct {
	self   string
	node   Node
	boards map[string]*detector.VantageBoard
	log    *slog.Logger

	client *http.Client
	token  string
	cert   bool // this replica has a client certificate (replica.tls)
	caller func(*http.Request) (string, bool)

	mu      sync.Mutex
	pending map[vantageKey]detector.VantageObservation
	since   map[vantageKey]detector.VantageObservation // last value seen and since when
	wake    chan struct{}
	failing bool
}

type vantageKey struct{ cluster, node string }

// SharingConfig is what a Sharing needs.
type SharingConfig struct {
	// Self is this replica's ID.
	Self string
	// Node is this replica of the Raft group.
	Node Node
	// Client sends reports to the leader, authenticated as this replica;
	// nil in a group of one (nothing is sent).
	Client *http.Client
	// Token is the API token, sent where the client has no certificate
	// (Cert false) or the leader's address is plain HTTP.
	Token string
	// Cert says the client presents this replica's certificate.
	Cert bool
	// Caller names the replica whose TLS client certificate authenticated
	// a request (ok false when no replica's certificate did). A report is
	// sent to the leader directly and never forwarded, so the sender is
	// the certificate's replica, never one a header names.
	Caller func(r *http.Request) (replica string, ok bool)
	// Logger receives the warnings.
	Logger *slog.Logger
}

// NewSharing returns the probe sharing of one replica.
func NewSharing(c SharingConfig) *Sharing {
	caller := c.Caller
	if caller == nil {
		caller = func(*http.Request) (string, bool) { return "", false }
	}
	return &Sharing{self: c.Self, node: c.Node, boards: map[string]*detector.VantageBoard{},
		log: c.Logger.With("component", "vantage"), pending: map[vantageKey]detector.VantageObservation{},
		since: map[vantageKey]detector.VantageObservation{}, wake: make(chan struct{}, 1),
		client: c.Client, token: c.Token, cert: c.Cert, caller: caller}
}

// AddCluster creates the cluster's board for the policy's freshness bound.
func (v *Sharing) AddCluster(name string, others []string, p detector.Policy) *detector.VantageBoard {
	b := detector.NewVantageBoard(v.self, others, detector.VantageMaxAge(p))
	v.boards[name] = b
	return b
}

// Queue records a follower's probe for the next report. It keeps the
// newest probe per node and when its reachability last changed.
func (v *Sharing) Queue(obs detector.ProbeObservation) {
	if v.client == nil {
		return
	}
	k := vantageKey{obs.Cluster, obs.Node}
	v.mu.Lock()
	o := detector.VantageObservation{Cluster: obs.Cluster, Node: obs.Node, Reachable: obs.Reachable,
		Since: obs.At, At: obs.At, Address: obs.Address, Error: truncate(obs.Error, 200)}
	if prev, ok := v.since[k]; ok && prev.Reachable == obs.Reachable && !prev.Since.IsZero() {
		o.Since = prev.Since
	}
	v.since[k] = o
	v.pending[k] = o
	v.mu.Unlock()
	select {
	case v.wake <- struct{}{}:
	default:
	}
}

// Run sends the queued probes to the leader as they come (one report per
// wake-up). A report that cannot be delivered is dropped, not retried: the
// next poll brings a fresher one, and an old one would not count anyway.
func (v *Sharing) Run(ctx context.Context) error {
	if v.client == nil {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-v.wake:
		}
		v.mu.Lock()
		p := v.pending
		v.pending = map[vantageKey]detector.VantageObservation{}
		if len(v.since) > 4*MaxTrackedNodes {
			v.since = map[vantageKey]detector.VantageObservation{}
		}
		v.mu.Unlock()
		if len(p) == 0 {
			continue
		}
		err := v.send(ctx, p)
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case err != nil && !v.failing:
			v.log.Warn("cannot report kubelet probes to the leader; the leader counts this replica as no vantage until it can", "error", err)
			v.failing = true
		case err == nil && v.failing:
			v.log.Info("reporting kubelet probes to the leader again")
			v.failing = false
		}
	}
}

// MaxTrackedNodes bounds the reachability history a follower keeps before
// starting afresh (a restarted history only makes Since later).
const MaxTrackedNodes = 10000

func (v *Sharing) send(ctx context.Context, p map[vantageKey]detector.VantageObservation) error {
	li, ok := v.node.Leader()
	if !ok {
		return errors.New("no leader known")
	}
	if li.ID == v.self {
		return nil // this replica leads: its probes feed its own detector
	}
	if li.HTTPAddr == "" {
		return fmt.Errorf("leader %s has no HTTP address", li.ID)
	}
	rep := detector.VantageReport{Replica: v.self, SentAt: time.Now().UTC()}
	for _, k := range slices.SortedFunc(maps.Keys(p), func(a, b vantageKey) int {
		return strings.Compare(a.cluster+"/"+a.node, b.cluster+"/"+b.node)
	}) {
		rep.Observations = append(rep.Observations, p[k])
	}
	body, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("encode vantage report: %w", err)
	}
	url := strings.TrimSuffix(li.HTTPAddr, "/") + Path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("vantage report to %s: %w", li.ID, err)
	}
	req.Header.Set("Content-Type", "application/json")
	// Over HTTPS this replica's certificate authenticates it; the token is
	// for plain HTTP (loopback only) or a replica without a certificate.
	// The token never crosses plain HTTP to another host.
	if v.token != "" && (!strings.HasPrefix(url, "https://") || !v.cert) {
		if err := cluster.CredentialTransportAllowed(req.URL); err != nil {
			return fmt.Errorf("vantage report to %s: %w", li.ID, err)
		}
		req.Header.Set("Authorization", "Bearer "+v.token)
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return fmt.Errorf("vantage report to %s: %w", li.ID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("vantage report to %s: %s: %s", li.ID, resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// vantageAnswer is the leader's answer to a report.
type vantageAnswer struct {
	Accepted  int `json:"accepted"`
	Committed int `json:"committed"`
}

// ServeHTTP takes a follower's report on the leader: it is recorded on the
// boards with the leader's clock, and the changes of reachability are
// committed to the ledger (changes only).
func (v *Sharing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var rep detector.VantageReport
	dec := json.NewDecoder(io.LimitReader(r.Body, 4<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		cluster.WriteError(w, fmt.Errorf("%w: decode vantage report: %w", ledger.ErrInvalid, err))
		return
	}
	if err := rep.Validate(); err != nil {
		cluster.WriteError(w, fmt.Errorf("%w: %w", ledger.ErrInvalid, err))
		return
	}
	if c, ok := v.caller(r); ok && c != rep.Replica {
		v.log.Warn("vantage report refused: it names another replica than the sender's certificate",
			"reportReplica", rep.Replica, "certificateReplica", c, "remote", r.RemoteAddr)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(cluster.ErrorBody{Code: "forbidden",
			Error: fmt.Sprintf("vantage report as replica %q refused: the sender's certificate names replica %q", rep.Replica, c)})
		return
	}
	l, _ := v.node.Leadership()
	if !l.Leader {
		// Reports are not forwarded: the leader would see the follower's
		// certificate, not the sender's. The sender finds the new leader.
		cluster.WriteError(w, cluster.ErrNotLeader)
		return
	}
	byCluster := map[string][]detector.VantageObservation{}
	for _, o := range rep.Observations {
		if _, ok := v.boards[o.Cluster]; !ok {
			cluster.WriteError(w, fmt.Errorf("%w: vantage report: unknown cluster %q", ledger.ErrInvalid, o.Cluster))
			return
		}
		byCluster[o.Cluster] = append(byCluster[o.Cluster], o)
	}
	now := time.Now()
	var ans vantageAnswer
	for _, name := range slices.Sorted(maps.Keys(byCluster)) {
		if _, err := v.boards[name].Report(detector.VantageReport{Replica: rep.Replica, SentAt: rep.SentAt, Observations: byCluster[name]}, now); err != nil {
			cluster.WriteError(w, fmt.Errorf("%w: %w", ledger.ErrInvalid, err))
			return
		}
		ans.Accepted += len(byCluster[name])
	}
	ans.Committed = v.commitAll(r.Context(), l, rep)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ans)
}

// vantageCommitters bounds the ledger writes of one report in flight at
// once. Raft appends writes that wait together in one batch, so a report
// of many changes (hundreds of nodes flapping) costs a few appends instead
// of one round trip per node, and ends well within the sender's timeout.
const vantageCommitters = 32

// commitAll commits the report's changes of reachability, concurrently. The
// observations are of distinct nodes, so their order does not matter. A
// failed write is logged once per report and left to the next report: the
// board already has the observation.
func (v *Sharing) commitAll(ctx context.Context, l cluster.Leadership, rep detector.VantageReport) int {
	var (
		mu        sync.Mutex
		committed int
		failed    int
		first     error
		g         errgroup.Group
	)
	g.SetLimit(vantageCommitters)
	for _, o := range rep.Observations {
		if ctx.Err() != nil {
			break // the sender gave up; the next report carries these again
		}
		g.Go(func() error {
			done, err := v.commit(ctx, l, rep.Replica, o)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				failed++
				if first == nil {
					first = err
				}
			case done:
				committed++
			}
			return nil // a failed write does not stop the others
		})
	}
	_ = g.Wait() // every function returns nil
	if failed > 0 {
		v.log.Warn("record a replica's kubelet probes in the ledger", "replica", rep.Replica, "failed", failed,
			"of", len(rep.Observations), "error", first)
	}
	return committed
}

// commit writes the observation to the ledger when its reachability differs
// from the ledger's record for that replica and node.
func (v *Sharing) commit(ctx context.Context, l cluster.Leadership, replica string, o detector.VantageObservation) (bool, error) {
	same := false
	v.node.Ledger().Read(func(s *ledger.State) {
		prev, ok := s.Observations(o.Cluster, o.Node, ProbeKubelet)[replica]
		same = ok && prev.OK == o.Reachable
	})
	if same {
		return false, nil
	}
	detail := o.Address
	if !o.Reachable {
		detail = o.Error
	}
	since := o.Since
	if since.IsZero() {
		since = o.At
	}
	_, err := v.node.Apply(ctx, &ledger.Observe{Meta: l.Meta(), Replica: replica, Cluster: o.Cluster, Node: o.Node,
		Probe: ProbeKubelet, OK: o.Reachable, Since: since.UTC(), Detail: truncate(detail, 200)})
	if err != nil {
		return false, fmt.Errorf("observe %s/%s from %s: %w", o.Cluster, o.Node, replica, err)
	}
	return true, nil
}
