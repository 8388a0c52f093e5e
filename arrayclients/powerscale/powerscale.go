// Package powerscale fences nodes at Dell PowerScale (Isilon) clusters:
// a fence removes the node's client strings (its IPs and host names) from
// the NFS exports of the configured access zone, and gives them back on
// undo. NewPowerScale is its arrayclients.Constructor.
package powerscale

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dell/goisilon"
	isiapi "github.com/dell/goisilon/api"
	apiv4 "github.com/dell/goisilon/api/v4"

	"github.com/fenced-project/fenced/arrayclients"
)

// DefaultPowerScaleZone is the access zone used when Config.Zone is empty.
const DefaultPowerScaleZone = "System"

// powerScaleClients is how many goisilon clients an adapter keeps; each is
// used by one goroutine at a time (the library re-authenticates a session
// by writing its credentials without a lock).
const powerScaleClients = 8

// powerScaleMaxPages bounds an export listing (goisilon's own loop follows
// any non-null resume token forever).
const powerScaleMaxPages = 10000

// csiIsilonSep separates the parts of a csi-isilon node ID
// (name=#=#=fqdn=#=#=ip).
const csiIsilonSep = "=#=#="

// protectedExportClients are never an identity and never removed: the CSI
// driver keeps them so an export never ends up with empty client lists.
var protectedExportClients = map[string]bool{
	"localhost": true, "localhost.localdomain": true, "127.0.0.1": true, "::1": true, "0.0.0.0": true,
}

// PowerScaleAdapter fences a node at a PowerScale cluster by removing its
// IP, name and FQDN from the four client lists of every NFS export of the
// configured access zone.
type PowerScaleAdapter struct {
	cfg     arrayclients.Config
	zone    string
	timeout time.Duration
	logger  *slog.Logger
	// pool holds client slots; a nil slot builds its client on first use
	// (building one talks to the array).
	pool chan *goisilon.Client
	// exportLocks serialise the read-modify-write of one export (GET, then
	// PUT of whole lists): two fences racing on a shared export would
	// otherwise put back what the other removed.
	exportLocks [64]sync.Mutex
	// peerMu guards peerEntries: per export ID, the client entries this
	// adapter removed for fences not yet undone (lower-cased value → how
	// many fences removed it). A plan made while another node's fence has
	// an export's entries out counts them among the export's other
	// clients, so the later unfence does not take the peer's return for a
	// new client (a moved export). The record lives in this process only:
	// after a failover the check errs on the safe side (left as it is).
	peerMu      sync.Mutex
	peerEntries map[int]map[string]int
	// exportLists shares listings of the zone's exports among plans and
	// read-backs (listExportsSince).
	exportLists arrayclients.Listings[scExport]
}

// notePeerEntries records (add) or forgets (remove) entries removed from
// export id by a fence.
func (a *PowerScaleAdapter) notePeerEntries(id int, entries []scPlanEntry, add bool) {
	a.peerMu.Lock()
	defer a.peerMu.Unlock()
	if a.peerEntries == nil {
		a.peerEntries = map[int]map[string]int{}
	}
	m := a.peerEntries[id]
	if m == nil {
		m = map[string]int{}
		a.peerEntries[id] = m
	}
	for _, en := range entries {
		k := strings.ToLower(en.Value)
		if add {
			m[k]++
			continue
		}
		if m[k]--; m[k] <= 0 {
			delete(m, k)
		}
	}
	if len(m) == 0 {
		delete(a.peerEntries, id)
	}
}

