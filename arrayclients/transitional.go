package arrayclients

import "context"

// TRANSITIONAL: until each family plans and reads back footprint volumes
// itself, its plan marks each volume with the family's static cut and its
// undo replays the whole plan.

func coverPlan(p Plan, err error, id Identity, vols []VolumeRef, cover func(Identity, VolumeRef) (Cut, *Gap)) (Plan, error) {
	if err != nil {
		return p, err
	}
	for _, v := range vols {
		cut, gap := cover(id, v)
		p.Volumes = append(p.Volumes, VolumeCut{VolumeRef: v, Cut: cut, Gap: gap})
	}
	return p, nil
}

func (a *PowerFlexAdapter) Plan(ctx context.Context, id Identity, vols []VolumeRef) (Plan, error) {
	p, err := a.planIdentity(ctx, id)
	return coverPlan(p, err, id, vols, a.Cover)
}

func (a *PowerFlexAdapter) Undo(ctx context.Context, p Plan, _ RestoreScope) error {
	return a.undoAll(ctx, p)
}

func (a *PowerFlexAdapter) VerifyRestore(ctx context.Context, p Plan, _ RestoreScope) (Verification, error) {
	return a.Verify(ctx, p)
}

func (a *PowerStoreAdapter) Plan(ctx context.Context, id Identity, vols []VolumeRef) (Plan, error) {
	p, err := a.planIdentity(ctx, id)
	return coverPlan(p, err, id, vols, a.Cover)
}

func (a *PowerStoreAdapter) Undo(ctx context.Context, p Plan, _ RestoreScope) error {
	return a.undoAll(ctx, p)
}

func (a *PowerStoreAdapter) VerifyRestore(ctx context.Context, p Plan, _ RestoreScope) (Verification, error) {
	return a.Verify(ctx, p)
}

func (a *PowerMaxAdapter) Plan(ctx context.Context, id Identity, vols []VolumeRef) (Plan, error) {
	p, err := a.planIdentity(ctx, id)
	return coverPlan(p, err, id, vols, a.Cover)
}

func (a *PowerMaxAdapter) Undo(ctx context.Context, p Plan, _ RestoreScope) error {
	return a.undoAll(ctx, p)
}

func (a *PowerMaxAdapter) VerifyRestore(ctx context.Context, p Plan, _ RestoreScope) (Verification, error) {
	return a.Verify(ctx, p)
}
