// Package lograte decides which of a stream of repeated log records are
// written: one per key in each interval, with the count of those left out
// given to the next one written. fenced uses it where a library reports an
// expected degraded state over and over (Raft's unreachable peer,
// client-go's failing watch) so that the log says it once a minute instead
// of flooding.
package lograte

import (
	"sync"
	"time"
)

// MaxKeys bounds a Limiter's memory: past it, keys last written more than
// an interval ago are dropped, and if none are, the whole table.
const MaxKeys = 4096

// Limiter lets one record per key through in each interval. Its methods
// are safe for concurrent use.
type Limiter struct {
	every time.Duration
	now   func() time.Time
	mu    sync.Mutex
	seen  map[string]*seen
}

type seen struct {
	at   time.Time
	left int
}

// New returns a Limiter letting one record per key through every interval
// on the clock now (nil: time.Now).
func New(every time.Duration, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{every: every, now: now, seen: map[string]*seen{}}
}

// Every is the interval.
func (l *Limiter) Every() time.Duration { return l.every }

// Allow reports whether a record with key is written now and, when it is,
// how many records of that key were left out since the last one written.
func (l *Limiter) Allow(key string) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	s, ok := l.seen[key]
	if ok && now.Sub(s.at) < l.every {
		s.left++
		return false, 0
	}
	if !ok && len(l.seen) >= MaxKeys {
		for k, v := range l.seen {
			if now.Sub(v.at) >= l.every {
				delete(l.seen, k)
			}
		}
		if len(l.seen) >= MaxKeys {
			clear(l.seen)
		}
	}
	n := 0
	if ok {
		n = s.left
	}
	l.seen[key] = &seen{at: now}
	return true, n
}
