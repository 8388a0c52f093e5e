// Package families builds the simulator of any fixture array: the one place
// that knows every simulated family. Adding a family is one case line here.
package families

import (
	"fmt"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/powerflex"
	"github.com/fenced-project/fenced/tests/arraysim/powermax"
	"github.com/fenced-project/fenced/tests/arraysim/powerscale"
	"github.com/fenced-project/fenced/tests/arraysim/powerstore"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/fenced-project/fenced/tests/arraysim/unity"
)

// New builds the simulator of one fixture array. Each family package exports
// New(spec *yaml.Node, nodes []fixture.Node) (*Sim, error).
func New(a fixture.Array, nodes []fixture.Node) (simcore.Family, error) {
	var (
		fam simcore.Family
		err error
	)
	switch a.Family {
	case fixture.PowerFlex:
		fam, err = asFamily(powerflex.New(&a.Spec, nodes))
	case fixture.PowerStore:
		fam, err = asFamily(powerstore.New(&a.Spec, nodes))
	case fixture.PowerScale:
		fam, err = asFamily(powerscale.New(&a.Spec, nodes))
	case fixture.PowerMax:
		fam, err = asFamily(powermax.New(&a.Spec, nodes))
	case fixture.Unity:
		fam, err = asFamily(unity.New(&a.Spec, nodes))
	default:
		return nil, fmt.Errorf("arrays[%s].family: %q has no simulator", a.Name, a.Family)
	}
	if err != nil {
		return nil, fmt.Errorf("arrays[%s]: %w", a.Name, err)
	}
	return fam, nil
}

// asFamily turns a family constructor's result into a simcore.Family
// without a typed-nil interface on error.
func asFamily[S simcore.Family](sim S, err error) (simcore.Family, error) {
	if err != nil {
		return nil, err
	}
	return sim, nil
}
