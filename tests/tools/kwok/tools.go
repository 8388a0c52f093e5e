//go:build tools

// Package kwok records the kwok command this module builds.
package kwok

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
