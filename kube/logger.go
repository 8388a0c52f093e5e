package kube

import (
	"context"
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// ContextWithLogger returns ctx carrying l as the logger client-go uses for
// what it meets under ctx: informers started with ctx (Watcher.Start,
// Footprints.Start) report a failing list or watch ("Failed to watch")
// through it, so the record carries l's attributes (the cluster) instead
// of going to the process-wide klog logger without them.
func ContextWithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return klog.NewContext(ctx, logr.FromSlogHandler(l.Handler()))
}

// runInformers runs each informer with ctx (and so with its logger) until
// ctx ends, and returns at once.
func runInformers(ctx context.Context, infs ...cache.SharedIndexInformer) {
	for _, inf := range infs {
		go inf.RunWithContext(ctx)
	}
}
