package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Proxy names. Every path a replica uses goes through one proxy.
func raftProxy(from, to string) string { return "raft:" + from + ">" + to }
func apiProxy(replica string) string   { return "api:" + replica }
func arrayProxy(replica, array string) string {
	return "array:" + replica + ">" + array
}

// Net is the in-process toxiproxy server holding every proxy of a run.
type Net struct {
	server *toxiproxy.ApiServer

	mu      sync.Mutex
	proxies map[string]*toxiproxy.Proxy
}

// NewNet starts an empty proxy collection.
func NewNet() *Net {
	return &Net{
		server:  toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop()),
		proxies: map[string]*toxiproxy.Proxy{},
	}
}

// Add starts a proxy on a free loopback port forwarding to upstream and
// returns the address it listens on.
func (n *Net) Add(name, upstream string) (string, error) {
	p := toxiproxy.NewProxy(n.server, name, "127.0.0.1:0", upstream)
	if err := n.server.Collection.Add(p, true); err != nil {
		return "", fmt.Errorf("proxy %s to %s: %w", name, upstream, err)
	}
	n.mu.Lock()
	n.proxies[name] = p
	n.mu.Unlock()
	return p.Listen, nil
}

// Addr returns the address a proxy listens on.
func (n *Net) Addr(name string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p, ok := n.proxies[name]; ok {
		return p.Listen
	}
	return ""
}

// Names returns the proxies whose names match the filter.
func (n *Net) Names(match func(string) bool) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for name := range n.proxies {
		if match(name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Cut black-holes the named proxies in both directions: bytes are dropped
// and connections stay open, as in a real partition.
func (n *Net) Cut(names ...string) error {
	for _, name := range names {
		p, err := n.proxy(name)
		if err != nil {
			return err
		}
		for _, stream := range []string{"upstream", "downstream"} {
			if p.Toxics.GetToxic("cut-"+stream) != nil {
				continue
			}
			_, err := p.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
				`{"name":"cut-%s","type":"timeout","stream":%q,"toxicity":1,"attributes":{"timeout":0}}`, stream, stream)))
			if err != nil {
				return fmt.Errorf("cut %s: %w", name, err)
			}
		}
	}
	return nil
}

// Latency delays the named proxies' traffic in both directions.
func (n *Net) Latency(d time.Duration, names ...string) error {
	for _, name := range names {
		p, err := n.proxy(name)
		if err != nil {
			return err
		}
		for _, stream := range []string{"upstream", "downstream"} {
			_ = p.Toxics.RemoveToxic(context.Background(), "latency-"+stream)
			_, err := p.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
				`{"name":"latency-%s","type":"latency","stream":%q,"toxicity":1,"attributes":{"latency":%d}}`,
				stream, stream, d.Milliseconds())))
			if err != nil {
				return fmt.Errorf("latency on %s: %w", name, err)
			}
		}
	}
	return nil
}

// Heal removes every toxic from the named proxies (all proxies when none
// is named).
func (n *Net) Heal(names ...string) {
	if len(names) == 0 {
		names = n.Names(func(string) bool { return true })
	}
	for _, name := range names {
		if p, err := n.proxy(name); err == nil {
			p.Toxics.ResetToxics(context.Background())
		}
	}
}

func (n *Net) proxy(name string) (*toxiproxy.Proxy, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p, ok := n.proxies[name]
	if !ok {
		return nil, fmt.Errorf("no proxy %q", name)
	}
	return p, nil
}

// Close stops every proxy.
func (n *Net) Close() { _ = n.server.Collection.Clear() }

// ArrayProxy names the proxy between a replica and an array (for Net's
// Cut, Latency and Heal).
func ArrayProxy(replica, array string) string { return arrayProxy(replica, array) }
