package csidriver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dell/gopowerstore"

	"github.com/fenced-project/fenced/arrayclients"
)

// PowerStoreDriver is csi-powerstore's default driver name.
const PowerStoreDriver = "csi-powerstore.dellemc.com"

// PowerStoreConfig is what the emulated csi-powerstore controller knows of
// one array (an entry of the driver's secret).
type PowerStoreConfig struct {
	// Driver is the CSI driver name (X_CSI_DRIVER_NAME). Default
	// PowerStoreDriver.
	Driver string
	// Endpoint is the array's URL, with or without "/api/rest".
	Endpoint, Username, Password string
	// GlobalID is the array's global ID as the secret names it: handles
	// are "<volume UUID>/<GlobalID>/<scsi|nfs>".
	GlobalID string
	// NASName is the secret's nasName: the NAS server NFS volumes' file
	// systems are created on. Without it NFS volumes cannot be created.
	NASName string
	// Default marks the secret's default array: a legacy handle that is a
	// bare UUID is on it.
	Default bool
	// CAFile verifies the array's certificate; Insecure skips that.
	CAFile   string
	Insecure bool
	// ExternalAccess is X_CSI_POWERSTORE_EXTERNAL_ACCESS: an IP or CIDR
	// every NFS publish adds to the export's RWRootHosts beside the
	// node's IP, as "<first address>/<dotted mask>", when no list holds it
	// yet (pkg/controller/publisher.go NfsPublisher.Publish,
	// pkg/identifiers ParseCIDR); no unpublish removes it, only
	// DeleteVolume. Empty: none.
	ExternalAccess string
	// HealthMonitor is X_CSI_HEALTH_MONITOR_ENABLED: the controller then
	// advertises LIST_VOLUMES and LIST_VOLUMES_PUBLISHED_NODES
	// (pkg/controller/controller.go ControllerGetCapabilities), so the
	// external-attacher's reconciler runs against its ListVolumes.
	HealthMonitor bool
}

// PowerStore emulates the csi-powerstore controller for one array: block
// (SCSI) volumes and NFS volumes (file systems with an NFS export).
type PowerStore struct {
	cfg PowerStoreConfig
	c   gopowerstore.Client
	// healthMonitor is cfg.HealthMonitor, changeable while attachers
	// read it (SetHealthMonitor).
	healthMonitor atomic.Bool
}

// NewPowerStore builds the controller (gopowerstore logs in on the first
// request).
func NewPowerStore(cfg PowerStoreConfig) (*PowerStore, error) {
	if cfg.Driver == "" {
		cfg.Driver = PowerStoreDriver
	}
	if cfg.Endpoint == "" || cfg.GlobalID == "" {
		return nil, fmt.Errorf("emulated %s: endpoint and globalID are required: %w", cfg.Driver, ErrInvalid)
	}
	if cfg.ExternalAccess != "" {
		// The driver refuses each publish with a bad value; a test that
		// set one means it, so it is refused here at once.
		entry, err := externalAccessEntry(cfg.ExternalAccess)
		if err != nil {
			return nil, fmt.Errorf("emulated %s: externalAccess: %w", cfg.Driver, err)
		}
		cfg.ExternalAccess = entry
	}
	apiURL := strings.TrimSuffix(cfg.Endpoint, "/")
	if !strings.HasSuffix(apiURL, "/api/rest") {
		apiURL += "/api/rest"
	}
	opts := gopowerstore.NewClientOptions().SetInsecure(cfg.Insecure).SetDefaultTimeout(10 * time.Second)
	if cfg.CAFile != "" {
		opts.SetCAFilePath(cfg.CAFile)
	}
	c, err := gopowerstore.NewClientWithArgs(apiURL, cfg.Username, cfg.Password, opts)
	if err != nil {
		return nil, fmt.Errorf("emulated %s: build client for %s: %w", cfg.Driver, apiURL, err)
	}
	p := &PowerStore{cfg: cfg, c: c}
	p.healthMonitor.Store(cfg.HealthMonitor)
	return p, nil
}

// SetHealthMonitor turns X_CSI_HEALTH_MONITOR_ENABLED on or off, as a
// restart of the controller with that setting would.
func (p *PowerStore) SetHealthMonitor(on bool) { p.healthMonitor.Store(on) }

// Driver is the CSI driver name.
func (p *PowerStore) Driver() string { return p.cfg.Driver }

// GlobalID is the array's global ID the handles carry.
func (p *PowerStore) GlobalID() string { return p.cfg.GlobalID }

