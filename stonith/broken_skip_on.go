//go:build fenced_broken_skip_volumes

package stonith

import "github.com/fenced-project/fenced/arrayclients"

// brokenFootprints hides every volume: see broken_skip_off.go. NEVER ship
// a build with this tag.
func brokenFootprints(src FootprintSource) FootprintSource { return noVolumes{src} }

type noVolumes struct{ FootprintSource }

func (noVolumes) Volumes(string) ([]arrayclients.KubeVolume, error) { return nil, nil }

func (noVolumes) Wanted(string) ([]string, error) { return nil, nil }

func (noVolumes) Nodes() []string { return nil }
