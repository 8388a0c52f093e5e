package csidriver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/dell/gounity"
	types "github.com/dell/gounity/apitypes"

	"github.com/fenced-project/fenced/arrayclients"
)

// UnityDriver is csi-unity's driver name.
const UnityDriver = "csi-unity.dellemc.com"

// UnityConfig is what the emulated csi-unity controller knows of one array
// (an entry of the driver's secret and the StorageClass).
type UnityConfig struct {
	// Driver is the CSI driver name. Default UnityDriver.
	Driver string
	// Endpoint is the array's URL.
	Endpoint, Username, Password string
	// ArrayID is the array's ID in the secret (arrayId, e.g.
	// APM00123456789). The driver lowercases it and writes it into every
	// handle: "<name>-<protocol>-<arrayid>-<LUN ID>".
	ArrayID string
	// StoragePool is the StorageClass' storagePool (a pool ID). Default
	// "pool_1", the simulator's.
	StoragePool string
	// Protocol is the StorageClass' protocol for block volumes: "iSCSI"
	// (default) or "FC".
	Protocol string
	// NasServer is the StorageClass' nasServer for NFS volumes (a NAS
	// server ID). Default "nas_1", the simulator's.
	NasServer string
	// Insecure skips verifying the array's certificate: gounity takes no
	// CA, so an array with a private CA needs it.
	Insecure bool
}

// Unity emulates the csi-unity controller for one array: block (FC and
// iSCSI) volumes and NFS volumes (unity_nfs.go). Node IDs are
// "<short name>,<long name>".
type Unity struct {
	cfg UnityConfig
	// mu serialises the calls: publish and unpublish read a LUN's (or NFS
	// share's) host list and write it back whole, as the driver does under
	// its lock.
	mu sync.Mutex
	c  gounity.UnityClient
}

// NewUnity builds the controller and logs in.
func NewUnity(ctx context.Context, cfg UnityConfig) (*Unity, error) {
	if cfg.Driver == "" {
		cfg.Driver = UnityDriver
	}
	if cfg.StoragePool == "" {
		cfg.StoragePool = "pool_1"
	}
	if cfg.NasServer == "" {
		cfg.NasServer = "nas_1"
	}
	switch strings.ToUpper(cfg.Protocol) {
	case "", "ISCSI":
		cfg.Protocol = "iSCSI"
	case "FC":
		cfg.Protocol = "FC"
	default:
		return nil, fmt.Errorf("emulated %s: protocol %q is not iSCSI or FC: %w", cfg.Driver, cfg.Protocol, ErrInvalid)
	}
	cfg.ArrayID = strings.ToLower(strings.TrimSpace(cfg.ArrayID))
	if cfg.Endpoint == "" || cfg.ArrayID == "" || strings.Contains(cfg.ArrayID, "-") {
		return nil, fmt.Errorf("emulated %s: endpoint and an arrayID without '-' are required: %w", cfg.Driver, ErrInvalid)
	}
	c, err := gounity.NewClientWithArgs(ctx, cfg.Endpoint, cfg.Insecure)
	if err != nil {
		return nil, fmt.Errorf("emulated %s: build client for %s: %w", cfg.Driver, cfg.Endpoint, err)
	}
	if err := c.Authenticate(ctx, &gounity.ConfigConnect{Endpoint: cfg.Endpoint, Username: cfg.Username,
		Password: cfg.Password, Insecure: cfg.Insecure}); err != nil {
		return nil, fmt.Errorf("emulated %s: log in to %s: %w", cfg.Driver, cfg.Endpoint, err)
	}
	return &Unity{cfg: cfg, c: c}, nil
}

// Driver is the CSI driver name.
func (u *Unity) Driver() string { return u.cfg.Driver }

// ArrayID is the array ID the handles carry (lowercase, as the driver
// writes it).
func (u *Unity) ArrayID() string { return u.cfg.ArrayID }