// CreateVolume creates a block volume and returns
// "<UUID>/<globalID>/scsi", or a file system and returns
// "<UUID>/<globalID>/nfs" (dell/csi-powerstore pkg/controller/creator.go
// SCSICreator and NfsCreator, controller.go CreateVolume). A name in use
// returns the existing volume, as the driver does.
func (p *PowerStore) CreateVolume(ctx context.Context, name string, size int64, protocol arrayclients.Protocol) (string, error) {
	switch protocol {
	case arrayclients.ProtocolBlock:
	case arrayclients.ProtocolNFS:
		return p.createFS(ctx, name, size)
	default:
		return "", fmt.Errorf("emulated %s: create %s volume %s: %w", p.cfg.Driver, protocol, name, ErrUnsupported)
	}
	if name == "" {
		return "", fmt.Errorf("emulated %s: create volume: name is empty: %w", p.cfg.Driver, ErrInvalid)
	}
	const minSize, block = 1 << 20, 8192
	if size < minSize {
		size = minSize
	}
	size = (size + block - 1) / block * block
	resp, err := p.c.CreateVolume(ctx, &gopowerstore.VolumeCreate{Name: &name, Size: &size})
	id := resp.ID
	if err != nil {
		var apiErr gopowerstore.APIError
		if !errors.As(err, &apiErr) || !apiErr.VolumeNameIsAlreadyUse() {
			return "", fmt.Errorf("emulated %s: create volume %s: %w", p.cfg.Driver, name, err)
		}
		v, err := p.c.GetVolumeByName(ctx, name)
		if err != nil {
			return "", fmt.Errorf("emulated %s: find existing volume %s: %w", p.cfg.Driver, name, err)
		}
		id = v.ID
	}
	return id + "/" + p.cfg.GlobalID + "/scsi", nil
}

// volumeOf parses a handle as csi-powerstore does (pkg/array/array.go
// ParseVolumeID): "<UUID>/<global ID>/<protocol>", a bare UUID on the
// default array (a block volume: the emulation has no PV to read an nfs
// fsType from). It returns the UUID and whether the volume is NFS. A
// handle of another array, another protocol or a metro volume is refused.
func (p *PowerStore) volumeOf(handle string) (string, bool, error) {
	if strings.Contains(handle, ":") {
		return "", false, fmt.Errorf("metro volume %s: %w", handle, ErrUnsupported)
	}
	parts := strings.Split(handle, "/")
	switch {
	case len(parts) == 1 && p.cfg.Default && parts[0] != "":
		return parts[0], false, nil
	case len(parts) != 3 || parts[0] == "":
		return "", false, fmt.Errorf("volume handle %q: %w", handle, ErrInvalid)
	case parts[1] != p.cfg.GlobalID:
		return "", false, fmt.Errorf("volume handle %q: cannot find array %s: %w", handle, parts[1], ErrInvalid)
	case strings.EqualFold(parts[2], "nfs"):
		return parts[0], true, nil
	case !strings.EqualFold(parts[2], "scsi"):
		return "", false, fmt.Errorf("%s volume %s: %w", parts[2], handle, ErrUnsupported)
	}
	return parts[0], false, nil
}

// host finds the node's host by its node ID, then by the node ID without
// the trailing "-<IP>" (pkg/controller/publisher.go SCSIPublisher.Publish).
func (p *PowerStore) host(ctx context.Context, nodeID string) (gopowerstore.Host, error) {
	h, err := p.c.GetHostByName(ctx, nodeID)
	if err == nil {
		return h, nil
	}
	var apiErr gopowerstore.APIError
	if !errors.As(err, &apiErr) || !apiErr.HostIsNotExist() {
		return h, fmt.Errorf("failure checking host '%s': %w", nodeID, err)
	}
	i := strings.LastIndex(nodeID, "-")
	if i < 0 || net.ParseIP(nodeID[i+1:]) == nil {
		return h, fmt.Errorf("can't find IP in node ID %s: %w", nodeID, ErrNotFound)
	}
	h, err = p.c.GetHostByName(ctx, nodeID[:i])
	if err != nil {
		return h, fmt.Errorf("host with k8s node ID '%s': %w: %w", nodeID, ErrNotFound, err)
	}
	return h, nil
}

