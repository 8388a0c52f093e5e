package configs

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fenced-project/fenced/arrayclients"
)

// array returns the array named name, or false.
func (c *Config) array(name string) (Array, bool) {
	for _, a := range c.Arrays {
		if a.Name == name {
			return a, true
		}
	}
	return Array{}, false
}

// ArrayDrivers returns, for each array of the cluster, the CSI driver
// names whose CSINode node IDs identify a node on it, in order of
// preference: the array's driverName, or for an array without one the
// family's default name followed by the other names clusters[].drivers
// maps to the family and no array of the cluster names as its driverName
// (arrayclients.UnnamedInstance). Validation refuses the configurations
// where that second list would hold two driver instances.
func (c *Config) ArrayDrivers(cl Cluster) map[string][]string {
	claimed := map[string]bool{}
	for _, name := range cl.Arrays {
		if a, ok := c.array(name); ok && a.DriverName != "" {
			claimed[a.DriverName] = true
		}
	}
	unclaimed := cl.DriverFamilies()
	maps.DeleteFunc(unclaimed, func(name string, _ arrayclients.Family) bool { return claimed[name] })
	out := map[string][]string{}
	for _, name := range cl.Arrays {
		a, ok := c.array(name)
		switch {
		case !ok:
		case a.DriverName != "":
			out[name] = []string{a.DriverName}
		default:
			out[name] = arrayclients.UnnamedInstance(a.Family, unclaimed)
		}
	}
	return out
}

// addArrayDrivers files each array's driverName in clusters[].drivers of
// every cluster that uses the array, so volumes of that driver are placed
// on the array's family without being listed twice. Run after validation,
// which refuses a driverName that clusters[].drivers maps to another
// family.
func (c *Config) addArrayDrivers() {
	for i := range c.Clusters {
		cl := &c.Clusters[i]
		for _, name := range cl.Arrays {
			a, ok := c.array(name)
			if !ok || a.DriverName == "" || arrayclients.DefaultDrivers()[a.DriverName] == a.Family {
				continue
			}
			if _, set := cl.Drivers[a.DriverName]; set {
				continue
			}
			if cl.Drivers == nil {
				cl.Drivers = map[string]arrayclients.Family{}
			}
			cl.Drivers[a.DriverName] = a.Family
		}
	}
}

// driverName checks arrays[i].driverName: a DNS subdomain of at most 63
// characters (a CSI driver name), and not the Dell default name of
// another family.
func (c *checker) driverName(base string, a Array) {
	if a.DriverName == "" {
		return
	}
	p := base + ".driverName"
	if len(a.DriverName) > 63 || len(validation.IsDNS1123Subdomain(a.DriverName)) > 0 {
		c.add(p, "invalid CSI driver name %q: want a DNS subdomain of at most 63 characters (lower case)", a.DriverName)
		return
	}
	if f, ok := arrayclients.DefaultDrivers()[a.DriverName]; ok && f != a.Family {
		c.add(p, "%q is the %s driver's name, but the array is a %s array", a.DriverName, f, a.Family)
	}
}

// instances checks that every array of the cluster belongs to one CSI
// driver instance: a driverName that clusters[].drivers maps to another
// family is a conflict, and arrays of one family without a driverName are
// ambiguous when the cluster knows other driver names of the family that
// no array claims (two such names, or one such name and two such arrays):
// fenced could not tell which instance's node ID identifies a node on
// which array.
func (c *checker) instances(base string, cl Cluster, cfg *Config) {
	index := map[string]int{}
	for i, a := range cfg.Arrays {
		index[a.Name] = i
	}
	claimed := map[string]bool{}
	unnamed := map[arrayclients.Family][]string{}
	for _, name := range cl.Arrays {
		i, ok := index[name]
		if !ok {
			continue
		}
		a := cfg.Arrays[i]
		if a.DriverName == "" {
			if !slices.Contains(unnamed[a.Family], name) {
				unnamed[a.Family] = append(unnamed[a.Family], name)
			}
			continue
		}
		claimed[a.DriverName] = true
		if f, ok := cl.Drivers[a.DriverName]; ok && f != a.Family {
			c.add(base+".drivers."+a.DriverName, "maps the driver to %s, but arrays[%d] (%s, a %s array) names it as its driverName",
				f, i, name, a.Family)
		}
	}
	for _, f := range slices.Sorted(maps.Keys(unnamed)) {
		arrays := unnamed[f]
		var others []string
		for _, name := range slices.Sorted(maps.Keys(cl.Drivers)) {
			if cl.Drivers[name] == f && name != arrayclients.DefaultDriver(f) && !claimed[name] {
				others = append(others, name)
			}
		}
		if len(others) == 0 || (len(others) == 1 && len(arrays) == 1) {
			continue
		}
		known := append([]string{arrayclients.DefaultDriver(f)}, others...)
		for _, name := range arrays {
			c.add(fmt.Sprintf("arrays[%d].driverName", index[name]),
				"required: cluster %s knows the %s drivers %s, and its %s arrays %s name no driverName: which driver "+
					"instance's node IDs identify a node on %s is ambiguous; set driverName to the driver whose secret lists the array",
				cl.Name, f, strings.Join(known, ", "), f, strings.Join(arrays, ", "), name)
		}
	}
}
