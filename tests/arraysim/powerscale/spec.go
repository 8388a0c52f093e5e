package powerscale

import (
	"errors"
	"fmt"
	"net"

	"go.yaml.in/yaml/v3"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
)

// Spec is the fixture's `spec` section for a PowerScale array. Every field
// is optional.
type Spec struct {
	// Username and Password are the API credentials (default
	// admin / Password123!).
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// ClusterName and Release describe the cluster (defaults PS-scale-sim,
	// 9.5.0.0).
	ClusterName string `yaml:"clusterName"`
	Release     string `yaml:"release"`
	// PageSize is the page size of export lists without a limit (default
	// 1000); longer lists carry a resume token.
	PageSize int `yaml:"pageSize"`
	// Zones are access zones besides System.
	Zones []string `yaml:"zones"`
	// Exports are explicit exports.
	Exports []ExportSpec `yaml:"exports"`
	// Clients are NFS clients known besides the fixture nodes (for
	// statistics signals).
	Clients []ClientSpec `yaml:"clients"`
	// PerNode generates exports from the fixture nodes.
	PerNode *PerNodeSpec `yaml:"perNode"`
}

// ExportSpec is an explicit export.
type ExportSpec struct {
	Paths            []string `yaml:"paths"`
	Zone             string   `yaml:"zone"`
	Description      string   `yaml:"description"`
	Clients          []string `yaml:"clients"`
	RootClients      []string `yaml:"rootClients"`
	ReadWriteClients []string `yaml:"readWriteClients"`
	ReadOnlyClients  []string `yaml:"readOnlyClients"`
}

// ClientSpec is an NFS client with its initial signals.
type ClientSpec struct {
	IP        string `yaml:"ip"`
	Name      string `yaml:"name"`
	FQDN      string `yaml:"fqdn"`
	Connected *bool  `yaml:"connected"`
	IOActive  *bool  `yaml:"ioActive"`
}

// PerNodeSpec generates, for each selected node, Exports exports that list
// the node the way csi-powerscale publishes a volume, plus Shared exports
// that list every selected node (RWX volumes). Entries rotate through
// Lists and Forms so a node appears in several lists and as its IP, name
// and FQDN. With Localhost (default true) every generated export also
// lists "localhost" and "127.0.0.1" in clients, as the driver keeps them.
type PerNodeSpec struct {
	Nodes     []string `yaml:"nodes"`
	Zone      string   `yaml:"zone"`
	Exports   *int     `yaml:"exports"`
	Shared    int      `yaml:"shared"`
	Lists     []string `yaml:"lists"`
	Forms     []string `yaml:"forms"`
	Localhost *bool    `yaml:"localhost"`
	IOActive  *bool    `yaml:"ioActive"`
}

// Defaults.
const (
	DefaultUsername = "admin"
	DefaultPassword = "Password123!"
	DefaultZone     = "System"
	defaultPageSize = 1000
)

var specListNames = map[string]string{
	"clients": "clients", "rootClients": "root_clients",
	"readWriteClients": "read_write_clients", "readOnlyClients": "read_only_clients",
}

// New builds a simulator from a fixture spec and the fixture's nodes.
func New(spec *yaml.Node, nodes []fixture.Node) (*Sim, error) {
	var sp Spec
	if err := fixture.DecodeSpec(spec, &sp); err != nil {
		return nil, fmt.Errorf("powerscale %w", err)
	}
	return NewFromSpec(sp, nodes)
}

