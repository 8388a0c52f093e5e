// Package powerstore fences nodes at Dell PowerStore arrays: a fence
// removes the initiators of the node's host (or, in detach mode, detaches
// its volumes from the host), and the node's IPs from the host lists of
// its NFS exports, and gives them back on undo. NewPowerStore is its
// arrayclients.Constructor.
package powerstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/dell/gopowerstore"
	psapi "github.com/dell/gopowerstore/api"

	"github.com/fenced-project/fenced/arrayclients"
)

// powerStoreClients is how many gopowerstore clients an adapter keeps. Each
// is used by one goroutine at a time: the library writes its session token
// without a lock when it logs in again after a 403, so sharing one client
// between goroutines is a data race.
const powerStoreClients = 8

// powerStorePageSize is the page size for collection reads the adapter
// pages itself (the array's maximum is 2000).
const powerStorePageSize = 1000

// PowerStoreAdapter fences a node at a PowerStore array by removing its
// host's initiators (default) or by detaching every volume from its host
// and taking the host out of its host group ("detach" mode).
type PowerStoreAdapter struct {
	cfg     arrayclients.Config
	mode    string
	timeout time.Duration
	logger  *slog.Logger
	pool    chan gopowerstore.Client
	// hostLists shares listings of every host among concurrent calls.
	hostLists arrayclients.Listings[gopowerstore.Host]
}

var _ arrayclients.Adapter = (*PowerStoreAdapter)(nil)

// NewPowerStore builds a PowerStore adapter. gopowerstore logs in while a
// client is built (GET login_session, bounded by the request timeout, not
// by ctx: the library takes no context there), so this makes a few
// requests; a failed login is not an error here (Check and every call
// report it). Clients are built here, not on first use, because
// gopowerstore writes a package variable while building one, which would
// race with requests of clients already in use.
func NewPowerStore(ctx context.Context, cfg arrayclients.Config, logger *slog.Logger) (arrayclients.Adapter, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	mode := cfg.PowerStoreFenceMode
	if mode == "" {
		mode = arrayclients.PowerStoreModeInitiators
	}
	if mode != arrayclients.PowerStoreModeInitiators && mode != arrayclients.PowerStoreModeDetach {
		return nil, fmt.Errorf("powerstore array %s: powerStoreFenceMode %q: want %q or %q",
			cfg.Name, cfg.PowerStoreFenceMode, arrayclients.PowerStoreModeInitiators, arrayclients.PowerStoreModeDetach)
	}
	if cfg.Endpoint == "" || cfg.Username == "" || cfg.Password == "" {
		return nil, fmt.Errorf("powerstore array %s: endpoint, username and password are required", cfg.Name)
	}
	timeout := cfg.RequestTimeout
	if timeout <= 0 {
		timeout = arrayclients.DefaultRequestTimeout
	}
	apiURL := strings.TrimSuffix(cfg.Endpoint, "/")
	if !strings.HasSuffix(apiURL, "/api/rest") {
		apiURL += "/api/rest"
	}
	a := &PowerStoreAdapter{cfg: cfg, mode: mode, timeout: timeout,
		logger: logger,
		pool:   make(chan gopowerstore.Client, powerStoreClients)}
	for range powerStoreClients {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("powerstore array %s: build clients: %w", cfg.Name, err)
		}
		opts := gopowerstore.NewClientOptions().SetInsecure(cfg.Insecure).SetDefaultTimeout(timeout)
		if cfg.CAFile != "" {
			opts.SetCAFilePath(cfg.CAFile)
		}
		c, err := gopowerstore.NewClientWithArgs(apiURL, cfg.Username, cfg.Password, opts)
		if err != nil {
			return nil, fmt.Errorf("powerstore array %s: build client: %w", cfg.Name, err)
		}
		c.SetLogger(arrayclients.NewPowerStoreLogger(logger))
		a.pool <- c
	}
	return a, nil
}

// Name is the configured array name.
func (a *PowerStoreAdapter) Name() string { return a.cfg.Name }

// Family is PowerStore.
func (a *PowerStoreAdapter) Family() arrayclients.Family { return arrayclients.PowerStore }

// with runs f with a client of the pool, one request timeout at most per
// request f makes (f should pass the context it gets to each call).
func (a *PowerStoreAdapter) with(ctx context.Context, f func(c gopowerstore.Client) error) error {
	var c gopowerstore.Client
	select {
	case c = <-a.pool:
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for a client: %w", arrayclients.ErrUnreachable, ctx.Err())
	}
	defer func() { a.pool <- c }()
	return f(c)
}

// reqCtx bounds one request by the array's request timeout.
func (a *PowerStoreAdapter) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.timeout)
}

