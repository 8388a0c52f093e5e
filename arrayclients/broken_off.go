//go:build !fenced_broken_regrant

package arrayclients

// BrokenRegrant is false in every real build. The build tag
// fenced_broken_regrant replaces it (broken_on.go) to make a deliberately
// unsafe fenced whose unfence replays every removal, with multiple mappings
// allowed, as fenced did before footprints; the end-to-end suite runs it to
// prove the invariant checker catches a re-grant. Release binaries hold
// none of that code.
func BrokenRegrant() bool { return false }