// NewFromSpec builds a simulator from a decoded Spec.
func NewFromSpec(sp Spec, nodes []fixture.Node) (*Sim, error) {
	s := &Sim{
		username: orDefault(sp.Username, DefaultUsername), password: orDefault(sp.Password, DefaultPassword),
		clusterName: orDefault(sp.ClusterName, "PS-scale-sim"), release: orDefault(sp.Release, "9.5.0.0"),
		pageSize: defaultPageSize, zones: map[string]bool{DefaultZone: true},
		exports: map[int]*export{}, nextID: 1, clients: map[string]*client{}, sessions: map[string]string{},
		dirs: map[string]bool{},
	}
	for _, d := range baseDirs {
		s.addDirLocked(d)
	}
	if sp.PageSize < 0 {
		return nil, fmt.Errorf("powerscale spec: pageSize %d: want > 0", sp.PageSize)
	}
	if sp.PageSize > 0 {
		s.pageSize = sp.PageSize
	}
	for i, z := range sp.Zones {
		if z == "" {
			return nil, fmt.Errorf("powerscale spec: zones[%d] is empty", i)
		}
		s.zones[z] = true
	}
	for _, n := range nodes {
		s.clients[n.IP] = &client{IP: n.IP, Name: n.Name, FQDN: n.LongName(), Connected: true}
	}
	for i, c := range sp.Clients {
		if net.ParseIP(c.IP) == nil {
			return nil, fmt.Errorf("powerscale spec: clients[%d].ip %q is not an IP address", i, c.IP)
		}
		cl := &client{IP: c.IP, Name: c.Name, FQDN: c.FQDN, Connected: true}
		if c.Connected != nil {
			cl.Connected = *c.Connected
		}
		if c.IOActive != nil {
			cl.IOActive = *c.IOActive
		}
		s.clients[c.IP] = cl
	}
	for i, e := range sp.Exports {
		lists := map[string][]string{
			"clients": e.Clients, "root_clients": e.RootClients,
			"read_write_clients": e.ReadWriteClients, "read_only_clients": e.ReadOnlyClients,
		}
		if _, err := s.addExport(e.Zone, e.Paths, e.Description, lists); err != nil {
			return nil, fmt.Errorf("powerscale spec: exports[%d]: %w", i, err)
		}
	}
	if sp.PerNode != nil {
		if err := s.addPerNode(*sp.PerNode, nodes); err != nil {
			return nil, fmt.Errorf("powerscale spec: perNode: %w", err)
		}
	}
	for _, e := range s.exports {
		for _, p := range e.Paths {
			s.addDirLocked(p)
		}
	}
	return s, nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// addExport creates an export; lists may be nil.
func (s *Sim) addExport(zone string, paths []string, desc string, lists map[string][]string) (*export, error) {
	zone = orDefault(zone, DefaultZone)
	if !s.zones[zone] {
		return nil, fmt.Errorf("zone %q does not exist", zone)
	}
	if len(paths) == 0 {
		return nil, errors.New("paths is empty")
	}
	for _, p := range paths {
		if len(p) < 4 || p[:4] != "/ifs" {
			return nil, fmt.Errorf("path %q is not under /ifs", p)
		}
	}
	e := &export{ID: s.nextID, Zone: zone, Paths: clone(paths), Description: desc, Lists: map[string][]string{}}
	for _, name := range ListNames {
		e.Lists[name] = clone(lists[name])
	}
	s.exports[e.ID] = e
	s.nextID++
	return e, nil
}

func (s *Sim) addPerNode(pn PerNodeSpec, all []fixture.Node) error {
	nodes := all
	if len(pn.Nodes) > 0 {
		nodes = nil
		for _, name := range pn.Nodes {
			found := false
			for _, n := range all {
				if n.Name == name {
					nodes, found = append(nodes, n), true
				}
			}
			if !found {
				return fmt.Errorf("nodes: %q is not a fixture node", name)
			}
		}
	}
	lists := pn.Lists
	if len(lists) == 0 {
		lists = []string{"clients"}
	}
	for i, l := range lists {
		if specListNames[l] == "" {
			return fmt.Errorf("lists[%d] %q: want clients, rootClients, readWriteClients or readOnlyClients", i, l)
		}
	}
	forms := pn.Forms
	if len(forms) == 0 {
		forms = []string{"fqdn"}
	}
	for i, f := range forms {
		if f != "ip" && f != "name" && f != "fqdn" {
			return fmt.Errorf("forms[%d] %q: want ip, name or fqdn", i, f)
		}
	}
	perNode := 2
	if pn.Exports != nil {
		perNode = *pn.Exports
	}
	if perNode < 0 || pn.Shared < 0 {
		return errors.New("exports and shared must be >= 0")
	}
	localhost := pn.Localhost == nil || *pn.Localhost
	k := 0
	entry := func(n fixture.Node) (string, string) {
		list, form := specListNames[lists[k%len(lists)]], forms[(k/len(lists))%len(forms)]
		k++
		switch form {
		case "ip":
			return list, n.IP
		case "name":
			return list, n.Name
		}
		return list, n.LongName()
	}
	base := func() map[string][]string {
		m := map[string][]string{}
		if localhost {
			m["clients"] = []string{"localhost", "127.0.0.1"}
		}
		return m
	}
	for _, n := range nodes {
		if pn.IOActive != nil {
			s.clients[n.IP].IOActive = *pn.IOActive
		}
		for i := 0; i < perNode; i++ {
			m := base()
			list, v := entry(n)
			m[list] = append(m[list], v)
			path := fmt.Sprintf("/ifs/data/csi/k8s-%s-%d", n.Name, i)
			if _, err := s.addExport(pn.Zone, []string{path}, "CSI volume of "+n.Name, m); err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
		}
	}
	for i := 0; i < pn.Shared; i++ {
		m := base()
		for _, n := range nodes {
			list, v := entry(n)
			m[list] = append(m[list], v)
		}
		path := fmt.Sprintf("/ifs/data/csi/k8s-shared-%d", i)
		if _, err := s.addExport(pn.Zone, []string{path}, "shared CSI volume", m); err != nil {
			return err
		}
	}
	return nil
}