// psStatus returns the HTTP status of a gopowerstore API error, or 0.
func psStatus(err error) int {
	var v gopowerstore.APIError
	if errors.As(err, &v) && v.ErrorMsg != nil {
		return v.StatusCode
	}
	var p *gopowerstore.APIError
	if errors.As(err, &p) && p != nil && p.ErrorMsg != nil {
		return p.StatusCode
	}
	var m *psapi.ErrorMsg
	if errors.As(err, &m) && m != nil {
		return m.StatusCode
	}
	return 0
}

// psClassify marks errors that mean the array could not be reached or did
// not authenticate with ErrUnreachable.
func psClassify(err error) error {
	if err == nil {
		return nil
	}
	st := psStatus(err)
	var ne net.Error
	if st == 401 || st == 403 || st >= 500 || (st == 0 && (errors.As(err, &ne) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled))) {
		return fmt.Errorf("%w: %w", arrayclients.ErrUnreachable, err)
	}
	return err
}

// candidateHostNames are the exact host names csi-powerstore may have
// given the node: its CSI node ID and, as the CSI controller retries, the
// same name without the trailing -<ip>. An override replaces both.
func candidateHostNames(node arrayclients.Node) ([]string, error) {
	if o := strings.TrimSpace(node.Override); o != "" {
		if strings.ContainsAny(o, ",\t\n") {
			return nil, fmt.Errorf("override %q: want one PowerStore host name", node.Override)
		}
		return []string{o}, nil
	}
	id := node.CSINodeIDs[arrayclients.DriverPowerStore]
	if id == "" {
		return nil, nil
	}
	if strings.ContainsAny(id, " \t\n,") || len(id) > 128 {
		return nil, fmt.Errorf("CSI node ID %q of %s is not a PowerStore host name", id, arrayclients.DriverPowerStore)
	}
	names := []string{id}
	if i := strings.LastIndex(id, "-"); i > 0 && net.ParseIP(id[i+1:]) != nil {
		names = append(names, id[:i])
	}
	return names, nil
}

// Resolve finds the host whose name is exactly one of the node's candidate
// names; its Keys are the host's initiators and the node's IPv4 addresses
// (psNodeIPs, for NFS exports). Two matching hosts are ambiguous. A node
// with no host (csi-powerstore creates none for a node without block
// initiators) but with a csi-powerstore node ID and a known IPv4 address
// is an NFS client (PowerStoreKindNFSClient, the IPs in Keys), unless an
// override names a host; otherwise it is ErrNoIdentity.
func (a *PowerStoreAdapter) Resolve(ctx context.Context, node arrayclients.Node) (arrayclients.Identity, error) {
	fail := func(err error) (arrayclients.Identity, error) {
		return arrayclients.Identity{}, fmt.Errorf("powerstore array %s: resolve node %s: %w", a.cfg.Name, node.Name, err)
	}
	names, err := candidateHostNames(node)
	if err != nil {
		return fail(err)
	}
	ips := psNodeIPs(node)
	nfsClient := func() (arrayclients.Identity, error) {
		return arrayclients.Identity{Array: a.cfg.Name, Family: arrayclients.PowerStore, Node: node.Name, Kind: PowerStoreKindNFSClient,
			ObjectName: strings.Join(ips, ","), Keys: ips, ResolvedAt: time.Now().UTC()}, nil
	}
	if len(names) == 0 {
		return fail(fmt.Errorf("%w: no %s node ID and no override", arrayclients.ErrNoIdentity, arrayclients.DriverPowerStore))
	}
	var found []gopowerstore.Host
	err = a.with(ctx, func(c gopowerstore.Client) error {
		for _, name := range names {
			hosts, err := a.hostsByName(ctx, c, name)
			if err != nil {
				return err
			}
			found = append(found, hosts...)
		}
		return nil
	})
	if err != nil {
		return fail(psClassify(err))
	}
	switch len(found) {
	case 0:
		if len(ips) > 0 && strings.TrimSpace(node.Override) == "" {
			return nfsClient()
		}
		return fail(fmt.Errorf("%w: no host named %s", arrayclients.ErrNoIdentity, strings.Join(names, " or ")))
	case 1:
	default:
		var desc []string
		for _, h := range found {
			desc = append(desc, fmt.Sprintf("%s (id %s)", h.Name, h.ID))
		}
		return fail(fmt.Errorf("%w: hosts %s could each be this node; set an override", arrayclients.ErrAmbiguousIdentity, strings.Join(desc, ", ")))
	}
	h := found[0]
	keys := make([]string, 0, len(h.Initiators)+len(ips))
	for _, in := range h.Initiators {
		keys = append(keys, in.PortName)
	}
	keys = append(keys, ips...)
	sort.Strings(keys)
	return arrayclients.Identity{Array: a.cfg.Name, Family: arrayclients.PowerStore, Node: node.Name, ObjectID: h.ID,
		ObjectName: h.Name, Keys: keys, ResolvedAt: time.Now().UTC()}, nil
}

