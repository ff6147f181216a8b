package schedule

// heap is the one binary min-heap of the package: the memory store's
// indexes (entries by next run, lease end or rank; providers by their best
// entry) and the scheduler's wake-up times. Items that must be removed or
// re-ordered in place keep their index, through index.
type heap[T any] struct {
	items []T
	less  func(a, b T) bool
	// index returns where x keeps its index in items, -1 once removed.
	// Nil when items keep none.
	index func(x T) *int
}

// min returns the least item, and false when the heap is empty.
func (h *heap[T]) min() (T, bool) {
	if len(h.items) == 0 {
		var zero T
		return zero, false
	}
	return h.items[0], true
}

// push adds x.
func (h *heap[T]) push(x T) {
	h.items = append(h.items, x)
	h.moved(len(h.items) - 1)
	h.up(len(h.items) - 1)
}

// removeAt removes and returns the item at index i.
func (h *heap[T]) removeAt(i int) T {
	n := len(h.items) - 1
	x := h.items[i]
	if i != n {
		h.swap(i, n)
	}
	var zero T
	h.items[n] = zero
	h.items = h.items[:n]
	if i != n {
		h.fix(i)
	}
	if h.index != nil {
		*h.index(x) = -1
	}
	return x
}

// fix restores the order after the key of the item at index i changed.
func (h *heap[T]) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

// init restores the heap order after the keys of many items changed.
func (h *heap[T]) init() {
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// moved tells the item at index i where it is.
func (h *heap[T]) moved(i int) {
	if h.index != nil {
		*h.index(h.items[i]) = i
	}
}

func (h *heap[T]) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.moved(i)
	h.moved(j)
}

func (h *heap[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(h.items[i], h.items[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

// down moves the item at i0 down to its place, and reports whether it
// moved.
func (h *heap[T]) down(i0 int) bool {
	i, n := i0, len(h.items)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h.less(h.items[r], h.items[c]) {
			c = r
		}
		if !h.less(h.items[c], h.items[i]) {
			break
		}
		h.swap(i, c)
		i = c
	}
	return i > i0
}
