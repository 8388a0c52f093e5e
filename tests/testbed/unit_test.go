package testbed

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requiredVersion returns the version of module mod required by a go.mod.
func requiredVersion(t *testing.T, gomod, mod string) string {
	t.Helper()
	f, err := os.Open(gomod)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(fields) >= 2 && fields[0] == mod {
			return fields[1]
		}
	}
	require.NoError(t, sc.Err())
	t.Fatalf("%s does not require %s", gomod, mod)
	return ""
}

func TestVersionsMatchToolsModules(t *testing.T) {
	root, err := RepoRoot()
	require.NoError(t, err)
	tools := filepath.Join(root, "tests", "tools")
	assert.Equal(t, KubernetesVersion, requiredVersion(t, filepath.Join(tools, "go.mod"), "k8s.io/kubernetes"))
	assert.Equal(t, EtcdVersion, requiredVersion(t, filepath.Join(tools, "etcd", "go.mod"), "go.etcd.io/etcd/server/v3"))
	assert.Equal(t, KwokVersion, requiredVersion(t, filepath.Join(tools, "kwok", "go.mod"), "sigs.k8s.io/kwok"))

	// The product's module must not depend on Kubernetes itself.
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	assert.NotContains(t, string(data), "k8s.io/kubernetes ")
}

