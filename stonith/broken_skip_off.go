//go:build !fenced_broken_skip_volumes

package stonith

// brokenFootprints returns src in every real build. The build tag
// fenced_broken_skip_volumes replaces it (broken_skip_on.go) with a source
// that shows no volume at all: a fenced that fences a node without the
// volumes Kubernetes attached to it, skipped silently, which the end-to-end
// suite runs to prove the checker's footprint-covered rule catches it.
func brokenFootprints(src FootprintSource) FootprintSource { return src }

// brokenKube returns k in every real build (see brokenFootprints).
func brokenKube(k KubeAPI) KubeAPI { return k }
