package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"

	"github.com/fenced-project/fenced/tests/e2e"
)

// profileSegment is the length of one CPU profile request: the
// kube-apiserver answers a non-long-running request within 60 s, so the
// storm window is profiled in consecutive segments, merged when read.
const profileSegment = 30 * time.Second

// ProcessProfile is where one process's CPU time went during the storm:
// CPU profiles taken from the power-off until every dying node's pods
// were evicted.
type ProcessProfile struct {
	Process string `json:"process"`
	// Files are the raw profiles (pprof protobuf), relative to the
	// profile directory; `go tool pprof -top` merges them.
	Files []string `json:"files,omitempty"`
	// WindowSeconds is the wall time profiled; CPUSeconds the CPU time
	// sampled in it.
	WindowSeconds float64   `json:"windowSeconds"`
	CPUSeconds    float64   `json:"cpuSeconds"`
	Top           []TopFunc `json:"top,omitempty"`
	Error         string    `json:"error,omitempty"`
}

// TopFunc is one function of a profile's top list, in CPU seconds.
type TopFunc struct {
	Function string  `json:"function"`
	Flat     float64 `json:"flatSeconds"`
	Cum      float64 `json:"cumSeconds"`
}

// profileTarget is one process to profile: URL of its
// /debug/pprof/profile and the client that may read it.
type profileTarget struct {
	name, url, token string
	client           *http.Client
	// self: this process, profiled with runtime/pprof (url, token and
	// client unused).
	self bool
}

// stormProfiler takes CPU profiles of the replicas and the kube-apiserver
// from start until stop.
type stormProfiler struct {
	dir string
	// segLen is the length of each profile (profileSegment).
	segLen   time.Duration
	targets  []profileTarget
	stopping atomic.Bool
	wg       sync.WaitGroup
	start    time.Time
	mu       sync.Mutex
	files    map[string][]string
	errs     map[string]string
	// cpuStart is every process's CPU time at Start (processCPU).
	cpuStart map[int]procCPU
}

// newStormProfiler prepares the profiles of h's replicas (their
// http.pprof must be on) and of its control plane's kube-apiserver (with
// the admin's credentials), written under dir.
func newStormProfiler(h *e2e.Harness, dir string) (*stormProfiler, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("storm profile directory: %w", err)
	}
	tok, err := os.ReadFile(h.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("read the operator token for the profiles: %w", err)
	}
	sp := &stormProfiler{dir: dir, segLen: profileSegment, files: map[string][]string{}, errs: map[string]string{}}
	plain := &http.Client{Timeout: profileSegment + 30*time.Second}
	for _, id := range h.IDs {
		sp.targets = append(sp.targets, profileTarget{name: "fenced-" + id, url: h.Replicas[id].HTTPURL + "/debug/pprof/profile",
			token: strings.TrimSpace(string(tok)), client: plain})
	}
	kc, err := rest.HTTPClientFor(h.CP.RESTConfig)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver client for the profiles: %w", err)
	}
	kc.Timeout = profileSegment + 30*time.Second
	sp.targets = append(sp.targets, profileTarget{name: "kube-apiserver", url: h.CP.APIServerURL + "/debug/pprof/profile", client: kc})
	// The bench process itself: the five array simulators (whose
	// answers set the fences' pace), the harness and the status polls.
	sp.targets = append(sp.targets, profileTarget{name: benchProcess, self: true})
	return sp, nil
}

// Start begins profiling every target, one segment after another, until
// Stop.
func (sp *stormProfiler) Start(ctx context.Context) {
	sp.start = time.Now()
	sp.cpuStart = processCPU(os.Getpid())
	for _, t := range sp.targets {
		sp.wg.Add(1)
		go func() {
			defer sp.wg.Done()
			for i := 0; ctx.Err() == nil && !sp.stopping.Load(); i++ {
				name := fmt.Sprintf("%s-%02d.pb.gz", t.name, i)
				if err := sp.segment(ctx, t, filepath.Join(sp.dir, name)); err != nil {
					sp.mu.Lock()
					sp.errs[t.name] = err.Error()
					sp.mu.Unlock()
					return
				}
				sp.mu.Lock()
				sp.files[t.name] = append(sp.files[t.name], name)
				sp.mu.Unlock()
			}
		}()
		if t.token == "" {
			continue
		}
		// Where a replica's goroutines wait: a CPU profile shows only
		// what runs, and a storm's fence pipeline mostly waits.
		sp.wg.Add(1)
		go func() {
			defer sp.wg.Done()
			for i := 0; ctx.Err() == nil && !sp.stopping.Load(); i++ {
				path := filepath.Join(sp.dir, fmt.Sprintf("%s-goroutines-%03d.txt", t.name, i))
				if err := sp.goroutines(ctx, t, path); err != nil {
					return
				}
				select {
				case <-ctx.Done():
				case <-time.After(goroutineEvery):
				}
			}
		}()
	}
}

// goroutineEvery is how often the goroutines of each replica are dumped.
const goroutineEvery = 5 * time.Second

