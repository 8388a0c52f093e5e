package pki

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestTimeLeft: a certificate expiring tomorrow does not read "0 days
// left".
func TestTimeLeft(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	assert.Equal(t, "23 hours left", timeLeft(now.Add(23*time.Hour+59*time.Minute), now))
	assert.Equal(t, "47 hours left", timeLeft(now.Add(47*time.Hour), now))
	assert.Equal(t, "2 days left", timeLeft(now.Add(49*time.Hour), now))
	assert.Equal(t, "30 minutes left", timeLeft(now.Add(30*time.Minute), now))
	assert.Equal(t, "expired 1h0m0s ago", timeLeft(now.Add(-time.Hour), now))
}
