package csidriver

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	siotypes "github.com/dell/goscaleio/types/v1"
)

// csi-vxflexos NFS (PowerFlex file, PowerFlex >= 4.0), as the driver does
// it through goscaleio (dell/csi-powerflex service/controller.go
// CreateVolume, ControllerPublishVolume, ControllerUnpublishVolume;
// service/service.go exportFilesystem, unexportFilesystem).

// powerFlexMinNFSSize is the driver's minNfsSize (3 GiB).
const powerFlexMinNFSSize = 3 << 30

// createFileSystem creates a file system on the NAS server, at least
// 3 GiB, and returns "<systemID>/<filesystemID>". A file system of that
// name and size is returned as it is; another size is refused
// (CreateVolume's idempotency check).
func (p *PowerFlex) createFileSystem(ctx context.Context, name string, size int64) (string, error) {
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("emulated %s: create NFS volume %s: %w", p.cfg.Driver, name, err)
	}
	if name == "" {
		return fail(fmt.Errorf("name is empty: %w", ErrInvalid))
	}
	size = max(size, powerFlexMinNFSSize)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.c.WithContext(ctx) // the system calls through the same client
	nas, err := p.sys.GetNASByIDName("", p.cfg.NasName)
	if err != nil {
		return fail(fmt.Errorf("find NAS server %s: %w", p.cfg.NasName, err))
	}
	pool, err := p.c.WithContext(ctx).FindStoragePool("", p.cfg.StoragePool, "", "")
	if err != nil {
		return fail(fmt.Errorf("find storage pool %s: %w", p.cfg.StoragePool, err))
	}
	// The driver looks the name up first; GetFileSystemByIDName reports
	// any failure of the listing as "not found" too.
	p.c.WithContext(ctx)
	all, err := p.sys.GetAllFileSystems()
	if err != nil {
		return fail(fmt.Errorf("list file systems: %w", err))
	}
	for _, fs := range all {
		if fs.Name != name {
			continue
		}
		if int64(fs.SizeTotal) != size {
			return fail(fmt.Errorf("'Volume name' already exists and size is different: %w", ErrInvalid))
		}
		return p.cfg.SystemID + "/" + fs.ID, nil
	}
	p.c.WithContext(ctx)
	resp, err := p.sys.CreateFileSystem(&siotypes.FsCreate{Name: name, SizeTotal: int(size), StoragePoolID: pool.ID, NasServerID: nas.ID})
	if err != nil {
		return fail(err)
	}
	return p.cfg.SystemID + "/" + resp.ID, nil
}

// fileSystemOf splits an NFS handle as the driver does
// (getFilesystemIDFromCsiVolumeID, getSystemIDFromCsiVolumeID) and reads
// the file system; a missing one is ErrNotFound. The caller holds p.mu.
func (p *PowerFlex) fileSystemOf(ctx context.Context, handle string) (*siotypes.FileSystem, error) {
	sys, fsID, _ := strings.Cut(handle, "/")
	if fsID == "" || strings.Contains(fsID, "/") {
		return nil, fmt.Errorf("NFS volume handle %q: %w", handle, ErrInvalid)
	}
	if sys != p.cfg.SystemID {
		return nil, fmt.Errorf("NFS volume handle %q names system %s, not %s: %w", handle, sys, p.cfg.SystemID, ErrInvalid)
	}
	p.c.WithContext(ctx)
	fs, err := p.sys.GetFileSystemByIDName(fsID, "")
	if err != nil {
		// goscaleio answers "couldn't find filesystem by id" for every
		// failure; the driver takes it as NotFound.
		return nil, fmt.Errorf("file system %s: %w: %w", fsID, ErrNotFound, err)
	}
	return fs, nil
}

// nodeIPs are the IPs the driver gives an export for a node
// (findNetworkInterfaceIPs, else getSDCIPs): every IP of the ConfigMap's
// interfaceNames, of all nodes alike as the driver reads it, when any are
// set; otherwise the IPs of the SDC whose GUID is the node ID. The
// caller holds p.mu.
func (p *PowerFlex) nodeIPs(ctx context.Context, nodeID string) ([]string, error) {
	if len(p.cfg.InterfaceIPs) > 0 {
		var out []string
		names := make([]string, 0, len(p.cfg.InterfaceIPs))
		for n := range p.cfg.InterfaceIPs {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			out = append(out, strings.Split(p.cfg.InterfaceIPs[n], ",")...)
		}
		return out, nil
	}
	p.c.WithContext(ctx)
	sdc, err := p.sys.FindSdc("SdcGUID", strings.ToUpper(nodeID))
	if err != nil {
		return nil, fmt.Errorf("error finding SDC from GUID: %s: %w: %w", nodeID, ErrNotFound, err)
	}
	if len(sdc.Sdc.SdcIPs) == 0 {
		return nil, fmt.Errorf("received empty sdcIPs: %w", ErrNotFound)
	}
	return slices.Clone(sdc.Sdc.SdcIPs), nil
}

// exportOf finds the file system's export in the list of all exports, as
// the driver does: the last one whose file_system_id matches
// (service/service.go exportFilesystem loops over the whole list without
// stopping at a match). The caller holds p.mu.
func (p *PowerFlex) exportOf(ctx context.Context, fs *siotypes.FileSystem) (*siotypes.NFSExport, error) {
	all, err := p.c.WithContext(ctx).GetNFSExport()
	if err != nil {
		return nil, fmt.Errorf("list NFS exports: %w", err)
	}
	var found *siotypes.NFSExport
	for i := range all {
		if all[i].FileSystemID == fs.ID {
			found = &all[i]
		}
	}
	return found, nil
}