// hostsByName lists hosts named exactly name. The array filters with
// name=eq.<name>; the adapter checks equality again and never accepts a
// prefix or a case-folded match.
func (a *PowerStoreAdapter) hostsByName(ctx context.Context, c gopowerstore.Client, name string) ([]gopowerstore.Host, error) {
	qp := c.APIClient().QueryParamsWithFields(&gopowerstore.Host{})
	qp.RawArg("name", "eq."+name)
	qp.Limit(powerStorePageSize)
	var list []gopowerstore.Host
	rctx, cancel := a.reqCtx(ctx)
	defer cancel()
	_, err := c.APIClient().Query(rctx, gopowerstore.RequestConfig{Method: "GET", Endpoint: "host", QueryParams: qp}, &list)
	if err != nil {
		return nil, fmt.Errorf("find host %s: %w", name, gopowerstore.WrapErr(err))
	}
	var out []gopowerstore.Host
	for _, h := range list {
		if h.Name == name {
			if h.ID == "" {
				return nil, fmt.Errorf("find host %s: the array returned a host without an id", name)
			}
			out = append(out, h)
		}
	}
	return out, nil
}

// getHost reads one host; a 404 is reported as found=false.
func (a *PowerStoreAdapter) getHost(ctx context.Context, c gopowerstore.Client, id string) (gopowerstore.Host, bool, error) {
	rctx, cancel := a.reqCtx(ctx)
	defer cancel()
	h, err := c.GetHost(rctx, id)
	if err != nil {
		if psStatus(err) == 404 {
			return h, false, nil
		}
		return h, false, fmt.Errorf("read host %s: %w", id, err)
	}
	if h.ID != id {
		return h, false, fmt.Errorf("read host %s: the array answered with host %q", id, h.ID)
	}
	return h, true, nil
}

// mappings reads every host_volume_mapping with field=eq.value, paging
// itself: the client's GetHostVolumeMappingByHostID reads only the first
// page of a 206.
func (a *PowerStoreAdapter) mappings(ctx context.Context, c gopowerstore.Client, field, value string) ([]gopowerstore.HostVolumeMapping, error) {
	var all []gopowerstore.HostVolumeMapping
	offset := 0
	for page := 0; ; page++ {
		if page > 1000 {
			return nil, fmt.Errorf("read mappings %s=%s: more than 1000 pages", field, value)
		}
		qp := c.APIClient().QueryParamsWithFields(&gopowerstore.HostVolumeMapping{})
		qp.RawArg(field, "eq."+value)
		qp.Order("id")
		qp.Limit(powerStorePageSize)
		qp.Offset(offset)
		var list []gopowerstore.HostVolumeMapping
		rctx, cancel := a.reqCtx(ctx)
		meta, err := c.APIClient().Query(rctx, gopowerstore.RequestConfig{Method: "GET", Endpoint: "host_volume_mapping", QueryParams: qp}, &list)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("read mappings %s=%s: %w", field, value, gopowerstore.WrapErr(err))
		}
		for _, m := range list {
			got := m.HostID
			switch field {
			case "host_group_id":
				got = m.HostGroupID
			case "volume_id":
				got = m.VolumeID
			}
			if got != value || m.VolumeID == "" {
				return nil, fmt.Errorf("read mappings %s=%s: the array returned mapping %q of %q", field, value, m.ID, got)
			}
			all = append(all, m)
		}
		p := meta.Pagination
		if !p.IsPaginate || p.Last+1 >= p.Total || len(list) == 0 {
			return all, nil
		}
		offset = p.Last + 1
	}
}

// decodePowerStorePlan checks that a plan is this array's and decodes it.
func (a *PowerStoreAdapter) decodePlan(plan arrayclients.Plan) (psEntries, error) {
	var e psEntries
	if plan.Family != arrayclients.PowerStore || plan.Array != a.cfg.Name {
		return e, fmt.Errorf("%w: plan of %s array %s", arrayclients.ErrPlanMismatch, plan.Family, plan.Array)
	}
	if err := json.Unmarshal(plan.Entries, &e); err != nil {
		return e, fmt.Errorf("%w: %w", arrayclients.ErrPlanMismatch, err)
	}
	if (e.HostID == "" && plan.Identity.Kind != PowerStoreKindNFSClient) || (e.Mode != arrayclients.PowerStoreModeInitiators && e.Mode != arrayclients.PowerStoreModeDetach) {
		return e, fmt.Errorf("%w: entries lack a host id or a known mode", arrayclients.ErrPlanMismatch)
	}
	return e, e.checkNFSEntries()
}
