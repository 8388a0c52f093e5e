package arrayclients

import "context"

// SpareCalls lets an adapter run parts of one call side by side (a
// PowerFlex fence unmaps a node's volumes concurrently): each extra
// request it has in flight at once takes one spare call, returned with
// release, and when ok is false it makes do with what it has. It must not
// block. The fencing pipeline hands out the array's free call slots
// (arrays[].maxConcurrentCalls), so the array never sees more fencing
// requests at once than the operator allowed.
type SpareCalls func() (release func(), ok bool)

type spareCallsKey struct{}

// WithSpareCalls returns ctx carrying spare for the adapter calls made
// with it. Without one, an adapter's own client pool is the only bound.
func WithSpareCalls(ctx context.Context, spare SpareCalls) context.Context {
	return context.WithValue(ctx, spareCallsKey{}, spare)
}

// SpareCall takes one spare call from ctx: always granted (with a no-op
// release) when ctx carries none.
func SpareCall(ctx context.Context) (release func(), ok bool) {
	if s, has := ctx.Value(spareCallsKey{}).(SpareCalls); has && s != nil {
		return s()
	}
	return func() {}, true
}
