package powerflex

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
)

// PowerFlex file (PowerFlex >= 4.0): NAS servers, file systems and their
// NFS exports, served under /rest/v1/ as goscaleio v1.23.0 calls them
// (fs.go, nfs.go, nfs_export.go): GET /rest/v1/file-systems[/<id>]?select=*,
// POST /rest/v1/file-systems, GET /rest/v1/nas-servers[/<id>]?select=*,
// GET /rest/v1/nfs-exports[/<id>]?select=*, POST /rest/v1/nfs-exports and
// PATCH /rest/v1/nfs-exports/<id> with add_*/remove_* host lists.
//
// Host entries: csi-vxflexos adds a node IP as "<ip>/255.255.255.255"
// and removes that same form, noting the array will not remove an entry
// without its netmask (dell/csi-powerflex service/service.go
// exportFilesystem, unexportFilesystem). The simulator stores an added
// IPv4 address without a mask, or with a prefix length, in that
// "<ip>/<dotted mask>" form, and removes only the exact string stored.
// Fixture entries are stored verbatim, so a test can hold other forms.

// Access lists of an NFS export, by their JSON names.
const (
	ListNoAccess      = "no_access_hosts"
	ListReadOnly      = "read_only_hosts"
	ListReadOnlyRoot  = "read_only_root_hosts"
	ListReadWrite     = "read_write_hosts"
	ListReadWriteRoot = "read_write_root_hosts"
)

// Default access values of an NFS export (goscaleio
// NFSExportDefaultAccessEnum).
const (
	DefaultAccessNoAccess  = "No_Access"
	DefaultAccessReadOnly  = "Read_Only"
	DefaultAccessReadWrite = "Read_Write"
	DefaultAccessRoot      = "Root"
)

// NASName is the name of the one NAS server each system has.
const NASName = "nas1"

// File API messages; goscaleio reports them as its Error.
const (
	msgFileSystemNotFound = "File system not found"
	msgNFSExportNotFound  = "NFS export not found"
	msgNASNotFound        = "NAS server not found"
	msgFSNameInUse        = "File system name already in use"
	msgExportExists       = "NFS export name already in use"
)

// FileSystem is a file system in State.
type FileSystem struct {
	ID            string `json:"id"`
	Name          string `json:"name"`
	StoragePoolID string `json:"storage_pool_id"`
	NasServerID   string `json:"nas_server_id"`
	SizeTotal     int64  `json:"size_total"`
	SystemID      string `json:"systemId"`
}

// NFSExport is an NFS export in State, with its host lists.
type NFSExport struct {
	ID                 string   `json:"id"`
	Name               string   `json:"name"`
	FileSystemID       string   `json:"file_system_id"`
	Path               string   `json:"path"`
	DefaultAccess      string   `json:"default_access"`
	NoAccessHosts      []string `json:"no_access_hosts"`
	ReadOnlyHosts      []string `json:"read_only_hosts"`
	ReadOnlyRootHosts  []string `json:"read_only_root_hosts"`
	ReadWriteHosts     []string `json:"read_write_hosts"`
	ReadWriteRootHosts []string `json:"read_write_root_hosts"`
}

// list returns a pointer to the named host list.
func (x *NFSExport) list(name string) *[]string {
	switch name {
	case ListNoAccess:
		return &x.NoAccessHosts
	case ListReadOnly:
		return &x.ReadOnlyHosts
	case ListReadOnlyRoot:
		return &x.ReadOnlyRootHosts
	case ListReadWrite:
		return &x.ReadWriteHosts
	case ListReadWriteRoot:
		return &x.ReadWriteRootHosts
	}
	return nil
}

func (x *NFSExport) clone() NFSExport {
	c := *x
	for _, n := range exportLists {
		*c.list(n) = append([]string{}, *x.list(n)...)
	}
	return c
}

var exportLists = []string{ListNoAccess, ListReadOnly, ListReadOnlyRoot, ListReadWrite, ListReadWriteRoot}

type nasJSON struct {
	ID                 string `json:"id"`
	Name               string `json:"name"`
	ProtectionDomainID string `json:"protection_domain_id"`
	StoragePoolID      string `json:"storage_pool_id"`
	OperationalStatus  string `json:"operational_status"`
}

