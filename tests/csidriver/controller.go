package csidriver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"sync"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// Errors a controller returns, wrapped with what it was doing. They stand
// for the gRPC codes the drivers answer with.
var (
	// ErrAlreadyPublished: a single-node volume is still given to another
	// node on the array (the drivers' FailedPrecondition "already
	// published" / "present in a different lun mapping").
	ErrAlreadyPublished = errors.New("volume already published to another node")
	// ErrNotFound: the volume or the node's host does not exist on the
	// array (codes.NotFound).
	ErrNotFound = errors.New("not found")
	// ErrUnsupported: the emulation does not implement this (a protocol or
	// handle form the driver supports but the simulators do not).
	ErrUnsupported = errors.New("not supported by the emulated driver")
	// ErrInvalid: a malformed request (codes.InvalidArgument).
	ErrInvalid = errors.New("invalid argument")
)

// Controller is the controller service of one Dell CSI driver.
type Controller interface {
	// Driver is the CSI driver name the controller serves.
	Driver() string
	// CreateVolume provisions a volume named name of at least size bytes
	// and returns its volume handle, in the driver's format, naming the
	// array as the driver's configuration does. Creating a name that
	// exists returns the existing volume's handle (CSI idempotence).
	CreateVolume(ctx context.Context, name string, size int64, protocol arrayclients.Protocol) (string, error)
	// ControllerPublish gives the node (its CSI node ID, as the node
	// plugin reports it in CSINode) access to the volume. multiNode is a
	// ReadWriteMany or ReadOnlyMany access mode; without it a volume the
	// array gives to another node is refused with ErrAlreadyPublished.
	// Publishing to the node that has it already succeeds.
	ControllerPublish(ctx context.Context, handle, nodeID string, multiNode bool) error
	// ControllerUnpublish takes the node's access to the volume away. A
	// volume that is gone or not given to the node succeeds.
	ControllerUnpublish(ctx context.Context, handle, nodeID string) error
}

// PublishedNodesLister is a controller that can answer ListVolumes with
// each volume's published node IDs, as the external-attacher's
// VolumeAttachment reconciler reads it (kubernetes-csi/external-attacher
// pkg/controller/csi_handler.go ReconcileVA).
type PublishedNodesLister interface {
	// ListVolumesPublishedNodes maps every volume handle the driver lists
	// to the node IDs it reports the volume published to. ok is false
	// when the driver does not advertise both LIST_VOLUMES and
	// LIST_VOLUMES_PUBLISHED_NODES; the sidecar then never reconciles.
	ListVolumesPublishedNodes(ctx context.Context) (published map[string][]string, ok bool, err error)
}

// Registry maps CSI driver names to their emulated controllers. It is safe
// for concurrent use.
type Registry struct {
	mu sync.RWMutex
	m  map[string]Controller
}

// NewRegistry returns a registry holding cs.
func NewRegistry(cs ...Controller) *Registry {
	r := &Registry{m: map[string]Controller{}}
	for _, c := range cs {
		r.Register(c)
	}
	return r
}

// Register adds (or replaces) the controller of c.Driver().
func (r *Registry) Register(c Controller) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]Controller{}
	}
	r.m[c.Driver()] = c
}

// Unregister removes the controller of a driver, for tests whose volumes
// of that driver are on an array no emulated controller serves.
func (r *Registry) Unregister(driver string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, driver)
}

// Lookup returns the controller of a driver.
func (r *Registry) Lookup(driver string) (Controller, bool) {
	if r == nil {
		return nil, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.m[driver]
	return c, ok
}

// Drivers lists the registered driver names, sorted.
func (r *Registry) Drivers() []string {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.m))
	for d := range r.m {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// AuditTag prefixes the remote address of every request that reaches a
// simulator through Tag, so audit entries of the emulated drivers read
// "csi/127.0.0.1:port".
const AuditTag = "csi"

// Tag serves h with the remote address prefixed by AuditTag.
func Tag(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.RemoteAddr = AuditTag + "/" + r.RemoteAddr
		h.ServeHTTP(w, r)
	})
}

// IsDriverRequest reports whether an audit entry's remote address is one
// Tag wrote.
func IsDriverRequest(remote string) bool {
	return len(remote) > len(AuditTag) && remote[:len(AuditTag)+1] == AuditTag+"/"
}

// Serve starts a loopback listener (HTTPS with a generated CA in certDir
// when useTLS) that serves the simulator h to the emulated driver, tagged.
func Serve(h http.Handler, useTLS bool, certDir string) (*simcore.Listener, error) {
	if useTLS {
		if err := os.MkdirAll(certDir, 0o755); err != nil {
			return nil, fmt.Errorf("serve a simulator to the emulated driver: %w", err)
		}
	}
	l, err := simcore.Serve(Tag(h), "127.0.0.1:0", useTLS, certDir)
	if err != nil {
		return nil, fmt.Errorf("serve a simulator to the emulated driver: %w", err)
	}
	return l, nil
}
