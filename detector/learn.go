package detector

import (
	"context"
	"reflect"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/kube"
)

// learner records the identity inputs (Node + CSINode) of healthy nodes
// through the sink, so that a fence never depends on reading a dead node's
// CSINode for the first time. A few workers (recording resolves the node on
// every array, so a cold start over thousands of nodes is bound by array
// round trips); the queue never hands one node to two workers at once.
// Failed records are retried with rate limiting.
type learner struct {
	r *Runner
	q workqueue.TypedRateLimitingInterface[string]

	mu      sync.Mutex
	learned map[string]arrayclients.Node
}

// learnWorkers is how many nodes are learned at once.
const learnWorkers = 8

// A failed record is retried after learnRetryBase, doubling up to
// learnRetryMax. The bound is short on purpose: client-go's default for
// controllers grows to 16 minutes, and a node whose identities are not
// recorded cannot be fenced, so an array that was down through a cold
// start must not leave nodes unprotected long after it is back.
const (
	learnRetryBase = time.Second
	learnRetryMax  = 30 * time.Second
)

func newLearnLimiter() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[string](learnRetryBase, learnRetryMax)
}

func newLearner(r *Runner) *learner {
	return &learner{
		r: r,
		q: workqueue.NewTypedRateLimitingQueueWithConfig(
			newLearnLimiter(),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "fenced-learn-" + r.cfg.Cluster},
		),
		learned: map[string]arrayclients.Node{},
	}
}

func (l *learner) add(node string) {
	if l.r.cfg.Sink != nil && node != "" {
		l.q.Add(node)
	}
}

func (l *learner) shutdown() { l.q.ShutDown() }

func (l *learner) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		l.q.ShutDown()
	}()
	var wg sync.WaitGroup
	for range learnWorkers {
		wg.Go(func() { l.work(ctx) })
	}
	wg.Wait()
}

func (l *learner) work(ctx context.Context) {
	for {
		name, quit := l.q.Get()
		if quit {
			return
		}
		if err := l.learn(ctx, name); err != nil && ctx.Err() == nil {
			l.r.log.Warn("record node identity inputs", "node", name, "error", err)
			l.q.AddRateLimited(name)
		} else {
			l.q.Forget(name)
		}
		l.q.Done(name)
	}
}

// learn records the node's inputs if it is Healthy and they changed since
// the last record.
func (l *learner) learn(ctx context.Context, name string) error {
	node, ok := l.r.cfg.API.Node(name)
	if !ok {
		l.mu.Lock()
		delete(l.learned, name)
		l.mu.Unlock()
		return nil
	}
	l.r.mu.Lock()
	state := l.r.verdicts[name]
	l.r.mu.Unlock()
	if state != Healthy {
		return nil
	}
	csi, _ := l.r.cfg.API.CSINode(name)
	in := kube.NodeInputs(l.r.cfg.Cluster, node, csi)
	l.mu.Lock()
	prev, ok := l.learned[name]
	l.mu.Unlock()
	if ok && reflect.DeepEqual(prev, in) {
		return nil
	}
	if err := l.r.cfg.Sink.RecordNodeInputs(ctx, in); err != nil {
		return err
	}
	l.mu.Lock()
	l.learned[name] = in
	l.mu.Unlock()
	return nil
}