// nasID is the ID of a system's one NAS server.
func nasID(systemID string) string { return uuidLike("nas", systemID) }

// uuidLike derives a stable UUID-shaped ID, the form PowerFlex file
// objects have (goscaleio's tests: "64366a19-54e8-1544-f3d7-2a50fb1ccff3").
func uuidLike(kind, key string) string {
	h := derivedID(kind, key) + derivedID(kind+"\x01", key)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// normalizeHost is the form the array lists an added host entry in: an
// IPv4 address gets "/255.255.255.255", a prefix length becomes a dotted
// mask; anything else is kept as given.
func normalizeHost(h string) string {
	h = strings.TrimSpace(h)
	if ip := net.ParseIP(h); ip != nil && ip.To4() != nil {
		return ip.To4().String() + "/255.255.255.255"
	}
	if ip, n, err := net.ParseCIDR(h); err == nil && ip.To4() != nil {
		return ip.To4().String() + "/" + net.IP(n.Mask).String()
	}
	return h
}

// serveFile serves /rest/v1/<rest>.
func (s *Sim) serveFile(w http.ResponseWriter, r *http.Request, rest []string) {
	switch {
	case rest[0] == "file-systems" && len(rest) == 1 && r.Method == http.MethodPost:
		s.createFileSystem(w, r)
	case rest[0] == "nfs-exports" && len(rest) == 1 && r.Method == http.MethodPost:
		s.createNFSExport(w, r)
	case rest[0] == "nfs-exports" && len(rest) == 2 && r.Method == http.MethodPatch:
		s.modifyNFSExport(w, r, rest[1])
	case len(rest) <= 2 && (rest[0] == "file-systems" || rest[0] == "nfs-exports" || rest[0] == "nas-servers"):
		if allow(w, r, http.MethodGet) {
			id := ""
			if len(rest) == 2 {
				id = rest[1]
			}
			s.getFile(w, rest[0], id)
		}
	default:
		writeError(w, http.StatusNotFound, codeNone, "no such resource: "+r.URL.Path)
	}
}

// getFile answers a list (id "") or one object of a file API collection.
func (s *Sim) getFile(w http.ResponseWriter, coll, id string) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var list []any
	ids := map[string]any{}
	switch coll {
	case "file-systems":
		for _, k := range sortedKeys(s.fileSystems) {
			fs := *s.fileSystems[k]
			list, ids[k] = append(list, fs), fs
		}
	case "nfs-exports":
		for _, k := range sortedKeys(s.exports) {
			x := s.exports[k].clone()
			list, ids[k] = append(list, x), x
		}
	case "nas-servers":
		for _, k := range sortedKeys(s.systems) {
			n := nasJSON{ID: nasID(k), Name: NASName, ProtectionDomainID: protectionDomainID(k), StoragePoolID: poolID(k),
				OperationalStatus: "Started"}
			list, ids[n.ID] = append(list, n), n
		}
	}
	if id == "" {
		if list == nil {
			list = []any{}
		}
		writeJSON(w, list)
		return
	}
	if v, ok := ids[id]; ok {
		writeJSON(w, v)
		return
	}
	msg := map[string]string{"file-systems": msgFileSystemNotFound, "nfs-exports": msgNFSExportNotFound,
		"nas-servers": msgNASNotFound}[coll]
	writeError(w, http.StatusNotFound, codeNone, msg)
}

