package stonith

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The wait between attempts of an array call starts at ArrayBackoff and
// doubles, each wait at most a tenth longer than its base.
func TestArrayBackoffDoublesWithJitter(t *testing.T) {
	c := &Controller{cfg: Config{ArrayBackoff: 500 * time.Millisecond, ArrayAttempts: 4}}
	b := c.arrayBackoff()
	base := 500 * time.Millisecond
	for i := range 3 {
		d := b.Step()
		assert.GreaterOrEqual(t, d, base, "wait %d", i)
		assert.LessOrEqual(t, d, base+base/10, "wait %d", i)
		base *= 2
	}
}
