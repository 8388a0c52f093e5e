package stonith

import (
	"context"
	"fmt"
)

// arraySlots bounds the pipeline's calls in flight to each array, across
// every node being fenced or restored at once. A call over the bound waits
// here, in fenced, rather than at the array, where it would run into its
// deadline and be retried. The map is built once and only read after.
type arraySlots struct {
	sems    map[string]chan struct{}
	waiting func(array string, delta int)
}

func newArraySlots(limits map[string]int, waiting func(array string, delta int)) *arraySlots {
	s := &arraySlots{sems: make(map[string]chan struct{}, len(limits)), waiting: waiting}
	for name, n := range limits {
		s.sems[name] = make(chan struct{}, n)
	}
	return s
}

// do runs fn holding one of the array's slots. It waits for a slot until
// ctx ends. The deadline of the array call inside fn must start after the
// slot is taken, and so must the leadership check before a write: a write
// then starts no later than one check plus the call's deadline after the
// check, however long it queued.
func (s *arraySlots) do(ctx context.Context, array string, fn func() error) error {
	sem, ok := s.sems[array]
	if !ok {
		return fmt.Errorf("array %s is not configured on this replica", array)
	}
	select {
	case sem <- struct{}{}:
	default:
		s.waiting(array, 1)
		select {
		case sem <- struct{}{}:
			s.waiting(array, -1)
		case <-ctx.Done():
			s.waiting(array, -1)
			return fmt.Errorf("wait for a free call slot of array %s: %w", array, ctx.Err())
		}
	}
	defer func() { <-sem }()
	return fn()
}