// exportFilesystem gives the node's IPs, as "<ip>/255.255.255.255",
// read-write root access to the file system's export, creating the export
// ("csishare-<name>", path "/<name>") the first time. A node already in
// read_write_root_hosts succeeds; a node in another list is refused; a
// single-node volume any other host has is refused. With interfaceNames
// the node's IPs are those of every node in the map
// (service/controller.go findNetworkInterfaceIPs), so a publish to one
// node gives all of them access, and a node already listed (any node of
// the map) makes the publish idempotent. The configured external-access
// entry is added beside the IPs when no list holds it yet, unless it is
// one of them (exportFilesystem, externalAccessAlreadyAdded). The
// emulation has no ReadOnlyMany mode (read_only_root_hosts).
func (p *PowerFlex) exportFilesystem(ctx context.Context, handle, nodeID string, multiNode bool) error {
	fail := func(err error) error {
		return fmt.Errorf("emulated %s: publish %s to %s: %w", p.cfg.Driver, handle, nodeID, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fs, err := p.fileSystemOf(ctx, handle)
	if err != nil {
		return fail(err)
	}
	ips, err := p.nodeIPs(ctx, nodeID)
	if err != nil {
		return fail(err)
	}
	for i, ip := range ips {
		ips[i] = ip + "/255.255.255.255"
	}
	x, err := p.exportOf(ctx, fs)
	if err != nil {
		return fail(err)
	}
	id := ""
	if x != nil {
		id = x.ID
	} else {
		resp, err := p.c.WithContext(ctx).CreateNFSExport(&siotypes.NFSExportCreate{Name: "csishare-" + fs.Name,
			FileSystemID: fs.ID, Path: "/" + fs.Name})
		if err != nil {
			return fail(fmt.Errorf("create NFS Export failed: %w", err))
		}
		id = resp.ID
	}
	x, err = p.c.WithContext(ctx).GetNFSExportByIDName(id, "")
	if err != nil {
		return fail(fmt.Errorf("could not find NFS Export: %w: %w", ErrNotFound, err))
	}
	listed := func(l []string) bool {
		return slices.ContainsFunc(l, func(h string) bool { return slices.Contains(ips, h) })
	}
	if listed(x.ReadOnlyHosts) || listed(x.ReadWriteHosts) || listed(x.ReadOnlyRootHosts) {
		return fail(fmt.Errorf("host %s has access on NFS Export %s with incompatible access mode: %w", nodeID, id, ErrInvalid))
	}
	others := len(x.ReadOnlyHosts) + len(x.ReadWriteHosts) + len(x.ReadOnlyRootHosts) + len(x.ReadWriteRootHosts)
	idempotent := listed(x.ReadWriteRootHosts)
	if idempotent {
		others--
	}
	if !multiNode && others > 0 {
		return fail(fmt.Errorf("other hosts have access on NFS Share %s: %w", id, ErrAlreadyPublished))
	}
	if idempotent {
		return nil
	}
	add := ips
	if ext := p.cfg.ExternalAccess; ext != "" && !slices.Contains(ips, ext) &&
		!slices.Contains(x.ReadWriteRootHosts, ext) && !slices.Contains(x.ReadWriteHosts, ext) &&
		!slices.Contains(x.ReadOnlyRootHosts, ext) && !slices.Contains(x.ReadOnlyHosts, ext) {
		add = append(slices.Clone(ips), ext)
	}
	if err := p.c.WithContext(ctx).ModifyNFSExport(&siotypes.NFSExportModify{AddReadWriteRootHosts: add}, id); err != nil {
		return fail(fmt.Errorf("allocating host access failed: %w", err))
	}
	return nil
}

// unexportFilesystem removes the node's IPs from the file system's
// export, as "<ip>/255.255.255.255": from read_write_hosts and
// read_write_root_hosts where listed, and from read_only_hosts and
// read_only_root_hosts whenever those lists are not empty (the driver's
// sort.SearchStrings test is always true). An export that does not exist
// succeeds; a file system that does not is the driver's NotFound.
func (p *PowerFlex) unexportFilesystem(ctx context.Context, handle, nodeID string) error {
	fail := func(err error) error {
		return fmt.Errorf("emulated %s: unpublish %s from %s: %w", p.cfg.Driver, handle, nodeID, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fs, err := p.fileSystemOf(ctx, handle)
	if err != nil {
		return fail(err)
	}
	ips, err := p.nodeIPs(ctx, nodeID)
	if err != nil {
		return fail(err)
	}
	x, err := p.exportOf(ctx, fs)
	if err != nil {
		return fail(err)
	}
	if x == nil {
		return nil
	}
	x, err = p.c.WithContext(ctx).GetNFSExportByIDName(x.ID, "")
	if err != nil {
		return fail(fmt.Errorf("could not find NFS Export: %w: %w", ErrNotFound, err))
	}
	m := &siotypes.NFSExportModify{}
	for _, ip := range ips {
		h := ip + "/255.255.255.255"
		if len(x.ReadOnlyHosts) > 0 {
			m.RemoveReadOnlyHosts = append(m.RemoveReadOnlyHosts, h)
		}
		if len(x.ReadOnlyRootHosts) > 0 {
			m.RemoveReadOnlyRootHosts = append(m.RemoveReadOnlyRootHosts, h)
		}
		if slices.Contains(x.ReadWriteHosts, h) {
			m.RemoveReadWriteHosts = append(m.RemoveReadWriteHosts, h)
		}
		if slices.Contains(x.ReadWriteRootHosts, h) {
			m.RemoveReadWriteRootHosts = append(m.RemoveReadWriteRootHosts, h)
		}
	}
	if err := p.c.WithContext(ctx).ModifyNFSExport(m, x.ID); err != nil {
		return fail(fmt.Errorf("removing host %s access from NFS Export failed: %w", nodeID, err))
	}
	return nil
}
