//go:build failpoints

package failpoint

import (
	"sync"
	"time"
)

// Action is what an enabled point does each time it is reached: wait Delay,
// then return Err (nil: carry on). Times bounds how many hits it acts on (0:
// every hit until Disable).
type Action struct {
	Err   error
	Delay time.Duration
	Times int
}

var points struct {
	sync.Mutex
	m    map[string]*state
	hits map[string]int
}

type state struct {
	a    Action
	left int
}

// Enable makes the point name act as a from now on.
func Enable(name string, a Action) {
	points.Lock()
	defer points.Unlock()
	if points.m == nil {
		points.m = map[string]*state{}
	}
	points.m[name] = &state{a: a, left: a.Times}
	if points.hits == nil {
		points.hits = map[string]int{}
	}
	points.hits[name] = 0
}

// Disable turns the point name off.
func Disable(name string) {
	points.Lock()
	defer points.Unlock()
	delete(points.m, name)
}

// Hits returns how many times the point name acted since it was enabled
// last (for tests to check the fault was reached).
func Hits(name string) int {
	points.Lock()
	defer points.Unlock()
	return points.hits[name]
}

// Inject runs the action of the point name if it is enabled.
func Inject(name string) error {
	points.Lock()
	s := points.m[name]
	if s == nil {
		points.Unlock()
		return nil
	}
	a := s.a
	if a.Times > 0 {
		s.left--
		if s.left == 0 {
			delete(points.m, name)
		}
	}
	if points.hits == nil {
		points.hits = map[string]int{}
	}
	points.hits[name]++
	points.Unlock()
	if a.Delay > 0 {
		time.Sleep(a.Delay)
	}
	return a.Err
}
