package unity

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/dell/gounity"
	unitytypes "github.com/dell/gounity/apitypes"

	"github.com/fenced-project/fenced/arrayclients"
)

// Unity NFS volumes (handle "<name>-NFS-<array>-<file system ID>") are
// file systems; csi-unity's ControllerPublishVolume puts the node's host
// into a host list of the file system's NFS share (rootAccessHosts, or
// readOnlyRootAccessHosts for read-only-many) and its unpublish takes it
// out (dell/csi-unity service/controller.go exportFilesystem,
// unexportFilesystem). The cut of a footprint file system
// (CutNFSShareHosts) takes the host out of every list of every share of
// the file system that names it: each list is written whole with gounity's
// ModifyNFSShareHostAccess, which replaces one list.

// The host lists of an NFS share, as the Unity REST API names them.
const (
	unityListReadOnly     = "readOnlyHosts"
	unityListReadWrite    = "readWriteHosts"
	unityListReadOnlyRoot = "readOnlyRootAccessHosts"
	unityListRoot         = "rootAccessHosts"
)

// unityShareLists are the lists in Unity's order.
func unityShareLists() []string {
	return []string{unityListReadOnly, unityListReadWrite, unityListReadOnlyRoot, unityListRoot}
}

// unityAccessType is gounity's AccessType that writes a list.
func unityAccessType(list string) (gounity.AccessType, bool) {
	switch list {
	case unityListReadOnly:
		return gounity.ReadOnlyAccessType, true
	case unityListReadWrite:
		return gounity.ReadWriteAccessType, true
	case unityListReadOnlyRoot:
		return gounity.ReadOnlyRootAccessType, true
	case unityListRoot:
		return gounity.ReadWriteRootAccessType, true
	}
	return "", false
}

// UnityShareAccess is one NFS share of a footprint file system whose host
// lists named the fenced host when the plan was read.
type UnityShareAccess struct {
	// Filesystem is the file system's ID (fs_N), the footprint volume's
	// object.
	Filesystem string `json:"filesystem"`
	// Share is the NFS share's ID and Name its name.
	Share string `json:"share"`
	Name  string `json:"name,omitempty"`
	// Lists are the share's host lists that held the host: what Undo
	// gives back.
	Lists []string `json:"lists"`
	// OtherHosts were in some list of the share too (evidence).
	OtherHosts []string `json:"otherHosts,omitempty"`
}

// unityShare is an NFS share as read.
type unityShare struct {
	ID, Name string
	// Snap is the snapshot the share exports, "" for the file system
	// itself.
	Snap string
	// DefaultAccess is NFSShareDefaultAccessEnum: 0 is no access for a
	// host in no list; any other value lets every host in.
	DefaultAccess int
	// Lists are the host IDs of each list.
	Lists map[string][]string
}

// holding returns the lists that name the host.
func (s *unityShare) holding(hostID string) []string {
	var out []string
	for _, l := range unityShareLists() {
		if slices.Contains(s.Lists[l], hostID) {
			out = append(out, l)
		}
	}
	return out
}

