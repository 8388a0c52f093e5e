package detector

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// However often recording a node's inputs fails, the next try is at most
// learnRetryMax away.
func TestLearnRetryIsBounded(t *testing.T) {
	l := newLearnLimiter()
	first := l.When("n1")
	assert.Equal(t, learnRetryBase, first)
	var last = first
	for range 40 {
		last = l.When("n1")
	}
	assert.Equal(t, learnRetryMax, last)
	l.Forget("n1")
	assert.Equal(t, learnRetryBase, l.When("n1"), "a success starts over")
}
