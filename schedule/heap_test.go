package schedule

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// item is a heap element that keeps its index, as the memory store's
// entries and providers do.
type item struct {
	key, i int
}

// TestPropertyHeapIsAnIndexedMinHeap: under any sequence of pushes,
// removals at a kept index, key changes fixed in place and re-inits, the
// heap's minimum is the model's, every item's kept index is its place
// (or -1 once removed), and draining it yields the keys in order.
func TestPropertyHeapIsAnIndexedMinHeap(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		h := heap[*item]{less: func(a, b *item) bool { return a.key < b.key }, index: func(x *item) *int { return &x.i }}
		var in []*item // the model: the items in the heap
		rt.Repeat(map[string]func(*rapid.T){
			"push": func(rt *rapid.T) {
				x := &item{key: rapid.IntRange(-50, 50).Draw(rt, "key")}
				h.push(x)
				in = append(in, x)
			},
			"remove": func(rt *rapid.T) {
				if len(in) == 0 {
					rt.Skip("empty")
				}
				k := rapid.IntRange(0, len(in)-1).Draw(rt, "which")
				x := in[k]
				if got := h.removeAt(x.i); got != x || x.i != -1 {
					rt.Fatalf("removeAt(%d) = %p with index %d; want %p with -1", x.i, got, x.i, x)
				}
				in = slices.Delete(in, k, k+1)
			},
			"fix": func(rt *rapid.T) {
				if len(in) == 0 {
					rt.Skip("empty")
				}
				x := in[rapid.IntRange(0, len(in)-1).Draw(rt, "which")]
				x.key = rapid.IntRange(-50, 50).Draw(rt, "key")
				h.fix(x.i)
			},
			"init": func(rt *rapid.T) {
				for _, x := range in {
					x.key = rapid.IntRange(-50, 50).Draw(rt, "key")
				}
				h.init()
			},
			"": func(rt *rapid.T) {
				if len(h.items) != len(in) {
					rt.Fatalf("heap holds %d items, model %d", len(h.items), len(in))
				}
				for i, x := range h.items {
					if x.i != i {
						rt.Fatalf("item at %d keeps index %d", i, x.i)
					}
				}
				m, ok := h.min()
				if ok != (len(in) > 0) {
					rt.Fatalf("min ok %v with %d items", ok, len(in))
				}
				if ok && slices.ContainsFunc(in, func(x *item) bool { return x.key < m.key }) {
					rt.Fatalf("min key %d, but a smaller key is in", m.key)
				}
			},
		})
		var got []int
		for len(h.items) > 0 {
			got = append(got, h.removeAt(0).key)
		}
		if !slices.IsSorted(got) {
			rt.Fatalf("drained %v: not in order", got)
		}
	})
}