// createFileSystem answers POST /rest/v1/file-systems (goscaleio
// CreateFileSystem, FsCreate) with {"id"}: the pool and NAS server must
// exist, and a name in use is refused.
func (s *Sim) createFileSystem(w http.ResponseWriter, r *http.Request) {
	var p struct {
		Name          string `json:"name"`
		Description   string `json:"description"`
		SizeTotal     int64  `json:"size_total"`
		StoragePoolID string `json:"storage_pool_id"`
		NasServerID   string `json:"nas_server_id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
		writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": "+err.Error())
		return
	}
	if p.Name == "" || p.SizeTotal <= 0 {
		writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": name and a positive size_total are required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	systemID := ""
	for _, id := range sortedKeys(s.systems) {
		if poolID(id) == p.StoragePoolID && nasID(id) == p.NasServerID {
			systemID = id
		}
	}
	if systemID == "" {
		writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": no such storage pool and NAS server")
		return
	}
	for _, fs := range s.fileSystems {
		if fs.Name == p.Name {
			writeError(w, http.StatusUnprocessableEntity, codeNone, msgFSNameInUse)
			return
		}
	}
	id := uuidLike("fs", p.Name)
	s.fileSystems[id] = &FileSystem{ID: id, Name: p.Name, StoragePoolID: p.StoragePoolID, NasServerID: p.NasServerID,
		SizeTotal: p.SizeTotal, SystemID: systemID}
	s.changes.Touch(collFileSystems, id)
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]string{"id": id})
}

// createNFSExport answers POST /rest/v1/nfs-exports (goscaleio
// CreateNFSExport) with {"id"}. goscaleio's NFSExportCreate has no
// default access, so the export is No_Access for every host not listed.
func (s *Sim) createNFSExport(w http.ResponseWriter, r *http.Request) {
	var p struct {
		Name               string   `json:"name"`
		FileSystemID       string   `json:"file_system_id"`
		Path               string   `json:"path"`
		NoAccessHosts      []string `json:"no_access_hosts"`
		ReadOnlyHosts      []string `json:"read_only_hosts"`
		ReadWriteHosts     []string `json:"read_write_hosts"`
		ReadOnlyRootHosts  []string `json:"read_only_root_hosts"`
		ReadWriteRootHosts []string `json:"read_write_root_hosts"`
	}
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
		writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": "+err.Error())
		return
	}
	if p.Name == "" || p.FileSystemID == "" || p.Path == "" {
		writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": name, file_system_id and path are required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.fileSystems[p.FileSystemID]; !ok {
		writeError(w, http.StatusNotFound, codeNone, msgFileSystemNotFound)
		return
	}
	// A file system may have several exports (csi-vxflexos looks through
	// every export for the file system's and keeps the last match,
	// service/service.go, so it does not assume one). Export names are
	// unique.
	id := uuidLike("nfs-export", p.FileSystemID)
	for _, x := range s.exports {
		if x.Name == p.Name {
			writeError(w, http.StatusUnprocessableEntity, codeNone, msgExportExists)
			return
		}
		if x.FileSystemID == p.FileSystemID {
			id = uuidLike("nfs-export", p.FileSystemID+"/"+p.Name)
		}
	}
	x := &NFSExport{ID: id, Name: p.Name, FileSystemID: p.FileSystemID, Path: p.Path, DefaultAccess: DefaultAccessNoAccess}
	for name, add := range map[string][]string{ListNoAccess: p.NoAccessHosts, ListReadOnly: p.ReadOnlyHosts,
		ListReadWrite: p.ReadWriteHosts, ListReadOnlyRoot: p.ReadOnlyRootHosts, ListReadWriteRoot: p.ReadWriteRootHosts} {
		addHosts(x.list(name), add)
	}
	s.exports[id] = x
	s.changes.Touch(collNFSExports, id)
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]string{"id": id})
}

// modifyNFSExport answers PATCH /rest/v1/nfs-exports/<id> (goscaleio
// ModifyNFSExport, NFSExportModify): a list sent whole replaces it;
// add_<list> adds entries (in the array's form; one already there is not
// added twice); remove_<list> removes exactly the strings given (one not
// there is ignored). Answers 204.
func (s *Sim) modifyNFSExport(w http.ResponseWriter, r *http.Request, id string) {
	var p map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
		writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": "+err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.exports[id]
	if !ok {
		writeError(w, http.StatusNotFound, codeNone, msgNFSExportNotFound)
		return
	}
	next := x.clone()
	for key, raw := range p {
		var hosts []string
		var op, list string
		switch {
		case key == "description":
			continue
		case key == "default_access":
			var v string
			if json.Unmarshal(raw, &v) != nil || !slices.Contains([]string{DefaultAccessNoAccess, DefaultAccessReadOnly,
				DefaultAccessReadWrite, DefaultAccessRoot, "Read_Only_Root"}, v) {
				writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": default_access "+string(raw))
				return
			}
			next.DefaultAccess = v
			continue
		case strings.HasPrefix(key, "add_"):
			op, list = "add", strings.TrimPrefix(key, "add_")
		case strings.HasPrefix(key, "remove_"):
			op, list = "remove", strings.TrimPrefix(key, "remove_")
		default:
			op, list = "set", key
		}
		l := next.list(list)
		if l == nil || json.Unmarshal(raw, &hosts) != nil {
			writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": "+key)
			return
		}
		switch op {
		case "add":
			addHosts(l, hosts)
		case "remove":
			*l = slices.DeleteFunc(*l, func(h string) bool { return slices.Contains(hosts, h) })
		case "set":
			*l = []string{}
			addHosts(l, hosts)
		}
	}
	*x = next
	s.changes.Touch(collNFSExports, id)
	w.WriteHeader(http.StatusNoContent)
}

func addHosts(l *[]string, hosts []string) {
	if *l == nil {
		*l = []string{}
	}
	for _, h := range hosts {
		if h = normalizeHost(h); h != "" && !slices.Contains(*l, h) {
			*l = append(*l, h)
		}
	}
}

// addFileSystem adds a fixture file system and its export. The caller
// builds the simulator.
func (s *Sim) addFileSystem(fs FileSystemSpec, defaultSystem string) error {
	if fs.Name == "" {
		return fmt.Errorf("name: required")
	}
	sys := fs.System
	if sys == "" {
		sys = defaultSystem
	}
	if _, ok := s.systems[sys]; !ok {
		return fmt.Errorf("system: %q is not a system of this array", sys)
	}
	id := fs.ID
	if id == "" {
		id = uuidLike("fs", fs.Name)
	}
	if _, dup := s.fileSystems[id]; dup {
		return fmt.Errorf("id: %q is used twice", id)
	}
	for _, o := range s.fileSystems {
		if o.Name == fs.Name {
			return fmt.Errorf("name: %q is used twice", fs.Name)
		}
	}
	size := int64(fs.SizeGB)
	if size == 0 {
		size = 3
	}
	s.fileSystems[id] = &FileSystem{ID: id, Name: fs.Name, StoragePoolID: poolID(sys), NasServerID: nasID(sys),
		SizeTotal: size << 30, SystemID: sys}
	if fs.Export == nil {
		return nil
	}
	xs := fs.Export
	x := &NFSExport{ID: xs.ID, Name: xs.Name, FileSystemID: id, Path: "/" + fs.Name, DefaultAccess: xs.DefaultAccess}
	if x.ID == "" {
		x.ID = uuidLike("nfs-export", id)
	}
	if x.Name == "" {
		x.Name = "csishare-" + fs.Name
	}
	if x.DefaultAccess == "" {
		x.DefaultAccess = DefaultAccessNoAccess
	}
	if _, dup := s.exports[x.ID]; dup {
		return fmt.Errorf("export.id: %q is used twice", x.ID)
	}
	for name, l := range map[string][]string{ListNoAccess: xs.NoAccessHosts, ListReadOnly: xs.ReadOnlyHosts,
		ListReadOnlyRoot: xs.ReadOnlyRootHosts, ListReadWrite: xs.ReadWriteHosts, ListReadWriteRoot: xs.ReadWriteRootHosts} {
		*x.list(name) = append([]string{}, l...)
	}
	s.exports[x.ID] = x
	return nil
}

// FileSystemID returns the ID of the file system with this name.
func (s *Sim) FileSystemID(name string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for id, fs := range s.fileSystems {
		if fs.Name == name {
			return id, true
		}
	}
	return "", false
}

// ExportOf returns the NFS export of a file system (by file system ID)
// csi-vxflexos publishes on: the last the array lists.
func (s *Sim) ExportOf(fsID string) (NFSExport, bool) {
	xs := s.ExportsOf(fsID)
	if len(xs) == 0 {
		return NFSExport{}, false
	}
	return xs[len(xs)-1], true
}

// ExportsOf returns every export of the file system, in the order the
// array lists them.
func (s *Sim) ExportsOf(fsID string) []NFSExport {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []NFSExport
	for _, k := range sortedKeys(s.exports) {
		if x := s.exports[k]; x.FileSystemID == fsID {
			out = append(out, x.clone())
		}
	}
	return out
}