// ControllerPublish attaches the volume to the node's host
// (pkg/controller/publisher.go SCSIPublisher.Publish): attached to it
// already succeeds; attached to another host is refused for a single-node
// volume ("volume already present in a different lun mapping"). An NFS
// volume is published as NfsPublisher.Publish does it (publishFS).
func (p *PowerStore) ControllerPublish(ctx context.Context, handle, nodeID string, multiNode bool) error {
	id, nfs, err := p.volumeOf(handle)
	if err != nil {
		return fmt.Errorf("emulated %s: publish: %w", p.cfg.Driver, err)
	}
	fail := func(err error) error {
		return fmt.Errorf("emulated %s: publish %s to %s: %w", p.cfg.Driver, handle, nodeID, err)
	}
	if nfs {
		return p.publishFS(ctx, id, nodeID, fail)
	}
	vol, err := p.c.GetVolume(ctx, id)
	if err != nil {
		var apiErr gopowerstore.APIError
		if errors.As(err, &apiErr) && apiErr.NotFound() {
			return fail(fmt.Errorf("volume with ID '%s': %w", id, ErrNotFound))
		}
		return fail(err)
	}
	h, err := p.host(ctx, nodeID)
	if err != nil {
		return fail(err)
	}
	mappings, err := p.c.GetHostVolumeMappingByVolumeID(ctx, vol.ID)
	if err != nil {
		return fail(fmt.Errorf("get mappings of volume %s: %w", vol.ID, err))
	}
	for _, m := range mappings {
		if m.HostID == h.ID {
			return nil
		}
	}
	if len(mappings) > 0 && !multiNode {
		return fail(fmt.Errorf("volume already present in a different lun mapping on node '%s': %w",
			mappings[0].HostID, ErrAlreadyPublished))
	}
	if _, err := p.c.AttachVolumeToHost(ctx, h.ID, &gopowerstore.HostVolumeAttach{VolumeID: &vol.ID}); err != nil {
		return fail(fmt.Errorf("attach volume %s to host %s: %w", vol.ID, h.ID, err))
	}
	return nil
}

// ControllerUnpublish detaches the volume from the node's host as
// pkg/controller/controller.go unpublishVolume does: a deleted volume
// (GetVolume 404) succeeds without a detach; the host is looked up by
// node ID, then without the trailing "-<IP>" (neither: NotFound). The
// detach's answer is read as detachVolumeFromHost (pkg/controller/base.go)
// reads it, with the pinned gopowerstore's status-only predicates:
//   - a message containing "Host is not attached to volume": success;
//   - HostIsNotExist (any 404 or other 400): NotFound, so a repeated
//     detach whose 400 says anything else never finishes;
//   - 422 (VolumeDetachedFromHost, csi-powerstore PR #147): success;
//   - anything else: Unknown.
//
// An NFS volume is unpublished as ControllerUnpublishVolume does it
// (unpublishFS).
func (p *PowerStore) ControllerUnpublish(ctx context.Context, handle, nodeID string) error {
	id, nfs, err := p.volumeOf(handle)
	if err != nil {
		return fmt.Errorf("emulated %s: unpublish: %w", p.cfg.Driver, err)
	}
	fail := func(err error) error {
		return fmt.Errorf("emulated %s: unpublish %s from %s: %w", p.cfg.Driver, handle, nodeID, err)
	}
	if nfs {
		return p.unpublishFS(ctx, id, nodeID, fail)
	}
	if _, err := p.c.GetVolume(ctx, id); err != nil {
		if apiErr, ok := apiErrOf(err); ok && apiErr.NotFound() {
			return nil
		}
	}
	h, err := p.host(ctx, nodeID)
	if err != nil {
		return fail(err)
	}
	if _, err := p.c.DetachVolumeFromHost(ctx, h.ID, &gopowerstore.HostVolumeDetach{VolumeID: &id}); err != nil {
		if err := detachAnswer(err, id, h.ID); err != nil {
			return fail(err)
		}
	}
	return nil
}

// detachAnswer reads a failed detach as csi-powerstore's
// detachVolumeFromHost (pkg/controller/base.go) does; nil is success.
func detachAnswer(err error, volID, hostID string) error {
	apiErr, ok := apiErrOf(err)
	if !ok {
		return fmt.Errorf("failed to detach volume '%s' from host: %w", volID, err)
	}
	if strings.Contains(apiErr.Message, "Host is not attached to volume") {
		return nil
	}
	if apiErr.HostIsNotExist() {
		return fmt.Errorf("host with ID '%s' not found (detach answered %d %q): %w", hostID, apiErr.StatusCode, apiErr.Message, ErrNotFound)
	}
	if !apiErr.VolumeIsNotAttachedToHost() && !apiErr.HostIsNotAttachedToVolume() && !apiErr.NotFound() && !apiErr.VolumeDetachedFromHost() {
		return fmt.Errorf("unexpected api error when detaching volume from host: %w", err)
	}
	return nil
}

// RegisterNode registers a node's host as csi-powerstore's node plugin
// does when no host has the node's initiators (dell/csi-powerstore
// pkg/node/node.go setupHost and registerHost): a host named by the node
// ID, os_type Linux, with the given initiators of one protocol. A node
// that comes back with a new IP reports a new node ID and so registers a
// new host; the array refuses it while another host still holds one of
// the initiators. It returns the new host's ID.
func (p *PowerStore) RegisterNode(ctx context.Context, nodeID string, initiators []gopowerstore.InitiatorCreateModify) (string, error) {
	os := gopowerstore.OSTypeEnumLinux
	resp, err := p.c.CreateHost(ctx, &gopowerstore.HostCreate{Name: &nodeID, OsType: &os, Initiators: &initiators})
	if err != nil {
		return "", fmt.Errorf("emulated %s: register host %s: %w", p.cfg.Driver, nodeID, err)
	}
	return resp.ID, nil
}
