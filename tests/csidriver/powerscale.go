package csidriver

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/dell/goisilon"
	isiapi "github.com/dell/goisilon/api"

	"github.com/fenced-project/fenced/arrayclients"
)

// PowerScaleDriver is csi-isilon's driver name.
const PowerScaleDriver = "csi-isilon.dellemc.com"

// powerScaleLocalhost is the client csi-isilon puts into every export it
// creates and publishes single-node, so that an export never has an empty
// client list (common/utils/identifiers/node.go DummyHostNodeID).
const powerScaleLocalhost = "localhost"

// PowerScaleConfig is what the emulated csi-isilon controller knows of one
// cluster (an entry of the driver's secret and the StorageClass).
type PowerScaleConfig struct {
	// Driver is the CSI driver name. Default PowerScaleDriver.
	Driver string
	// Endpoint is the cluster's platform API URL.
	Endpoint, Username, Password string
	// ClusterName is the cluster's name in the secret (clusterName), which
	// the driver writes into every handle.
	ClusterName string
	// IsiPath is the directory volumes are created in. Default
	// /ifs/data/csi, the driver's.
	IsiPath string
	// AccessZone is the StorageClass' AccessZone. Default System.
	AccessZone string
	// Insecure skips verifying the cluster's certificate.
	Insecure bool
}

// PowerScale emulates the csi-isilon controller for one cluster. Node IDs
// are "<name>=#=#=<FQDN>=#=#=<IP>".
type PowerScale struct {
	cfg PowerScaleConfig
	// mu serialises the calls: goisilon reads an export and writes its
	// lists back whole.
	mu sync.Mutex
	c  *goisilon.Client
	// clientOf remembers which form of a node (FQDN or IP) an add
	// succeeded with, as the driver's clusterToNodeIDMap does.
	clientOf map[string]string
}

// NewPowerScale builds the controller and logs in (session
// authentication, the driver's default).
func NewPowerScale(ctx context.Context, cfg PowerScaleConfig) (*PowerScale, error) {
	if cfg.Driver == "" {
		cfg.Driver = PowerScaleDriver
	}
	if cfg.IsiPath == "" {
		cfg.IsiPath = "/ifs/data/csi"
	}
	if cfg.AccessZone == "" {
		cfg.AccessZone = "System"
	}
	if cfg.Endpoint == "" || cfg.ClusterName == "" || strings.Contains(cfg.ClusterName, "=_=_=") {
		return nil, fmt.Errorf("emulated %s: endpoint and clusterName are required: %w", cfg.Driver, ErrInvalid)
	}
	c, err := goisilon.NewClientWithArgs(ctx, cfg.Endpoint, cfg.Insecure, 2, cfg.Username, "", cfg.Password,
		cfg.IsiPath, "0777", false, 1)
	if err != nil {
		return nil, fmt.Errorf("emulated %s: connect to %s: %w", cfg.Driver, cfg.Endpoint, err)
	}
	return &PowerScale{cfg: cfg, c: c, clientOf: map[string]string{}}, nil
}

// Driver is the CSI driver name.
func (p *PowerScale) Driver() string { return p.cfg.Driver }

// ClusterName is the cluster name the handles carry.
func (p *PowerScale) ClusterName() string { return p.cfg.ClusterName }

