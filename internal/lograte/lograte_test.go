package lograte

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestOnePerKeyPerInterval(t *testing.T) {
	now := time.Unix(0, 0)
	l := New(time.Minute, func() time.Time { return now })
	ok, left := l.Allow("a")
	assert.True(t, ok)
	assert.Zero(t, left)
	for range 3 {
		ok, _ = l.Allow("a")
		assert.False(t, ok)
	}
	ok, _ = l.Allow("b")
	assert.True(t, ok, "another key has its own interval")
	now = now.Add(time.Minute)
	ok, left = l.Allow("a")
	assert.True(t, ok)
	assert.Equal(t, 3, left, "the next record written counts those left out")
	ok, left = l.Allow("b")
	assert.True(t, ok)
	assert.Zero(t, left)
}

func TestMemoryIsBounded(t *testing.T) {
	now := time.Unix(0, 0)
	l := New(time.Minute, func() time.Time { return now })
	for i := range 3 * MaxKeys {
		l.Allow(fmt.Sprint(i))
	}
	assert.LessOrEqual(t, len(l.seen), MaxKeys)
	now = now.Add(time.Minute)
	l.Allow("new")
	assert.LessOrEqual(t, len(l.seen), MaxKeys)
}
