package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The establish retry waits 50ms, doubling up to 2s, each wait at most a
// tenth longer than its base.
func TestEstablishBackoffDoublesToCapWithJitter(t *testing.T) {
	b := establishBackoff()
	base := 50 * time.Millisecond
	for i := range 12 {
		d := b.Step()
		assert.GreaterOrEqual(t, d, base, "wait %d", i)
		assert.LessOrEqual(t, d, base+base/10, "wait %d", i)
		base = min(2*base, 2*time.Second)
	}
}