// CreateVolume creates the volume's directory under IsiPath and an export
// of it in the access zone, puts localhost into the export's clients, and
// returns "<name>=_=_=<export ID>=_=_=<zone>=_=_=<cluster>" (dell/csi-powerscale
// service/controller.go CreateVolume, common/utils/identifiers/volume.go).
// An export of the path whose directory exists is returned as it is, as
// the driver's idempotency check does. Quotas are not emulated (the
// driver's quota-disabled setting); block volumes do not exist.
func (p *PowerScale) CreateVolume(ctx context.Context, name string, size int64, protocol arrayclients.Protocol) (string, error) {
	if protocol != arrayclients.ProtocolNFS {
		return "", fmt.Errorf("emulated %s: create %s volume %s: %w", p.cfg.Driver, protocol, name, ErrUnsupported)
	}
	if name == "" || strings.ContainsAny(name, "/=") || size <= 0 {
		return "", fmt.Errorf("emulated %s: create volume %q of %d bytes: %w", p.cfg.Driver, name, size, ErrInvalid)
	}
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("emulated %s: create volume %s: %w", p.cfg.Driver, name, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	dir := path.Join(p.cfg.IsiPath, name)
	_, err := p.c.GetVolumeWithIsiPath(ctx, p.cfg.IsiPath, "", name)
	found := err == nil
	if err != nil && !isNotFound(err) {
		return fail(fmt.Errorf("look up directory %s: %w", dir, err))
	}
	export, err := p.c.GetExportWithPathAndZone(ctx, dir, p.cfg.AccessZone)
	if err != nil {
		return fail(fmt.Errorf("look up the export of %s: %w", dir, err))
	}
	if export != nil && found {
		return p.handle(name, export.ID), nil
	}
	if export != nil {
		// An export without its directory is removed and made again.
		if err := p.c.UnexportByIDWithZone(ctx, export.ID, p.cfg.AccessZone); err != nil {
			return fail(fmt.Errorf("remove export %d without a directory: %w", export.ID, err))
		}
	}
	if !found {
		if _, err := p.c.CreateVolumeWithIsipath(ctx, p.cfg.IsiPath, name, "0777"); err != nil {
			return fail(fmt.Errorf("create directory %s: %w", dir, err))
		}
	}
	id, err := p.c.ExportVolumeWithZoneAndPath(ctx, dir, p.cfg.AccessZone, "")
	if err != nil {
		return fail(fmt.Errorf("export %s in zone %s: %w", dir, p.cfg.AccessZone, err))
	}
	if err := p.c.AddExportClientsByIDWithZone(ctx, id, p.cfg.AccessZone, []string{powerScaleLocalhost}, false); err != nil {
		return fail(fmt.Errorf("add %s to export %d: %w", powerScaleLocalhost, id, err))
	}
	return p.handle(name, id), nil
}

func (p *PowerScale) handle(name string, exportID int) string {
	return strings.Join([]string{name, strconv.Itoa(exportID), p.cfg.AccessZone, p.cfg.ClusterName}, "=_=_=")
}

// exportOf parses a handle as csi-isilon does (ParseNormalizedVolumeID):
// export ID and zone; a handle of another cluster is refused.
func (p *PowerScale) exportOf(handle string) (id int, zone string, err error) {
	tokens := strings.Split(handle, "=_=_=")
	if len(tokens) < 3 {
		return 0, "", fmt.Errorf("volume handle %q: %w", handle, ErrInvalid)
	}
	id, err = strconv.Atoi(tokens[1])
	if err != nil || id <= 0 || tokens[2] == "" {
		return 0, "", fmt.Errorf("volume handle %q: export ID or zone: %w", handle, ErrInvalid)
	}
	if len(tokens) > 3 && tokens[3] != p.cfg.ClusterName {
		return 0, "", fmt.Errorf("volume handle %q names cluster %s, not %s: %w", handle, tokens[3], p.cfg.ClusterName, ErrInvalid)
	}
	return id, tokens[2], nil
}

// nodeOf splits a node ID "<name>=#=#=<FQDN>=#=#=<IP>" (ParseNodeID).
func nodeOf(nodeID string) (name, fqdn, ip string, err error) {
	tokens := strings.Split(nodeID, "=#=#=")
	if len(tokens) != 3 || tokens[0] == "" || tokens[1] == "" || tokens[2] == "" {
		return "", "", "", fmt.Errorf("node ID %q is not <name>=#=#=<FQDN>=#=#=<IP>: %w", nodeID, ErrInvalid)
	}
	return tokens[0], tokens[1], tokens[2], nil
}

// ControllerPublish adds the node to the export's clients
// (service/controller.go ControllerPublishVolume, service/isiService.go
// OtherClientsAlreadyAdded and AddExportClientNetworkIdentifierByIDWithZone):
// a single-node volume whose export lists another client (localhost alone
// does not count) is refused; localhost is added when missing; then the
// node's FQDN (or the form that worked before), falling back to its IP.
// Listed already, the node is not added twice.
func (p *PowerScale) ControllerPublish(ctx context.Context, handle, nodeID string, multiNode bool) error {
	id, zone, err := p.exportOf(handle)
	if err != nil {
		return fmt.Errorf("emulated %s: publish: %w", p.cfg.Driver, err)
	}
	fail := func(err error) error {
		return fmt.Errorf("emulated %s: publish %s to %s: %w", p.cfg.Driver, handle, nodeID, err)
	}
	name, fqdn, ip, err := nodeOf(nodeID)
	if err != nil {
		return fail(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	export, err := p.c.GetExportByIDWithZone(ctx, id, zone)
	if isNotFound(err) {
		return fail(fmt.Errorf("export %d in zone %s: %w", id, zone, ErrNotFound))
	}
	if err != nil {
		return fail(fmt.Errorf("read export %d: %w", id, err))
	}
	all := exportClients(export)
	if !multiNode && otherClients(export, name, fqdn, ip) {
		return fail(fmt.Errorf("export %d in access zone %s already has other clients added to it: %w", id, zone, ErrAlreadyPublished))
	}
	if !slices.Contains(all, powerScaleLocalhost) && !slices.Contains(all, "127.0.0.1") {
		if err := p.c.AddExportClientsByIDWithZone(ctx, id, zone, []string{powerScaleLocalhost}, false); err != nil {
			return fail(fmt.Errorf("add %s to export %d: %w", powerScaleLocalhost, id, err))
		}
	}
	first := fqdn
	if c, ok := p.clientOf[nodeID]; ok {
		first = c
	}
	second := fqdn
	if first == fqdn {
		second = ip
	}
	for _, c := range []string{first, second} {
		if err = p.c.AddExportClientsByIDWithZone(ctx, id, zone, []string{c}, false); err == nil {
			p.clientOf[nodeID] = c
			return nil
		}
	}
	return fail(fmt.Errorf("add clients %s or %s to export %d: %w", first, second, id, err))
}

// ControllerUnpublish removes the node's IP, name and FQDN from every
// client list of the export (service/isiService.go
// RemoveExportClientByIDWithZone); a deleted export succeeds.
func (p *PowerScale) ControllerUnpublish(ctx context.Context, handle, nodeID string) error {
	id, zone, err := p.exportOf(handle)
	if err != nil {
		return fmt.Errorf("emulated %s: unpublish: %w", p.cfg.Driver, err)
	}
	name, fqdn, ip, err := nodeOf(nodeID)
	if err != nil {
		return fmt.Errorf("emulated %s: unpublish %s from %s: %w", p.cfg.Driver, handle, nodeID, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	err = p.c.RemoveExportClientsByIDWithZone(ctx, id, zone, []string{ip, name, fqdn}, false)
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("emulated %s: unpublish %s from %s: remove clients from export %d: %w", p.cfg.Driver, handle, nodeID, id, err)
	}
	return nil
}

// exportClients is every entry of the export's four client lists.
func exportClients(e goisilon.Export) []string {
	var out []string
	for _, l := range []*[]string{e.Clients, e.RootClients, e.ReadWriteClients, e.ReadOnlyClients} {
		if l != nil {
			out = append(out, *l...)
		}
	}
	return out
}

// otherClients reports, as OtherClientsAlreadyAdded does, whether the
// export lists clients while the node (name, FQDN or IP) is not among
// them; an export whose clients list is localhost alone counts as empty
// (the driver checks the length of clients only).
func otherClients(e goisilon.Export, name, fqdn, ip string) bool {
	all := exportClients(e)
	if len(all) == 0 || slices.Contains(all, name) || slices.Contains(all, fqdn) || slices.Contains(all, ip) {
		return false
	}
	local := slices.Contains(all, powerScaleLocalhost) || slices.Contains(all, "127.0.0.1")
	if e.Clients != nil && len(*e.Clients) == 1 && local {
		return false
	}
	return true
}

// isNotFound reports a 404 from the cluster.
func isNotFound(err error) bool {
	var je *isiapi.JSONError
	return errors.As(err, &je) && je.StatusCode == 404
}
