package powerflex

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/dell/goscaleio"
	"github.com/dell/goscaleio/api"
	siotypes "github.com/dell/goscaleio/types/v1"

	"github.com/fenced-project/fenced/arrayclients"
)

// goscaleio v1.23.0 has two kinds of shared state a concurrent caller must
// respect:
//
//   - The Accept/Content-Type version header lives in package variables.
//     NewClientWithArgs and the first Authenticate of a client built without
//     a version write them; every request reads them without a lock.
//   - Client.WithContext stores the context in the client, and every call
//     resets it when it returns: one client serves one call at a time.
//
// So this file keeps the one piece of package-level state in this package,
// powerFlexGate, mirroring goscaleio's globals: building clients and the
// version-discovering first login hold it exclusively, every other
// goscaleio call holds it shared. Exclusive sections happen once per
// adapter (at the first successful connect) plus one short one per
// reconnect attempt after a failure (rate limited). Each adapter owns a pool
// of clients; a call leases one, sets its context right before each library
// call, and returns it.
var powerFlexGate sync.RWMutex

// powerFlexClients is the size of each adapter's client pool: how many
// calls to one array run at once.
const powerFlexClients = 8

// powerFlexReconnectEvery rate-limits connect attempts to an array that
// failed, so an unreachable array does not keep taking powerFlexGate.
const powerFlexReconnectEvery = time.Second

type powerFlexConn struct {
	c      *goscaleio.Client
	authed bool
	// raw sends the sweep's GETs with c's session (rawget.go); built on
	// first use.
	raw api.Client
}

// powerFlexPool is an adapter's clients.
type powerFlexPool struct {
	cfg     arrayclients.Config
	seconds int64

	mu       sync.Mutex // guards version, lastFail, lastErr and filling idle
	version  string
	lastFail time.Time
	lastErr  error
	idle     chan *powerFlexConn
}

func newPowerFlexPool(cfg arrayclients.Config) *powerFlexPool {
	return &powerFlexPool{
		cfg:     cfg,
		seconds: int64(math.Ceil(cfg.RequestTimeout.Seconds())),
		idle:    make(chan *powerFlexConn, powerFlexClients),
	}
}

func (p *powerFlexPool) newClient(version string) (*goscaleio.Client, error) {
	c, err := goscaleio.NewClientWithArgs(p.cfg.Endpoint, version, p.seconds, p.cfg.Insecure, false, p.cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("%w: build PowerFlex client for %s: %w", arrayclients.ErrUnreachable, p.cfg.Endpoint, err)
	}
	return c, nil
}

func (p *powerFlexPool) connectConfig() *goscaleio.ConfigConnect {
	return &goscaleio.ConfigConnect{Endpoint: p.cfg.Endpoint, Username: p.cfg.Username, Password: p.cfg.Password}
}

// connect logs the first client in (learning the API version) and builds
// the rest of the pool. It returns the API version.
func (p *powerFlexPool) connect(ctx context.Context) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.version != "" {
		return p.version, nil
	}
	if p.lastErr != nil && time.Since(p.lastFail) < powerFlexReconnectEvery {
		return "", p.lastErr
	}
	version, err := p.connectLocked(ctx)
	if err != nil {
		p.lastFail, p.lastErr = time.Now(), err
		return "", err
	}
	p.version, p.lastErr = version, nil
	return version, nil
}

func (p *powerFlexPool) connectLocked(ctx context.Context) (string, error) {
	powerFlexGate.Lock()
	defer powerFlexGate.Unlock()
	first, err := p.newClient("")
	if err != nil {
		return "", err
	}
	if _, err := first.WithContext(ctx).Authenticate(p.connectConfig()); err != nil {
		return "", powerFlexClassify(fmt.Errorf("log in to PowerFlex %s: %w", p.cfg.Endpoint, err))
	}
	version := first.GetConfigConnect().Version
	p.idle <- &powerFlexConn{c: first, authed: true}
	for range powerFlexClients - 1 {
		c, err := p.newClient(version)
		if err != nil {
			return "", err
		}
		p.idle <- &powerFlexConn{c: c}
	}
	return version, nil
}