// others returns the other hosts of the share's lists, each once.
func (s *unityShare) others(hostID string) []string {
	var out []string
	for _, l := range unityShareLists() {
		for _, h := range s.Lists[l] {
			if h != hostID && !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	return out
}

// unityNFS is a file system as read with every NFS share it lists.
type unityNFS struct {
	// fs is nil when the file system no longer exists.
	fs     *unitytypes.Filesystem
	shares []*unityShare
}

// share returns the share of that ID, or nil.
func (n unityNFS) share(id string) *unityShare {
	for _, s := range n.shares {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// access reports whether some share lets the host in (a list names it, or
// the share is open to every host), and the other hosts of the shares.
func (n unityNFS) access(hostID string) (has bool, holders []string) {
	for _, s := range n.shares {
		has = has || len(s.holding(hostID)) > 0 || s.DefaultAccess != 0
		for _, h := range s.others(hostID) {
			if !slices.Contains(holders, h) {
				holders = append(holders, h)
			}
		}
	}
	return has, holders
}

// remaining describes how the shares still let the host in.
func (n unityNFS) remaining(hostID string) []string {
	var out []string
	for _, s := range n.shares {
		for _, l := range s.holding(hostID) {
			out = append(out, fmt.Sprintf("NFS share %s (%s) of file system %s lists host %s in %s", s.ID, s.Name, n.fs.FileContent.ID, hostID, l))
		}
		if s.DefaultAccess != 0 {
			out = append(out, fmt.Sprintf("NFS share %s (%s) of file system %s lets every host in (defaultAccess %d)", s.ID, s.Name, n.fs.FileContent.ID, s.DefaultAccess))
		}
	}
	return out
}

// readShare reads an NFS share by ID through gounity's REST layer:
// FindNFSShareByID does not ask for defaultAccess, which says whether a
// host in no list may mount it. nil when the share no longer exists.
func (a *UnityAdapter) readShare(ctx context.Context, id string) (*unityShare, error) {
	var body struct {
		Content struct {
			unitytypes.NFSShareContent
			DefaultAccess *int `json:"defaultAccess"`
		} `json:"content"`
	}
	uri := "/api/instances/nfsShare/" + id + "?" + unityQuery(url.Values{"fields": {gounity.NFSShareDisplayfields + ",defaultAccess"}})
	err := a.pool.get(ctx, uri, &body)
	if unityCode(err, unityNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read NFS share %s: %w", id, err)
	}
	c := body.Content
	if c.ID != id || c.DefaultAccess == nil {
		return nil, fmt.Errorf("read NFS share %s: the array answered share %q with default access %v", id, c.ID, c.DefaultAccess)
	}
	s := &unityShare{ID: id, Name: c.Name, DefaultAccess: *c.DefaultAccess, Lists: map[string][]string{}}
	for l, hs := range map[string][]unitytypes.HostContent{
		unityListReadOnly: c.ReadOnlyHosts, unityListReadWrite: c.ReadWriteHosts,
		unityListReadOnlyRoot: c.ReadOnlyRootAccessHosts, unityListRoot: c.RootAccessHosts,
	} {
		for _, h := range hs {
			if !unityIDRE.MatchString(h.ID) {
				return nil, fmt.Errorf("read NFS share %s: %s names host %q", id, l, h.ID)
			}
			s.Lists[l] = append(s.Lists[l], h.ID)
		}
	}
	return s, nil
}

// readNFS reads a file system by ID (FindFilesystemByID) and each NFS
// share it lists.
func (a *UnityAdapter) readNFS(ctx context.Context, fsID string) (unityNFS, error) {
	var fs *unitytypes.Filesystem
	err := a.pool.call(ctx, func(ctx context.Context, c gounity.UnityClient) error {
		var err error
		fs, err = c.FindFilesystemByID(ctx, fsID)
		return err
	})
	if errors.Is(err, gounity.ErrorFilesystemNotFound) {
		return unityNFS{}, nil
	}
	if err != nil {
		return unityNFS{}, fmt.Errorf("read file system %s: %w", fsID, err)
	}
	if fs == nil || fs.FileContent.ID != fsID {
		return unityNFS{}, fmt.Errorf("read file system %s: the array answered another file system", fsID)
	}
	n := unityNFS{fs: fs}
	for _, ref := range fs.FileContent.NFSShare {
		if !unityIDRE.MatchString(ref.ID) {
			return unityNFS{}, fmt.Errorf("read file system %s: it lists NFS share %q", fsID, ref.ID)
		}
		s, err := a.readShare(ctx, ref.ID)
		if err != nil {
			return unityNFS{}, fmt.Errorf("read file system %s: %w", fsID, err)
		}
		if s == nil {
			continue // deleted since the file system was read
		}
		s.Snap = ref.ParentSnap.ID
		n.shares = append(n.shares, s)
	}
	return n, nil
}

// nfsReader reads each file system once per operation.
type nfsReader struct {
	a    *UnityAdapter
	seen map[string]unityNFS
}

func (a *UnityAdapter) nfsReader() *nfsReader { return &nfsReader{a: a, seen: map[string]unityNFS{}} }

func (r *nfsReader) read(ctx context.Context, fsID string) (unityNFS, error) {
	if n, ok := r.seen[fsID]; ok {
		return n, nil
	}
	n, err := r.a.readNFS(ctx, fsID)
	if err == nil {
		r.seen[fsID] = n
	}
	return n, err
}

// unityNFSFootprint returns the plan's NFS footprint volumes that have a
// cut.
func unityNFSFootprint(p arrayclients.Plan) []arrayclients.VolumeCut {
	var out []arrayclients.VolumeCut
	for _, vc := range arrayclients.FootprintCuts(p) {
		if vc.Protocol == arrayclients.ProtocolNFS {
			out = append(out, vc)
		}
	}
	return out
}

// planNFSVolume decides the cut of one NFS footprint volume from its file
// system and shares as read, and returns the share entries the cut
// removes.
func (a *UnityAdapter) planNFSVolume(ctx context.Context, r *nfsReader, id arrayclients.Identity, v arrayclients.VolumeRef) (arrayclients.VolumeCut, []UnityShareAccess, error) {
	vc := arrayclients.VolumeCut{VolumeRef: v}
	if _, gap := a.Cover(id, v); gap != nil {
		vc.Gap = gap
		return vc, nil, nil
	}
	if !unityIDRE.MatchString(v.Object) {
		vc.Gap = &arrayclients.Gap{Reason: arrayclients.GapVolumeNotFound, Detail: fmt.Sprintf("%s: Unity %s has no file system %q", v.Volume, a.cfg.Name, v.Object)}
		return vc, nil, nil
	}
	n, err := r.read(ctx, v.Object)
	if err != nil {
		return vc, nil, err
	}
	if n.fs == nil {
		vc.Gap = &arrayclients.Gap{Reason: arrayclients.GapVolumeNotFound, Detail: fmt.Sprintf("%s: Unity %s has no file system %q", v.Volume, a.cfg.Name, v.Object)}
		return vc, nil, nil
	}
	var entries []UnityShareAccess
	for _, s := range n.shares {
		lists := s.holding(id.ObjectID)
		switch {
		case s.DefaultAccess != 0:
			vc.Gap = &arrayclients.Gap{Reason: arrayclients.GapNotFenceable, Detail: fmt.Sprintf("%s: NFS share %s (%s) of file system %s lets every host in "+
				"(defaultAccess %d), so one node's access to it cannot be removed", v.Volume, s.ID, s.Name, v.Object, s.DefaultAccess)}
			return vc, nil, nil
		case len(lists) > 0 && s.Snap != "":
			vc.Gap = &arrayclients.Gap{Reason: arrayclients.GapCutUnsupported, Detail: fmt.Sprintf("%s: NFS share %s (%s) exports snapshot %s of file system %s "+
				"to the node's host %s; fenced cannot cut snapshot shares yet", v.Volume, s.ID, s.Name, s.Snap, v.Object, id.ObjectID)}
			return vc, nil, nil
		case len(lists) > 0:
			entries = append(entries, UnityShareAccess{Filesystem: v.Object, Share: s.ID, Name: s.Name, Lists: lists, OtherHosts: s.others(id.ObjectID)})
		}
	}
	_, vc.Holders = n.access(id.ObjectID)
	switch {
	case len(entries) > 0:
		vc.Cut = arrayclients.CutNFSShareHosts
	case len(vc.Holders) == 0 || !v.Attached:
		vc.Cut = arrayclients.CutNotMapped
	default:
		vc.Gap = arrayclients.OtherIdentityGap(arrayclients.Unity, v, id.ObjectID, vc.Holders)
	}
	return vc, entries, nil
}

// writeShareList replaces one host list of a share. "Nothing to modify"
// means the list already is what we want. gounity's
// ModifyNFSShareHostAccess reads the file system first and answers
// ErrorFilesystemNotFound for any failure of that read, so that answer is
// not taken for "gone" here.
func (a *UnityAdapter) writeShareList(ctx context.Context, fsID, shareID, list string, hosts []string) error {
	at, ok := unityAccessType(list)
	if !ok {
		return fmt.Errorf("%w: NFS share host list %q", arrayclients.ErrPlanMismatch, list)
	}
	if hosts == nil {
		hosts = []string{}
	}
	err := a.pool.call(ctx, func(ctx context.Context, c gounity.UnityClient) error {
		return c.ModifyNFSShareHostAccess(ctx, fsID, shareID, hosts, at)
	})
	switch {
	case unityCode(err, unityNothingToModify):
		return nil
	case errors.Is(err, gounity.ErrorFilesystemNotFound):
		return arrayclients.MarkTransient(fmt.Errorf("write %s of NFS share %s: gounity could not read file system %s first: %w", list, shareID, fsID, err))
	case err != nil:
		return fmt.Errorf("write %s of NFS share %s: %w", list, shareID, err)
	}
	return nil
}

// applyNFS removes the host from every list of each planned share that
// names it now, one list per write (the others are kept as they are). A
// share or file system that no longer exists is skipped.
func (a *UnityAdapter) applyNFS(ctx context.Context, p arrayclients.Plan, e UnityEntries) error {
	for _, es := range e.Shares {
		s, err := a.readShare(ctx, es.Share)
		if err != nil {
			return err
		}
		if s == nil {
			a.log.WarnContext(ctx, "planned NFS share no longer exists", "node", p.Identity.Node, "share", es.Share, "filesystem", es.Filesystem)
			continue
		}
		for _, l := range s.holding(e.HostID) {
			keep := slices.DeleteFunc(slices.Clone(s.Lists[l]), func(h string) bool { return h == e.HostID })
			if err := a.writeShareList(ctx, es.Filesystem, es.Share, l, keep); err != nil {
				return fmt.Errorf("remove host %s from %s of NFS share %s: %w", e.HostID, l, es.Share, err)
			}
			a.log.InfoContext(ctx, "NFS share host access removed", "node", p.Identity.Node, "host", e.HostID, "share", es.Share,
				"filesystem", es.Filesystem, "list", l, "kept", len(keep))
		}
	}
	return nil
}

// verifyNFS reads each NFS footprint volume's file system and shares back:
// it adds a VolumeCheck per volume, Remaining for every list (or open
// share) that still lets the host in, Missing for every planned list that
// no longer names it. access is whether any footprint share lets it in.
func (a *UnityAdapter) verifyNFS(ctx context.Context, p arrayclients.Plan, e UnityEntries, v *arrayclients.Verification) (access bool, err error) {
	r := a.nfsReader()
	for _, vc := range unityNFSFootprint(p) {
		n, err := r.read(ctx, vc.Object)
		if err != nil {
			return false, err
		}
		c := arrayclients.VolumeCheck{Volume: vc.Volume, Object: vc.Object}
		if n.fs == nil {
			c.Note = "the file system no longer exists"
		} else {
			c.NodeAccess, c.Holders = n.access(e.HostID)
			v.Remaining = append(v.Remaining, n.remaining(e.HostID)...)
		}
		access = access || c.NodeAccess
		v.Volumes = append(v.Volumes, c)
	}
	for _, es := range e.Shares {
		n, err := r.read(ctx, es.Filesystem)
		if err != nil {
			return false, err
		}
		s := n.share(es.Share)
		for _, l := range es.Lists {
			if s == nil || !slices.Contains(s.Lists[l], e.HostID) {
				v.Missing = append(v.Missing, fmt.Sprintf("NFS share %s of file system %s: host %s in %s", es.Share, es.Filesystem, e.HostID, l))
			}
		}
	}
	return access, nil
}

// unityNFSRestore is what an unfence does with one footprint file system.
type unityNFSRestore struct {
	give, forbidden bool
	note            string
}

// decideUnityNFSRestore applies docs/footprint.md "Unfence" to a footprint
// file system as read now: the host's planned share entries come back
// only if Kubernetes still wants the volume on the node and no other host
// is in any list of its shares (unless it is multi-node); otherwise the
// node must not have access to it.
func decideUnityNFSRestore(vc arrayclients.VolumeCut, n unityNFS, hostID string, scope arrayclients.RestoreScope) unityNFSRestore {
	if n.fs == nil {
		return unityNFSRestore{note: "the file system no longer exists"}
	}
	_, holders := n.access(hostID)
	if !arrayclients.KeepOnRestore(vc.VolumeRef, scope, holders) {
		return unityNFSRestore{forbidden: true, note: arrayclients.LeftAsItWasNote(vc.VolumeRef, scope, holders)}
	}
	return unityNFSRestore{give: true}
}

// undoNFS gives the host back each planned list of each planned share
// where decideUnityNFSRestore allows it. A share that no longer exists
// (csi-unity deletes its share when the last host is unpublished) is not
// made again: the driver makes a new one when it publishes the volume.
func (a *UnityAdapter) undoNFS(ctx context.Context, p arrayclients.Plan, e UnityEntries, scope arrayclients.RestoreScope) error {
	fp := map[string]arrayclients.VolumeCut{}
	for _, vc := range unityNFSFootprint(p) {
		fp[vc.Object] = vc
	}
	for _, es := range e.Shares {
		vc, ok := fp[es.Filesystem]
		if !ok {
			a.log.WarnContext(ctx, "NFS share entry of no footprint volume left as it is", "node", p.Identity.Node, "share", es.Share, "filesystem", es.Filesystem)
			continue
		}
		n, err := a.readNFS(ctx, es.Filesystem) // read right before the writes
		if err != nil {
			return err
		}
		d := decideUnityNFSRestore(vc, n, e.HostID, scope)
		s := n.share(es.Share)
		if !d.give || s == nil {
			note := d.note
			if note == "" {
				note = "the NFS share no longer exists"
			}
			a.log.InfoContext(ctx, "NFS share host access left as it is", "node", p.Identity.Node, "host", e.HostID, "share", es.Share,
				"filesystem", es.Filesystem, "why", note)
			continue
		}
		for _, l := range es.Lists {
			if slices.Contains(s.Lists[l], e.HostID) {
				continue
			}
			if err := a.writeShareList(ctx, es.Filesystem, es.Share, l, append(slices.Clone(s.Lists[l]), e.HostID)); err != nil {
				return fmt.Errorf("add host %s to %s of NFS share %s: %w", e.HostID, l, es.Share, err)
			}
			a.log.InfoContext(ctx, "NFS share host access restored", "node", p.Identity.Node, "host", e.HostID, "share", es.Share,
				"filesystem", es.Filesystem, "list", l)
		}
	}
	return nil
}

// verifyRestoreNFS reads each NFS footprint volume back after Undo:
// Missing for each planned list Undo gives back that does not name the
// host, Remaining for a volume the node may not keep that lets it in.
func (a *UnityAdapter) verifyRestoreNFS(ctx context.Context, p arrayclients.Plan, e UnityEntries, scope arrayclients.RestoreScope, v *arrayclients.Verification) error {
	r := a.nfsReader()
	for _, vc := range unityNFSFootprint(p) {
		n, err := r.read(ctx, vc.Object)
		if err != nil {
			return err
		}
		d := decideUnityNFSRestore(vc, n, e.HostID, scope)
		c := arrayclients.VolumeCheck{Volume: vc.Volume, Object: vc.Object, Note: d.note}
		if n.fs != nil {
			c.NodeAccess, c.Holders = n.access(e.HostID)
		}
		if d.forbidden && c.NodeAccess {
			v.Remaining = append(v.Remaining, fmt.Sprintf("file system %s (volume %s) lets host %s in: %s; %s", vc.Object, vc.Volume, e.HostID, d.note,
				strings.Join(n.remaining(e.HostID), "; ")))
		}
		v.Volumes = append(v.Volumes, c)
		if !d.give {
			continue
		}
		for _, es := range e.Shares {
			if es.Filesystem != vc.Object {
				continue
			}
			s := n.share(es.Share)
			if s == nil {
				continue // deleted: nothing to give back
			}
			for _, l := range es.Lists {
				if !slices.Contains(s.Lists[l], e.HostID) {
					v.Missing = append(v.Missing, fmt.Sprintf("NFS share %s of file system %s: host %s in %s", es.Share, es.Filesystem, e.HostID, l))
				}
			}
		}
	}
	return nil
}

// checkShareEntries validates a plan's share entries.
func checkShareEntries(shares []UnityShareAccess) error {
	for _, s := range shares {
		if !unityIDRE.MatchString(s.Filesystem) || !unityIDRE.MatchString(s.Share) || len(s.Lists) == 0 {
			return fmt.Errorf("%w: NFS share entry %+v", arrayclients.ErrPlanMismatch, s)
		}
		for _, l := range s.Lists {
			if _, ok := unityAccessType(l); !ok {
				return fmt.Errorf("%w: NFS share entry %+v: list %q", arrayclients.ErrPlanMismatch, s, l)
			}
		}
	}
	return nil
}