// peerEntriesOf returns the entries other fences have out of export id
// that are not one of keys' strings.
func (a *PowerScaleAdapter) peerEntriesOf(id int, keys scKeys) []string {
	a.peerMu.Lock()
	defer a.peerMu.Unlock()
	var out []string
	for v := range a.peerEntries[id] {
		if !keys.matches(v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// lockExport locks the read-modify-write of export id.
func (a *PowerScaleAdapter) lockExport(id int) func() {
	m := &a.exportLocks[uint(id)%uint(len(a.exportLocks))]
	m.Lock()
	return m.Unlock
}

var _ arrayclients.Adapter = (*PowerScaleAdapter)(nil)

// NewPowerScale builds a PowerScale adapter. It makes no request (ctx is
// unused): clients are built, and log in, on first use.
func NewPowerScale(_ context.Context, cfg arrayclients.Config, logger *slog.Logger) (arrayclients.Adapter, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Endpoint == "" || cfg.Username == "" || cfg.Password == "" {
		return nil, fmt.Errorf("powerscale array %s: endpoint, username and password are required", cfg.Name)
	}
	if cfg.CAFile != "" && !cfg.Insecure {
		return nil, fmt.Errorf("powerscale array %s: caFile: goisilon cannot use a custom CA; put the CA in the system trust store or set insecure", cfg.Name)
	}
	timeout := cfg.RequestTimeout
	if timeout <= 0 {
		timeout = arrayclients.DefaultRequestTimeout
	}
	zone := cfg.Zone
	if zone == "" {
		zone = DefaultPowerScaleZone
	}
	a := &PowerScaleAdapter{cfg: cfg, zone: zone, timeout: timeout,
		logger: logger,
		pool:   make(chan *goisilon.Client, powerScaleClients)}
	for range powerScaleClients {
		a.pool <- nil
	}
	return a, nil
}

// Name is the configured array name.
func (a *PowerScaleAdapter) Name() string { return a.cfg.Name }

// Family is PowerScale.
func (a *PowerScaleAdapter) Family() arrayclients.Family { return arrayclients.PowerScale }

// with runs f with a client from the pool, building it if needed.
func (a *PowerScaleAdapter) with(ctx context.Context, f func(c *goisilon.Client) error) error {
	var c *goisilon.Client
	select {
	case c = <-a.pool:
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for a client: %w", arrayclients.ErrUnreachable, ctx.Err())
	}
	defer func() { a.pool <- c }()
	if c == nil {
		authType := uint8(0)
		if a.cfg.SessionAuth {
			authType = 1
		}
		// Verbose level 2 (low) logs only method and path, never bodies.
		api, err := isiapi.New(arrayclients.WithIsilonLogger(ctx, a.logger), a.cfg.Endpoint, a.cfg.Username, a.cfg.Password, "", 2, authType,
			&isiapi.ClientOptions{Insecure: a.cfg.Insecure, Timeout: a.timeout})
		if err != nil {
			return fmt.Errorf("connect: %w", scSafe(err))
		}
		c = &goisilon.Client{API: api}
	}
	return scSafe(f(c))
}

// scSafe replaces a goisilon JSONError with an empty error list (whose
// Error method indexes the list and panics) by a plain error.
func scSafe(err error) error {
	var je *isiapi.JSONError
	if errors.As(err, &je) && len(je.Err) == 0 {
		return fmt.Errorf("HTTP %d with an empty error list", je.StatusCode)
	}
	return err
}

// scStatus returns the HTTP status of a goisilon error, or 0.
func scStatus(err error) int {
	var je *isiapi.JSONError
	if errors.As(err, &je) {
		return je.StatusCode
	}
	var he *isiapi.HTMLError
	if errors.As(err, &he) {
		return he.StatusCode
	}
	return 0
}

// scClassify marks transport, timeout, authentication and server errors
// with ErrUnreachable.
func scClassify(err error) error {
	if err == nil {
		return nil
	}
	st := scStatus(err)
	var ne net.Error
	if st == 401 || st == 403 || st >= 500 || (st == 0 && (errors.As(err, &ne) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		strings.Contains(err.Error(), "authentication fail"))) {
		return fmt.Errorf("%w: %w", arrayclients.ErrUnreachable, err)
	}
	return err
}

// scKeys are a node's export-client strings and how entries match them:
// an IP by address, a name or FQDN case-insensitively. A node may have
// several IPs: csi-isilon publishes an AzNetwork volume to the IPs of the
// node's az labels, which need not be its CSINode IP (see LabelIPs).
type scKeys struct {
	ips   []net.IP
	names []string
	all   []string
}

func newSCKeys(strs []string) (scKeys, error) {
	var k scKeys
	seen := map[string]bool{}
	for _, s := range strs {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if strings.ContainsAny(s, " \t/*?@[") {
			return k, fmt.Errorf("%q is not an IP address or host name", s)
		}
		if protectedExportClients[strings.ToLower(s)] {
			return k, fmt.Errorf("%q is shared by every host and cannot identify a node", s)
		}
		key := strings.ToLower(s)
		if seen[key] {
			continue
		}
		seen[key] = true
		if ip := net.ParseIP(s); ip != nil {
			if k.hasIP(ip) {
				continue
			}
			k.ips = append(k.ips, ip)
		} else {
			k.names = append(k.names, s)
		}
		k.all = append(k.all, s)
	}
	if len(k.all) == 0 {
		return k, errors.New("no export client strings")
	}
	return k, nil
}

// hasIP reports whether ip is one of the node's IPs.
func (k scKeys) hasIP(ip net.IP) bool {
	return slices.ContainsFunc(k.ips, ip.Equal)
}

// matches reports whether an export client entry is exactly this node.
func (k scKeys) matches(entry string) bool {
	if ip := net.ParseIP(entry); ip != nil {
		return k.hasIP(ip)
	}
	for _, n := range k.names {
		if strings.EqualFold(entry, n) {
			return true
		}
	}
	return false
}

// hazard explains how an entry that is not one of the node's strings may
// still give the node access (a subnet holding its IP, a netgroup, a
// wildcard matching its names), or "".
func (k scKeys) hazard(entry string) string {
	if _, n, err := net.ParseCIDR(entry); err == nil {
		for _, ip := range k.ips {
			if n.Contains(ip) {
				return "subnet " + entry + " contains the node's IP " + ip.String()
			}
		}
		return ""
	}
	if strings.HasPrefix(entry, "@") {
		return "netgroup " + entry + " may contain the node"
	}
	if strings.ContainsAny(entry, "*?[") {
		for _, n := range k.names {
			if ok, _ := matchHostPattern(entry, n); ok {
				return "wildcard " + entry + " matches " + n
			}
		}
	}
	return ""
}

// matchHostPattern matches a shell-style host pattern case-insensitively.
func matchHostPattern(pattern, name string) (bool, error) {
	return path.Match(strings.ToLower(pattern), strings.ToLower(name))
}

// identityStrings returns the node's export-client strings: the override
// (comma-separated), or the parts of its csi-isilon node ID and the IPs of
// its AzNetwork labels.
func identityStrings(node arrayclients.Node) ([]string, error) {
	if o := strings.TrimSpace(node.Override); o != "" {
		return strings.Split(o, ","), nil
	}
	id := node.CSINodeIDs[arrayclients.DriverPowerScale]
	if id == "" {
		return nil, nil
	}
	parts := strings.Split(id, csiIsilonSep)
	if len(parts) != 3 || parts[0] == "" || net.ParseIP(parts[2]) == nil {
		return nil, fmt.Errorf("%s node ID %q: want name%sfqdn%sip", arrayclients.DriverPowerScale, id, csiIsilonSep, csiIsilonSep)
	}
	out := []string{parts[2], parts[0], parts[1]}
	for _, ip := range node.LabelIPs {
		if net.ParseIP(ip) == nil {
			return nil, fmt.Errorf("label IP %q is not an IP address", ip)
		}
		out = append(out, ip)
	}
	return out, nil
}

// powerScaleAZLabel is the node label csi-isilon's node plugin sets for
// each IPv4 address of the node, "csi-isilon.dellemc.com/az-<network>-
// <prefix length>-<IP>" (dell/csi-powerscale service/node.go
// ReconcileNodeAzLabels), matched by the same expression the controller
// uses to find the IPs it publishes an AzNetwork volume to (service/
// controller.go getIpsFromAZNetworkLabel). The plugin name in it is a
// constant, whatever X_CSI_DRIVER_NAME says.
var powerScaleAZLabel = regexp.MustCompile(`^csi-isilon\.dellemc\.com/az-([0-9.]+)-([0-9]+)-([0-9.]+)$`)

// PowerScaleLabelIPs returns the IPs of a Kubernetes node's csi-isilon
// AzNetwork labels, sorted and without duplicates. With a StorageClass
// AzNetwork, csi-isilon publishes a volume to those of them inside that
// network instead of the CSINode IP; fenced takes all of them, each being
// one of the node's own addresses. Labels whose IP does not parse are
// left out, as the driver never publishes to them.
func PowerScaleLabelIPs(labels map[string]string) []string {
	var out []string
	for k := range labels {
		m := powerScaleAZLabel.FindStringSubmatch(k)
		if m == nil {
			continue
		}
		if ip := net.ParseIP(m[3]); ip != nil && ip.To4() != nil {
			out = append(out, ip.String())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Resolve derives the node's export-client strings. It reads nothing: a
// node has the same strings on every PowerScale cluster, and exports that
// list it come and go with its volumes.
func (a *PowerScaleAdapter) Resolve(_ context.Context, node arrayclients.Node) (arrayclients.Identity, error) {
	fail := func(err error) (arrayclients.Identity, error) {
		return arrayclients.Identity{}, fmt.Errorf("powerscale array %s: resolve node %s: %w", a.cfg.Name, node.Name, err)
	}
	strs, err := identityStrings(node)
	if err != nil {
		return fail(err)
	}
	if len(strs) == 0 {
		return fail(fmt.Errorf("%w: no %s node ID and no override", arrayclients.ErrNoIdentity, arrayclients.DriverPowerScale))
	}
	keys, err := newSCKeys(strs)
	if err != nil {
		return fail(fmt.Errorf("%w: %w", arrayclients.ErrAmbiguousIdentity, err))
	}
	name := node.Name
	if len(keys.names) > 0 {
		name = keys.names[0]
	}
	return arrayclients.Identity{Array: a.cfg.Name, Family: arrayclients.PowerScale, Node: node.Name, ObjectName: name,
		Keys: keys.all, ResolvedAt: time.Now().UTC()}, nil
}

// scExport is one export as the adapter reads it: the four lists, never nil.
type scExport struct {
	ID    int
	Paths []string
	Lists map[string][]string
}

// scListNames are the four client lists in the API's field names.
var scListNames = []string{"clients", "root_clients", "read_write_clients", "read_only_clients"}

// listExportsSince returns every export of the zone from a listing begun
// at since or later, sharing it with the other plans and read-backs that
// need one then (arrayclients.Listings): in a storm a hundred fences each
// read the zone's exports back, and each listing carries every export of
// the zone. A plan or read-back passes its own start, so what it reads is
// as fresh as a listing of its own (a read-back starts after the write it
// reads back). The exports returned are shared: read only.
func (a *PowerScaleAdapter) listExportsSince(ctx context.Context, c *goisilon.Client, since time.Time) ([]scExport, error) {
	return a.exportLists.List(ctx, since, func(ctx context.Context) ([]scExport, error) {
		return a.listExports(ctx, c)
	})
}

// listExports reads every export of the zone through the v4 API, paging
// with resume tokens itself (bounded, and stopping on an empty token).
func (a *PowerScaleAdapter) listExports(ctx context.Context, c *goisilon.Client) ([]scExport, error) {
	var out []scExport
	zone := a.zone
	params := apiv4.ListV4NfsExportsParams{Zone: &zone}
	seen := map[string]bool{}
	for page := 0; page < powerScaleMaxPages; page++ {
		resp, err := apiv4.ListNfsExports(ctx, params, c.API)
		if err != nil {
			return nil, fmt.Errorf("list exports of zone %s: %w", a.zone, err)
		}
		// A real listing always carries "total"; without it the body was
		// empty or cut short, and an empty listing must never read as
		// "no export lists the node".
		if resp == nil || resp.Total == nil {
			return nil, fmt.Errorf("list exports of zone %s: response without a total (empty or truncated body)", a.zone)
		}
		for _, x := range resp.Exports {
			if x.ID == nil {
				return nil, fmt.Errorf("list exports of zone %s: an export without an id", a.zone)
			}
			out = append(out, scExport{ID: int(*x.ID), Paths: x.Paths, Lists: map[string][]string{
				"clients": x.Clients, "root_clients": x.RootClients,
				"read_write_clients": x.ReadWriteClients, "read_only_clients": x.ReadOnlyClients,
			}})
		}
		if resp.Resume == nil || *resp.Resume == "" {
			sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
			return out, nil
		}
		if seen[*resp.Resume] {
			return nil, fmt.Errorf("list exports of zone %s: the array repeated a resume token", a.zone)
		}
		seen[*resp.Resume] = true
		params = apiv4.ListV4NfsExportsParams{Resume: resp.Resume}
	}
	return nil, fmt.Errorf("list exports of zone %s: more than %d pages", a.zone, powerScaleMaxPages)
}

// getExport reads one export through the v2 API; found is false when it
// no longer exists.
func (a *PowerScaleAdapter) getExport(ctx context.Context, c *goisilon.Client, id int) (scExport, bool, error) {
	x, err := c.GetExportByIDWithZone(ctx, id, a.zone)
	if err != nil {
		if scStatus(err) == 404 {
			return scExport{}, false, nil
		}
		return scExport{}, false, fmt.Errorf("read export %d: %w", id, scSafe(err))
	}
	if x == nil {
		// Not found is a 404; a 2xx without an export is a bad answer.
		return scExport{}, false, fmt.Errorf("read export %d: the array answered without an export", id)
	}
	if x.ID != id {
		return scExport{}, false, fmt.Errorf("read export %d: the array answered with export %d", id, x.ID)
	}
	deref := func(p *[]string) []string {
		if p == nil {
			return nil
		}
		return *p
	}
	e := scExport{ID: id, Paths: deref(x.Paths), Lists: map[string][]string{
		"clients": deref(x.Clients), "root_clients": deref(x.RootClients),
		"read_write_clients": deref(x.ReadWriteClients), "read_only_clients": deref(x.ReadOnlyClients),
	}}
	return e, true, nil
}

// open reports whether an export has no client restriction at all: OneFS
// then lets every host mount it.
func (e scExport) open() bool {
	for _, name := range scListNames {
		if len(e.Lists[name]) > 0 {
			return false
		}
	}
	return true
}

func (e scExport) label() string {
	return fmt.Sprintf("export %d (%s)", e.ID, strings.Join(e.Paths, ","))
}

// decodePlan checks that a plan is this array's and decodes it.
func (a *PowerScaleAdapter) decodePlan(plan arrayclients.Plan) (scEntries, scKeys, error) {
	var e scEntries
	if plan.Family != arrayclients.PowerScale || plan.Array != a.cfg.Name {
		return e, scKeys{}, fmt.Errorf("%w: plan of %s array %s", arrayclients.ErrPlanMismatch, plan.Family, plan.Array)
	}
	if err := json.Unmarshal(plan.Entries, &e); err != nil {
		return e, scKeys{}, fmt.Errorf("%w: %w", arrayclients.ErrPlanMismatch, err)
	}
	if e.Zone != a.zone {
		return e, scKeys{}, fmt.Errorf("%w: plan is for zone %q, adapter serves zone %q", arrayclients.ErrPlanMismatch, e.Zone, a.zone)
	}
	keys, err := newSCKeys(e.Keys)
	if err != nil {
		return e, scKeys{}, fmt.Errorf("%w: keys: %w", arrayclients.ErrPlanMismatch, err)
	}
	for _, x := range e.Exports {
		for _, en := range x.Entries {
			if !isListName(en.List) || !keys.matches(en.Value) || protectedExportClients[strings.ToLower(en.Value)] {
				return e, scKeys{}, fmt.Errorf("%w: entry %q in %s of export %d is not the node's", arrayclients.ErrPlanMismatch, en.Value, en.List, x.ID)
			}
		}
	}
	return e, keys, nil
}

func isListName(n string) bool {
	for _, l := range scListNames {
		if l == n {
			return true
		}
	}
	return false
}