// with leases a logged-in client for fn. fn must make its library calls
// through the powerFlexCall it gets, which sets the context on each.
func (p *powerFlexPool) with(ctx context.Context, fn func(k powerFlexCall) error) error {
	if _, err := p.connect(ctx); err != nil {
		return err
	}
	var conn *powerFlexConn
	select {
	case conn = <-p.idle:
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for a PowerFlex client: %w", arrayclients.ErrUnreachable, ctx.Err())
	}
	defer func() { p.idle <- conn }()
	powerFlexGate.RLock()
	defer powerFlexGate.RUnlock()
	if !conn.authed {
		if _, err := conn.c.WithContext(ctx).Authenticate(p.connectConfig()); err != nil {
			return powerFlexClassify(fmt.Errorf("log in to PowerFlex %s: %w", p.cfg.Endpoint, err))
		}
		conn.authed = true
	}
	return powerFlexClassify(fn(powerFlexCall{ctx: ctx, p: p, conn: conn}))
}

// each runs fn for every item, on the leased call k and on as many more
// of the pool's clients as are idle now (at most one per item), each also
// taking a spare call from the context (SpareCalls): a fence's per-volume
// calls run side by side, and the pool and the pipeline's call slots still
// bound how many requests reach the array at once. It never waits for a
// client or a spare call, so fences holding one each cannot wait on one
// another. It must run inside with (which holds powerFlexGate shared). The
// error is the first item's in the items' order.
func each[T any](p *powerFlexPool, k powerFlexCall, items []T, fn func(k powerFlexCall, item T) error) error {
	calls := []powerFlexCall{k}
	var leased []*powerFlexConn
	var releases []func()
	defer func() {
		for _, c := range leased {
			p.idle <- c
		}
		for _, r := range releases {
			r()
		}
	}()
	for len(calls) < len(items) {
		release, ok := arrayclients.SpareCall(k.ctx)
		if !ok {
			break
		}
		releases = append(releases, release)
		var conn *powerFlexConn
		select {
		case conn = <-p.idle:
		default:
		}
		if conn == nil {
			break
		}
		leased = append(leased, conn)
		if !conn.authed {
			if _, err := conn.c.WithContext(k.ctx).Authenticate(p.connectConfig()); err != nil {
				break // the calls leased so far do the work
			}
			conn.authed = true
		}
		calls = append(calls, powerFlexCall{ctx: k.ctx, p: p, conn: conn})
	}
	errs := make([]error, len(items))
	next := make(chan int, len(items))
	for i := range items {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Go(func() {
			for i := range next {
				errs[i] = fn(c, items[i])
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// powerFlexCall is a leased connection plus the call's context.
type powerFlexCall struct {
	ctx context.Context
	// p is the pool conn was leased from.
	p    *powerFlexPool
	conn *powerFlexConn
}

// client sets the context for the next library call and returns the client.
func (k powerFlexCall) client() *goscaleio.Client { return k.conn.c.WithContext(k.ctx) }

func (k powerFlexCall) systems() ([]*siotypes.System, error) {
	return k.client().GetInstance("")
}

func (k powerFlexCall) system(s *siotypes.System) *goscaleio.System {
	sys := goscaleio.NewSystem(k.conn.c)
	sys.System = s
	return sys
}

func (k powerFlexCall) sdcs(s *siotypes.System) ([]siotypes.Sdc, error) {
	k.client()
	return k.system(s).GetSdc()
}

func (k powerFlexCall) sdcByID(id string) (*goscaleio.Sdc, error) {
	k.client()
	return k.system(&siotypes.System{}).GetSdcByID(id)
}

func (k powerFlexCall) sdcVolumes(sdc *goscaleio.Sdc) ([]*siotypes.Volume, error) {
	k.client()
	return sdc.GetVolume()
}

func (k powerFlexCall) volume(id string) *goscaleio.Volume {
	v := goscaleio.NewVolume(k.client())
	v.Volume.ID = id
	return v
}

func (k powerFlexCall) unmap(volID, sdcID string) error {
	return k.volume(volID).UnmapVolumeSdc(&siotypes.UnmapVolumeSdcParam{SdcID: sdcID, IgnoreScsiInitiators: "TRUE"})
}

// mapVolume maps a volume to an SDC. allowMultiple is the MDM's
// allowMultipleMappings: csi-vxflexos sets it only for multi-node access
// modes (dell/csi-powerflex service/controller.go
// shouldAllowMultipleMappings); without it the MDM refuses to map a volume
// another SDC has.
func (k powerFlexCall) mapVolume(volID, sdcID, mode string, allowMultiple bool) error {
	allow := "FALSE"
	if allowMultiple {
		allow = "TRUE"
	}
	return k.volume(volID).MapVolumeSdc(&siotypes.MapVolumeSdcParam{
		SdcID: sdcID, AllowMultipleMappings: allow, AccessMode: mode,
	})
}

// volumeByID reads one volume (GET /api/instances/Volume::<id>, as
// csi-vxflexos reads a volume before publishing it: dell/csi-powerflex
// service/controller.go). found is false when the MDM has no such volume.
func (k powerFlexCall) volumeByID(id string) (vol *siotypes.Volume, found bool, err error) {
	vols, err := k.client().GetVolume("", id, "", "", false)
	if powerFlexIs(err, pflexMsgNoVolume) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if len(vols) != 1 || vols[0] == nil || vols[0].ID != id {
		return nil, false, fmt.Errorf("read volume %s: the gateway answered with %d volumes", id, len(vols))
	}
	return vols[0], true, nil
}

func (k powerFlexCall) setLimits(volID, sdcID string, iops, bwMbps int) error {
	return k.volume(volID).SetMappedSdcLimits(&siotypes.SetMappedSdcLimitsParam{
		SdcID: sdcID, IopsLimit: fmt.Sprint(iops), BandwidthLimitInKbps: fmt.Sprint(bwMbps * 1024),
	})
}

// PowerFlex MDM messages the adapter acts on.
const (
	pflexMsgNotMapped     = "not mapped to SDC"
	pflexMsgAlreadyMapped = "already mapped to this SDC"
	pflexMsgNoSdc         = "Could not find the SDC"
	pflexMsgNoVolume      = "Could not find the volume"
)

// powerFlexAPIError returns the PowerFlex error in err's chain.
func powerFlexAPIError(err error) (*siotypes.Error, bool) {
	var e *siotypes.Error
	if errors.As(err, &e) && e != nil {
		return e, true
	}
	return nil, false
}

// powerFlexIs reports whether err is a PowerFlex error whose message
// contains msg.
func powerFlexIs(err error, msg string) bool {
	e, ok := powerFlexAPIError(err)
	return ok && strings.Contains(e.Error(), msg)
}

// powerFlexClassify marks errors that mean the array could not be reached,
// did not authenticate or was briefly unable to answer with ErrUnreachable.
// The gateway reports MDM command failures (not found, not mapped) as 500:
// those stay as they are.
func powerFlexClassify(err error) error {
	if err == nil || errors.Is(err, arrayclients.ErrUnreachable) {
		return err
	}
	if e, ok := powerFlexAPIError(err); ok {
		switch e.HTTPStatusCode {
		case http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests,
			http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return fmt.Errorf("%w: HTTP %d: %w", arrayclients.ErrUnreachable, e.HTTPStatusCode, err)
		}
		return err
	}
	// goscaleio formats a failed re-login with %s, losing the chain.
	if strings.HasPrefix(err.Error(), "Error Authenticating") || strings.Contains(err.Error(), "error getting version") {
		return fmt.Errorf("%w: %w", arrayclients.ErrUnreachable, err)
	}
	if arrayclients.IsTransient(err) {
		return fmt.Errorf("%w: %w", arrayclients.ErrUnreachable, err)
	}
	return err
}

// apiVersion returns the API version learned at login ("" before).
func (p *powerFlexPool) apiVersion() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.version
}
