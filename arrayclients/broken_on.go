//go:build fenced_broken_regrant

package arrayclients

// BrokenRegrant makes unfence give everything back: see broken_off.go.
// NEVER ship a build with this tag.
func BrokenRegrant() bool { return true }
