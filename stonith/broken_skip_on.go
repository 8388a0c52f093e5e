//go:build fenced_broken_skip_volumes

package stonith

import (
	"context"

	"github.com/fenced-project/fenced/arrayclients"
)

// brokenFootprints hides every volume: see broken_skip_off.go. NEVER ship
// a build with this tag.
func brokenFootprints(src FootprintSource) FootprintSource { return noVolumes{src} }

type noVolumes struct{ FootprintSource }

func (noVolumes) Volumes(string) ([]arrayclients.KubeVolume, error) { return nil, nil }

func (noVolumes) Wanted(string) ([]string, error) { return nil, nil }

func (noVolumes) Nodes() []string { return nil }

// brokenKube hides the node's attachments from the pre-taint check too, so
// the broken build skips every volume the same way.
func brokenKube(k KubeAPI) KubeAPI { return noAttachments{k} }

type noAttachments struct{ KubeAPI }

func (noAttachments) AttachedPVs(context.Context, string) ([]string, error) { return nil, nil }
