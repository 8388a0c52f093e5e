//go:build fenced_broken_regrant

package arrayclients

// brokenRegrant makes unfence give everything back: see broken_off.go.
// NEVER ship a build with this tag.
func brokenRegrant() bool { return true }