func TestBuildStampCoversToolsModules(t *testing.T) {
	root, err := RepoRoot()
	require.NoError(t, err)
	tools := t.TempDir()
	for _, dir := range []string{".", "etcd", "kwok"} {
		require.NoError(t, os.MkdirAll(filepath.Join(tools, dir), 0o755))
		for _, f := range []string{"go.mod", "go.sum"} {
			data, err := os.ReadFile(filepath.Join(root, "tests", "tools", dir, f))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(tools, dir, f), data, 0o644))
		}
	}
	s1, err := buildStamp(tools)
	require.NoError(t, err)
	s2, err := buildStamp(tools)
	require.NoError(t, err)
	assert.Equal(t, s1, s2)

	f, err := os.OpenFile(filepath.Join(tools, "kwok", "go.sum"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("example.com/x v1.0.0 h1:x=\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	s3, err := buildStamp(tools)
	require.NoError(t, err)
	assert.NotEqual(t, s1, s3, "a changed go.sum must invalidate the cache")

	bins := Binaries{Dir: filepath.Join(t.TempDir(), "bin")}
	assert.False(t, upToDate(bins, s1), "an empty cache is not up to date")
}

func TestCSINodeIDs(t *testing.T) {
	s, err := NodeSpec{
		Name: "worker-1", IP: "127.0.10.7", FQDN: "worker-1.example.test",
		MachineID: "0123456789abcdef0123456789abcdef", SDCGUID: "6B1E5A2C-0D4F-4E1A-9C3B-2A1D0E9F8C7B",
	}.Complete()
	require.NoError(t, err)
	ids := s.CSINodeIDs()
	assert.Equal(t, "6B1E5A2C-0D4F-4E1A-9C3B-2A1D0E9F8C7B", ids[DriverPowerFlex])
	assert.Equal(t, "csi-node-0123456789abcdef0123456789abcdef-127.0.10.7", ids[DriverPowerStore])
	assert.Equal(t, "worker-1=#=#=worker-1.example.test=#=#=127.0.10.7", ids[DriverPowerScale])
	assert.Equal(t, "worker-1", ids[DriverPowerMax])
	assert.Equal(t, "worker-1,worker-1", ids[DriverUnity], "csi-unity's long name is the node's name, not its FQDN")
	assert.Len(t, ids, len(Drivers()))

	s.PowerStorePrefix = "pfx"
	assert.Equal(t, "pfx-0123456789abcdef0123456789abcdef-127.0.10.7", s.CSINodeIDs()[DriverPowerStore])
}

// A node named by its FQDN: csi-powermax and csi-unity cut the name at its
// first dot (csi-unity keeps the whole name beside it); csi-isilon and
// csi-powerstore keep the name whole or do not use it.
func TestCSINodeIDsOfADottedNodeName(t *testing.T) {
	s, err := NodeSpec{Name: "worker-1.dc1.example.com", IP: "127.0.10.7",
		MachineID: "0123456789abcdef0123456789abcdef", SDCGUID: "6B1E5A2C-0D4F-4E1A-9C3B-2A1D0E9F8C7B"}.Complete()
	require.NoError(t, err)
	assert.Equal(t, "worker-1.dc1.example.com", s.FQDN, "a node named by its FQDN")
	assert.Equal(t, "worker-1", s.ShortName())
	ids := s.CSINodeIDs()
	assert.Equal(t, "worker-1", ids[DriverPowerMax])
	assert.Equal(t, "worker-1,worker-1.dc1.example.com", ids[DriverUnity])
	assert.Equal(t, "worker-1.dc1.example.com=#=#=worker-1.dc1.example.com=#=#=127.0.10.7", ids[DriverPowerScale])
	assert.Equal(t, "csi-node-0123456789abcdef0123456789abcdef-127.0.10.7", ids[DriverPowerStore])

	ip, err := NodeSpec{Name: "10.20.30.40", IP: "127.0.10.8"}.Complete()
	require.NoError(t, err)
	assert.Equal(t, "10.20.30.40", ip.UnityShortName(), "csi-unity keeps a name that is an IP whole")
	assert.Equal(t, "10.20.30.40,10.20.30.40", ip.CSINodeIDs()[DriverUnity])
	assert.Equal(t, "10", ip.CSINodeIDs()[DriverPowerMax], "csi-powermax cuts it")
}

// A further csi-powerstore install on the node reports its own node ID,
// with its own prefix, under its own driver name, and is one more entry
// of the node's CSINode.
func TestNodeSpecPowerStoreInstances(t *testing.T) {
	const second = "csi-powerstore-2.dellemc.com"
	s, err := NodeSpec{Name: "worker-1", IP: "127.0.10.7", MachineID: "0123456789abcdef0123456789abcdef",
		PowerStoreInstances: []PowerStoreInstance{{Driver: second, Prefix: "k8s-b"}}}.Complete()
	require.NoError(t, err)
	ids := s.CSINodeIDs()
	assert.Equal(t, "csi-node-0123456789abcdef0123456789abcdef-127.0.10.7", ids[DriverPowerStore])
	assert.Equal(t, "k8s-b-0123456789abcdef0123456789abcdef-127.0.10.7", ids[second])
	assert.Equal(t, append(Drivers(), second), s.CSIDrivers())

	for _, bad := range [][]PowerStoreInstance{{{Driver: ""}}, {{Driver: DriverPowerStore}}, {{Driver: second}, {Driver: second}}} {
		_, err := NodeSpec{Name: "x", PowerStoreInstances: bad}.Complete()
		require.Error(t, err, "%+v", bad)
	}
	s, err = NodeSpec{Name: "x", PowerStoreInstances: []PowerStoreInstance{{Driver: second}}}.Complete()
	require.NoError(t, err)
	assert.Equal(t, DefaultPowerStorePrefix, s.PowerStoreInstances[0].Prefix)
}

func TestNodeSpecComplete(t *testing.T) {
	s, err := NodeSpec{Name: "n1"}.Complete()
	require.NoError(t, err)
	assert.Equal(t, "n1.cluster.test", s.FQDN)
	assert.Regexp(t, `^[0-9a-f]{32}$`, s.MachineID)
	assert.Regexp(t, `^[0-9A-F]{8}-[0-9A-F]{4}-4[0-9A-F]{3}-[89AB][0-9A-F]{3}-[0-9A-F]{12}$`, s.SDCGUID)
	assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, s.BootID)
	assert.Regexp(t, `^iqn\.1994-05\.com\.redhat:[0-9a-f]{12}$`, s.IQN)
	require.Len(t, s.WWPNs, 2)
	assert.Regexp(t, `^[0-9a-f]{16}$`, s.WWPNs[0])

	for _, bad := range []NodeSpec{{}, {Name: "x", IP: "10.0.0.1"}, {Name: "x", IP: "nope"}, {Name: "x", IP: "::1"}} {
		_, err := bad.Complete()
		require.Error(t, err, "%+v", bad)
	}
	_, err = NodeSpec{Name: "x", IP: "10.1.2.3"}.Complete()
	require.ErrorContains(t, err, `ip "10.1.2.3"`)

	specs := NodeSpecs("kw", 3)
	assert.Equal(t, []string{"kw-1", "kw-2", "kw-3"}, []string{specs[0].Name, specs[1].Name, specs[2].Name})
}

func TestVolumeHandleFormats(t *testing.T) {
	patterns := map[string]string{
		DriverPowerFlex:  `^[0-9a-f]{16}-[0-9a-f]{16}$`,
		DriverPowerStore: `^[0-9a-f-]{36}/PS[0-9a-f]+/scsi$`,
		DriverPowerScale: `^[^=]+=_=_=\d+=_=_=System=_=_=[^=]+$`,
		DriverPowerMax:   `^csi-[A-Z]+-pmax-[0-9a-f]+-\d{12}-[0-9A-F]{5}$`,
		DriverUnity:      `^csivol-[0-9a-f]+-iSCSI-apm\d+-sv_\d+$`,
	}
	for d, p := range patterns {
		seen := map[string]bool{}
		for i := range 3 {
			h, err := VolumeHandle(d, i)
			require.NoError(t, err)
			assert.Regexp(t, p, h, d)
			assert.False(t, seen[h], "handles must differ: %s", h)
			seen[h] = true
		}
	}
	_, err := VolumeHandle("csi.example.com", 0)
	assert.ErrorContains(t, err, "csi.example.com")
}

const auditSample = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/default/pods/db-0","verb":"delete","user":{"username":"admin","uid":"admin","groups":["system:masters","system:authenticated"]},"sourceIPs":["127.0.0.1"],"userAgent":"testbed.test","objectRef":{"resource":"pods","namespace":"default","name":"db-0","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-21T21:00:00.100000Z","stageTimestamp":"2026-11-21T21:00:00.120000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a2","stage":"ResponseComplete","requestURI":"/api/v1/nodes/worker-1","verb":"patch","user":{"username":"admin"},"objectRef":{"resource":"nodes","name":"worker-1","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-21T21:00:01Z","stageTimestamp":"2026-11-21T21:00:01.01Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a3","stage":"ResponseComplete","requestURI":"/api/v1/nodes/worker-1/status","verb":"patch","user":{"username":"kwok"},"objectRef":{"resource":"nodes","name":"worker-1","apiVersion":"v1","subresource":"status"},"responseStatus":{"metadata":{},"code":409,"status":"Failure","reason":"Conflict"},"requestReceivedTimestamp":"2026-11-21T21:00:02Z","stageTimestamp":"2026-11-21T21:00:02.01Z"}
`

func TestParseAuditLogFilters(t *testing.T) {
	all, err := ParseAuditLog(strings.NewReader(auditSample), AuditFilter{})
	require.NoError(t, err)
	require.Len(t, all, 3)
	assert.Equal(t, "delete", all[0].Verb)
	assert.Equal(t, "db-0", all[0].ObjectRef.Name)
	assert.Equal(t, time.Date(2026, 11, 21, 21, 0, 0, 100000000, time.UTC), all[0].Received)
	assert.True(t, all[0].Succeeded())
	assert.False(t, all[2].Succeeded())
	assert.Contains(t, all[0].String(), "admin delete pods default/db-0 -> 200")

	cases := []struct {
		name string
		f    AuditFilter
		ids  []string
	}{
		{"pod deletes", AuditFilter{Verb: "delete", Resource: "pods", Name: "db-0"}, []string{"a1"}},
		{"node patches", AuditFilter{Verb: "patch", Resource: "nodes"}, []string{"a2", "a3"}},
		{"object only", AuditFilter{Resource: "nodes", Subresource: "-"}, []string{"a2"}},
		{"status only", AuditFilter{Resource: "nodes", Subresource: "status"}, []string{"a3"}},
		{"by user", AuditFilter{User: "kwok"}, []string{"a3"}},
		{"succeeded", AuditFilter{Resource: "nodes", Succeeded: true}, []string{"a2"}},
		{"since", AuditFilter{Since: time.Date(2026, 11, 21, 21, 0, 1, 0, time.UTC)}, []string{"a2", "a3"}},
		{"namespace", AuditFilter{Namespace: "kube-system"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseAuditLog(strings.NewReader(auditSample), tc.f)
			require.NoError(t, err)
			var ids []string
			for _, e := range got {
				ids = append(ids, e.AuditID)
			}
			assert.Equal(t, tc.ids, ids)
		})
	}
}

func TestParseAuditLogBadLine(t *testing.T) {
	_, err := ParseAuditLog(strings.NewReader(auditSample+"{not json\n"), AuditFilter{})
	assert.ErrorContains(t, err, "line 4")
}

func TestReadAuditLogIgnoresPartialLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	require.NoError(t, os.WriteFile(path, []byte(auditSample+`{"kind":"Event","verb":"del`), 0o644))
	got, err := ReadAuditLog(path, AuditFilter{})
	require.NoError(t, err)
	assert.Len(t, got, 3)
}

func FuzzParseAuditLog(f *testing.F) {
	f.Add(auditSample)
	f.Add("{}\n\n{\"objectRef\":null}\n")
	f.Add("{\"user\":1}")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseAuditLog(strings.NewReader(s), AuditFilter{Verb: "delete", Resource: "pods", Since: time.Unix(1, 0)})
	})
}