// CreateVolume creates a thin LUN in the pool and returns
// "<name>-<protocol>-<arrayid>-<LUN ID>" (dell/csi-unity
// service/controller.go CreateVolume, service/csiutils/csiutils.go
// getVolumeResponse). A LUN of that name is returned as it is, as the
// driver's idempotency check does when the size matches. An NFS volume is
// a file system: "<name>-NFS-<arrayid>-<file system ID>" (unity_nfs.go).
func (u *Unity) CreateVolume(ctx context.Context, name string, size int64, protocol arrayclients.Protocol) (string, error) {
	if protocol != arrayclients.ProtocolBlock && protocol != arrayclients.ProtocolNFS {
		return "", fmt.Errorf("emulated %s: create %s volume %s: %w", u.cfg.Driver, protocol, name, ErrUnsupported)
	}
	if name == "" || size <= 0 {
		return "", fmt.Errorf("emulated %s: create volume %q of %d bytes: name and a positive size are required: %w",
			u.cfg.Driver, name, size, ErrInvalid)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if protocol == arrayclients.ProtocolNFS {
		return u.createFilesystem(ctx, name, size)
	}
	vol, _ := u.c.FindVolumeByName(ctx, name)
	if vol != nil {
		if int64(vol.VolumeContent.SizeTotal) != size {
			return "", fmt.Errorf("emulated %s: create volume %s: 'Volume name' already exists and size is different: %w",
				u.cfg.Driver, name, ErrInvalid)
		}
		return u.handle(vol), nil
	}
	if _, err := u.c.CreateLun(ctx, name, u.cfg.StoragePool, "", uint64(size), 0, "", true, false); err != nil {
		return "", fmt.Errorf("emulated %s: create volume %s in pool %s: %w", u.cfg.Driver, name, u.cfg.StoragePool, err)
	}
	vol, err := u.c.FindVolumeByName(ctx, name)
	if err != nil {
		return "", fmt.Errorf("emulated %s: volume %s not found after create: %w", u.cfg.Driver, name, err)
	}
	return u.handle(vol), nil
}

func (u *Unity) handle(vol *types.Volume) string {
	return fmt.Sprintf("%s-%s-%s-%s", vol.VolumeContent.Name, u.cfg.Protocol, u.cfg.ArrayID, vol.VolumeContent.ResourceID)
}

// volumeOf splits a handle as csi-unity does (service/service.go
// getVolumeIDFromVolumeContext, getProtocolFromVolumeContext): the LUN (or
// file system) ID is the last "-" token, the array the one before, the
// protocol the one before that. A handle of another array is refused.
func (u *Unity) volumeOf(handle string) (string, arrayclients.Protocol, error) {
	tokens := strings.Split(handle, "-")
	n := len(tokens)
	if n < 4 || tokens[n-1] == "" {
		return "", "", fmt.Errorf("volume handle %q: %w", handle, ErrInvalid)
	}
	if !strings.EqualFold(tokens[n-2], u.cfg.ArrayID) {
		return "", "", fmt.Errorf("volume handle %q names array %s, not %s: %w", handle, tokens[n-2], u.cfg.ArrayID, ErrInvalid)
	}
	switch strings.ToUpper(tokens[n-3]) {
	case "FC", "ISCSI":
		return tokens[n-1], arrayclients.ProtocolBlock, nil
	case "NFS":
		return tokens[n-1], arrayclients.ProtocolNFS, nil
	}
	return "", "", fmt.Errorf("volume handle %q: protocol %q: %w", handle, tokens[n-3], ErrInvalid)
}

// host finds the node's host as the controller does (service/controller.go
// getHostID): the host named by the short name if one of its IP ports is
// the long name, else the host named by the long name with that IP port.
func (u *Unity) host(ctx context.Context, nodeID string) (*types.Host, error) {
	short, long, ok := strings.Cut(nodeID, ",")
	if !ok || short == "" || long == "" {
		return nil, fmt.Errorf("node ID %q is not <short>,<long>: %w", nodeID, ErrInvalid)
	}
	hasPort := func(h *types.Host) bool {
		for _, p := range h.HostContent.IPPorts {
			if p.Address == long {
				return true
			}
		}
		return false
	}
	h, err := u.c.FindHostByName(ctx, short)
	if err != nil && !errors.Is(err, gounity.ErrorHostNotFound) {
		return nil, fmt.Errorf("find host %s: %w", short, err)
	}
	if h != nil && hasPort(h) {
		return h, nil
	}
	h, err = u.c.FindHostByName(ctx, long)
	if errors.Is(err, gounity.ErrorHostNotFound) {
		return nil, fmt.Errorf("host %s: %w", long, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("find host %s: %w", long, err)
	}
	if !hasPort(h) {
		return nil, fmt.Errorf("host %s has no IP port %s: %w", h.HostContent.ID, long, ErrNotFound)
	}
	return h, nil
}

// ControllerPublish gives the node's host access to the LUN
// (service/controller.go exportVolume): access already given succeeds;
// another host's access refuses a single-node volume ("Volume has been
// published to a different host already"; the driver refuses so for
// mounted volumes, which every volume of the test bed is); otherwise the
// host is added to the LUN's host list (ModifyVolumeExport). An NFS volume goes to the file
// system's share (unity_nfs.go publishFilesystem).
func (u *Unity) ControllerPublish(ctx context.Context, handle, nodeID string, multiNode bool) error {
	id, proto, err := u.volumeOf(handle)
	if err != nil {
		return fmt.Errorf("emulated %s: publish: %w", u.cfg.Driver, err)
	}
	fail := func(err error) error {
		return fmt.Errorf("emulated %s: publish %s to %s: %w", u.cfg.Driver, handle, nodeID, err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	h, err := u.host(ctx, nodeID)
	if err != nil {
		return fail(err)
	}
	hc := h.HostContent
	if proto == arrayclients.ProtocolNFS {
		if err := u.publishFilesystem(ctx, id, hc.ID, multiNode); err != nil {
			return fail(err)
		}
		return nil
	}
	if (u.cfg.Protocol == "FC" && len(hc.FcInitiators) == 0) || (u.cfg.Protocol == "iSCSI" && len(hc.IscsiInitiators) == 0) {
		return fail(fmt.Errorf("the node has no valid %s initiators: %w", u.cfg.Protocol, ErrInvalid))
	}
	vol, err := u.c.FindVolumeByID(ctx, id)
	if errors.Is(err, gounity.ErrorVolumeNotFound) {
		return fail(fmt.Errorf("volume %s: %w", id, ErrNotFound))
	}
	if err != nil {
		return fail(fmt.Errorf("find volume %s: %w", id, err))
	}
	var hosts []string
	for _, a := range vol.VolumeContent.HostAccessResponse {
		if a.HostContent.ID == hc.ID {
			return nil
		}
		if !multiNode {
			return fail(fmt.Errorf("volume has been published to a different host already (%s): %w",
				a.HostContent.ID, ErrAlreadyPublished))
		}
		hosts = append(hosts, a.HostContent.ID)
	}
	if err := u.c.ModifyVolumeExport(ctx, id, append(hosts, hc.ID)); err != nil {
		return fail(fmt.Errorf("export volume %s to host %s: %w", id, hc.ID, err))
	}
	return nil
}

// ControllerUnpublish removes the node's host from the LUN's host list,
// keeping the others, as service/controller.go ControllerUnpublishVolume
// does: a deleted LUN (gounity.ErrorVolumeNotFound) and a LUN no host has
// access to succeed without a write; otherwise the driver writes the list
// without the node's host whether or not the host was in it, and any error
// is codes.Unknown ("Unexport Volume Failed"). So unpublishing a node that
// no longer has access to a LUN another host still has writes the
// unchanged list, which Unity answers "nothing to modify": the real
// driver's detach fails and is retried for ever, and so does this one. An
// NFS volume leaves the file system's share (unity_nfs.go
// unpublishFilesystem).
func (u *Unity) ControllerUnpublish(ctx context.Context, handle, nodeID string) error {
	id, proto, err := u.volumeOf(handle)
	if err != nil {
		return fmt.Errorf("emulated %s: unpublish: %w", u.cfg.Driver, err)
	}
	fail := func(err error) error {
		return fmt.Errorf("emulated %s: unpublish %s from %s: %w", u.cfg.Driver, handle, nodeID, err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	h, err := u.host(ctx, nodeID)
	if err != nil {
		return fail(err)
	}
	if proto == arrayclients.ProtocolNFS {
		if err := u.unpublishFilesystem(ctx, id, h.HostContent.ID); err != nil {
			return fail(err)
		}
		return nil
	}
	vol, err := u.c.FindVolumeByID(ctx, id)
	if errors.Is(err, gounity.ErrorVolumeNotFound) {
		return nil
	}
	if err != nil {
		return fail(fmt.Errorf("find volume %s: %w", id, err))
	}
	if len(vol.VolumeContent.HostAccessResponse) == 0 {
		return nil
	}
	keep := []string{}
	for _, a := range vol.VolumeContent.HostAccessResponse {
		if a.HostContent.ID != h.HostContent.ID {
			keep = append(keep, a.HostContent.ID)
		}
	}
	if err := u.c.ModifyVolumeExport(ctx, id, keep); err != nil {
		return fail(fmt.Errorf("unexport volume failed (the driver's codes.Unknown): %w", err))
	}
	return nil
}
