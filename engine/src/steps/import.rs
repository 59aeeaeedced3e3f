//! The step that adopts an md array another machine made: nothing erased,
//! partitioned or formatted, the array started from the members its
//! superblocks name and checked before it is made writable.

use super::{Action, Guard, Step};
use crate::planner::ArrayPlan;
use crate::storage::partition;

pub(super) fn adopt_step(array: &ArrayPlan, steps: &mut Vec<Step>) {
    let Some(imported) = &array.imported else {
        return;
    };
    let device = array.spec.md_device();
    // A whole disk by its stable path, a partition as that path's partition.
    let members: Vec<String> = array
        .members
        .iter()
        .map(|m| partition::member_device(array, m))
        .collect();
    let was = imported
        .name
        .as_deref()
        .map(|n| format!(" '{}'", crate::machine::printable(n)))
        .unwrap_or_default();
    steps.push(Step {
        id: format!("adopt-array:{}", array.spec.name),
        title: format!(
            "Adopt the {} array{was} (UUID {}) as {device}{}: nothing erased",
            array.spec.level,
            imported.uuid,
            if imported.degraded { ", degraded" } else { "" }
        ),
        guard: Guard::Adopted {
            device: device.clone(),
            members: members.clone(),
            filesystem: array.spec.filesystem.to_string(),
        },
        actions: vec![
            super::run(&["udevadm", "settle"]),
            Action::AdoptArray {
                device,
                uuid: imported.uuid.clone(),
                devices: members,
                run: imported.degraded,
                filesystem: array.spec.filesystem.to_string(),
            },
        ],
        always: vec![],
    });
}