// An NVMe/TCP node has no SDC: it gets an NQN, and its PowerFlex node ID is
// its NVMe host's name once AddNodes has set it from the Node UID.
func TestNodeSpecNVMeTCP(t *testing.T) {
	s, err := NodeSpec{Name: "n1", IP: "127.0.10.9", NVMeTCP: true}.Complete()
	require.NoError(t, err)
	assert.Empty(t, s.SDCGUID)
	assert.Regexp(t, `^nqn\.2014-08\.org\.nvmexpress:uuid:[0-9a-f-]{36}$`, s.NQN)
	assert.Empty(t, s.CSINodeIDs()[DriverPowerFlex], "named when the Node exists")
	s.NVMeHost = "127.0.10.9-0123456789abcdef0123"
	assert.Equal(t, s.NVMeHost, s.CSINodeIDs()[DriverPowerFlex])
	_, err = NodeSpec{Name: "n2", NVMeTCP: true, SDCGUID: "6B1E5A2C-0D4F-4E1A-9C3B-2A1D0E9F8C7B"}.Complete()
	require.Error(t, err)
}

// TestLightStatsWindow checks the light writer's figures over a window:
// counts are the difference of two readings, and the quantiles and the
// maximum come from the renewals in the window only.
func TestLightStatsWindow(t *testing.T) {
	w := &lightWriter{}
	w.record(5*time.Millisecond, false)
	w.record(3*time.Second, true) // before the window
	before := w.stats
	before.late = slices.Clone(w.stats.late)
	for i := range 99 {
		w.record(time.Duration(i%10)*time.Millisecond, false)
	}
	w.record(250*time.Millisecond, true)
	w.statsMu.Lock()
	w.stats.Skipped += 2
	w.statsMu.Unlock()

	d := w.stats.Since(before)
	assert.Equal(t, int64(100), d.Renewals)
	assert.Equal(t, int64(1), d.Failures)
	assert.Equal(t, int64(2), d.Skipped)
	assert.Equal(t, 250*time.Millisecond, d.MaxLateness(), "the 3 s renewal was before the window")
	assert.Equal(t, 9*time.Millisecond, d.Lateness(0.99))
	assert.Equal(t, 250*time.Millisecond, d.Lateness(1))
	assert.Equal(t, 4*time.Millisecond, d.Lateness(0.5))
	assert.Zero(t, LightStats{}.Since(LightStats{}).Lateness(0.99), "no renewals")

	w.record(time.Minute, false) // beyond the histogram
	after := w.stats.Since(before)
	assert.Equal(t, time.Minute, after.MaxLateness())
	assert.Equal(t, time.Minute, after.Lateness(1))
}