// goroutines writes t's goroutine dump (stacks grouped, with counts) to
// path.
func (sp *stormProfiler) goroutines(ctx context.Context, t profileTarget, path string) error {
	u := strings.TrimSuffix(t.url, "/profile") + "/goroutine?debug=1"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("goroutines %s: %w", t.name, err)
	}
	req.Header.Set("Authorization", "Bearer "+t.token)
	resp, err := t.client.Do(req)
	if err != nil {
		return fmt.Errorf("goroutines %s: %w", t.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("goroutines %s: read: %w", t.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("goroutines %s: %s", t.name, resp.Status)
	}
	return os.WriteFile(path, body, 0o644)
}

// segment takes one CPU profile of t into path.
func (sp *stormProfiler) segment(ctx context.Context, t profileTarget, path string) error {
	if t.self {
		return sp.selfSegment(ctx, path)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url+"?seconds="+strconv.Itoa(int(sp.segLen/time.Second)), nil)
	if err != nil {
		return fmt.Errorf("profile %s: %w", t.name, err)
	}
	if t.token != "" {
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return fmt.Errorf("profile %s: %w", t.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("profile %s: read: %w", t.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s: %s", t.name, resp.Status, bytes.TrimSpace(body))
	}
	if err := os.WriteFile(path, body, 0o644); err != nil {
		return fmt.Errorf("profile %s: %w", t.name, err)
	}
	return nil
}

// selfSegment takes one CPU profile of this process into path, as long
// as the others' segments.
func (sp *stormProfiler) selfSegment(ctx context.Context, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("profile %s: %w", benchProcess, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("profile %s: %w", benchProcess, err)
	}
	t := time.NewTimer(sp.segLen)
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	t.Stop()
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		return fmt.Errorf("profile %s: %w", benchProcess, err)
	}
	return nil
}

// benchProcess names this process's profile.
const benchProcess = "bench (array simulators, harness)"

// Stop ends the profiles once the segment under way completes (a
// cancelled profile request returns nothing) and reads where each
// process's time went.
func (sp *stormProfiler) Stop() ([]ProcessProfile, []ProcessCPU) {
	sp.stopping.Store(true)
	sp.wg.Wait()
	cpu := cpuSince(sp.cpuStart, processCPU(os.Getpid()), time.Since(sp.start))
	var out []ProcessProfile
	for _, t := range sp.targets {
		p := ProcessProfile{Process: t.name, Files: sp.files[t.name], Error: sp.errs[t.name]}
		p.WindowSeconds = float64(len(p.Files)) * sp.segLen.Seconds()
		if len(p.Files) > 0 {
			var paths []string
			for _, f := range p.Files {
				paths = append(paths, filepath.Join(sp.dir, f))
			}
			cpu, top, err := pprofTop(paths, 10)
			if err != nil {
				p.Error = strings.TrimSpace(p.Error + " " + err.Error())
			}
			p.CPUSeconds, p.Top = cpu, top
		}
		out = append(out, p)
	}
	return out, cpu
}

// pprofTop reads the merged profiles at paths with `go tool pprof -top`:
// the CPU seconds sampled and the n functions with the most flat time.
func pprofTop(paths []string, n int) (float64, []TopFunc, error) {
	args := append([]string{"tool", "pprof", "-top", "-unit=s", "-nodecount=" + strconv.Itoa(n)}, paths...)
	var stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		return 0, nil, fmt.Errorf("go tool pprof -top: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return parsePprofTop(string(outb), n)
}

// parsePprofTop parses `go tool pprof -top -unit=s` output.
func parsePprofTop(text string, n int) (float64, []TopFunc, error) {
	var total float64
	var top []TopFunc
	inTable := false
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if _, rest, ok := strings.Cut(line, "Total samples = "); ok {
			v, _, _ := strings.Cut(rest, " ")
			d, err := pprofSeconds(v)
			if err != nil {
				return 0, nil, fmt.Errorf("pprof total %q: %w", v, err)
			}
			total = d
			continue
		}
		if strings.HasPrefix(line, "flat ") {
			inTable = true
			continue
		}
		if !inTable || len(top) >= n {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		flat, err1 := pprofSeconds(f[0])
		cum, err2 := pprofSeconds(f[3])
		if err1 != nil || err2 != nil {
			return 0, nil, fmt.Errorf("pprof top line %q: not seconds", line)
		}
		top = append(top, TopFunc{Function: strings.Join(f[5:], " "), Flat: flat, Cum: cum})
	}
	return total, top, nil
}

// pprofSeconds parses a pprof time value ("1.25s", "450ms", "2.1mins").
func pprofSeconds(v string) (float64, error) {
	v = strings.Replace(strings.Replace(v, "mins", "m", 1), "hrs", "h", 1)
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, err
	}
	return d.Seconds(), nil
}

// renderStormProfiles is the storm section's "where the time goes" table.
func renderStormProfiles(ps []ProcessProfile) string {
	if len(ps) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Where the time goes: CPU profiles of each process from the power-off until all were evicted " +
		"(consecutive 30 s segments; `-storm-profile DIR`, raw profiles there; CPU seconds sampled, top functions by flat seconds).\n\n" +
		"| Process | Profiled s | CPU s | Top functions (flat s) |\n|---|---|---|---|\n")
	for _, p := range ps {
		var fs []string
		for i, f := range p.Top {
			if i == 5 {
				break
			}
			fs = append(fs, fmt.Sprintf("%s %.2f", f.Function, f.Flat))
		}
		cell := strings.Join(fs, "; ")
		if p.Error != "" {
			cell = strings.TrimSpace(cell + " (" + p.Error + ")")
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.1f | %s |\n", p.Process, p.WindowSeconds, p.CPUSeconds, strings.ReplaceAll(cell, "|", "\\|"))
	}
	b.WriteString("\n")
	return b.String()
}
