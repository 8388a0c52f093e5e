package stonith

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"time"
)

// arraySlots bounds the pipeline's calls in flight to each array, across
// every node being fenced or restored at once. A call over the bound waits
// here, in fenced, rather than at the array, where it would run into its
// deadline and be retried.
//
// A freed slot goes to the waiting call of the oldest fence (the lowest
// rank, its record's open time), not to the call that queued first. In a
// storm of many fences at once every fence then finishes in the order it
// opened, instead of all of them advancing a step at a time and finishing
// together at the end: the first nodes' pods restart as early as the
// arrays allow.
type arraySlots struct {
	waiting func(array string, delta int)
	// queues is built once and only read after; each queue has its lock.
	queues map[string]*slotQueue
}

// slotQueue is one array's slots and the calls waiting for them.
type slotQueue struct {
	mu      sync.Mutex
	free    int
	seq     uint64
	waiters waiterHeap
}

// slotWaiter is one call waiting for a slot; ready is closed when the slot
// is handed to it.
type slotWaiter struct {
	rank  time.Time
	seq   uint64
	ready chan struct{}
	index int // in the heap; -1 once handed a slot or gone
}

func newArraySlots(limits map[string]int, waiting func(array string, delta int)) *arraySlots {
	s := &arraySlots{queues: make(map[string]*slotQueue, len(limits)), waiting: waiting}
	for name, n := range limits {
		s.queues[name] = &slotQueue{free: n}
	}
	return s
}

// do runs fn holding one of the array's slots. It waits for a slot until
// ctx ends; among waiting calls, the one of the lowest rank (the oldest
// fence; the zero time ranks first) gets the next slot, then the one that
// queued first. The deadline of the array call inside fn must start after
// the slot is taken, and so must the leadership check before a write: a
// write then starts no later than one check plus the call's deadline after
// the check, however long it queued.
func (s *arraySlots) do(ctx context.Context, array string, rank time.Time, fn func() error) error {
	q, ok := s.queues[array]
	if !ok {
		return fmt.Errorf("array %s is not configured on this replica", array)
	}
	q.mu.Lock()
	if q.free > 0 {
		q.free--
		q.mu.Unlock()
	} else {
		q.seq++
		w := &slotWaiter{rank: rank, seq: q.seq, ready: make(chan struct{})}
		heap.Push(&q.waiters, w)
		q.mu.Unlock()
		s.waiting(array, 1)
		select {
		case <-w.ready:
			s.waiting(array, -1)
		case <-ctx.Done():
			s.waiting(array, -1)
			q.mu.Lock()
			handed := w.index < 0
			if !handed {
				heap.Remove(&q.waiters, w.index)
			}
			q.mu.Unlock()
			if handed { // the slot came as ctx ended: pass it on
				q.release()
			}
			return fmt.Errorf("wait for a free call slot of array %s: %w", array, ctx.Err())
		}
	}
	defer q.release()
	return fn()
}

// spare takes one of the array's slots only if one is free and no call
// waits for it (a spare never overtakes a waiting fence), for a part of a
// call that runs beside it (arrayclients.SpareCalls). It never blocks.
func (s *arraySlots) spare(array string) (release func(), ok bool) {
	q, has := s.queues[array]
	if !has {
		return nil, false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.free == 0 || q.waiters.Len() > 0 {
		return nil, false
	}
	q.free--
	return sync.OnceFunc(q.release), true
}

// release hands the slot to the first waiting call, or frees it.
func (q *slotQueue) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.waiters.Len() == 0 {
		q.free++
		return
	}
	w, _ := heap.Pop(&q.waiters).(*slotWaiter)
	close(w.ready)
}

// waiterHeap orders waiting calls by rank, then arrival (container/heap).
type waiterHeap []*slotWaiter

func (h waiterHeap) Len() int { return len(h) }

func (h waiterHeap) Less(i, j int) bool {
	if !h[i].rank.Equal(h[j].rank) {
		return h[i].rank.Before(h[j].rank)
	}
	return h[i].seq < h[j].seq
}

func (h waiterHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *waiterHeap) Push(x any) {
	w, _ := x.(*slotWaiter)
	w.index = len(*h)
	*h = append(*h, w)
}

func (h *waiterHeap) Pop() any {
	old := *h
	n := len(old)
	w := old[n-1]
	old[n-1] = nil
	w.index = -1
	*h = old[:n-1]
	return w
}
