//! The step that adopts an md array or ZFS pool another machine made:
//! nothing erased, partitioned or formatted. An array is started from the
//! members its superblocks name and checked before it is made writable; a
//! pool is imported by its id with nothing mounted, then pointed at the
//! recipe's mount.

use super::{Action, Guard, Step};
use crate::planner::ArrayPlan;
use crate::storage::partition;

pub(super) fn adopt_step(array: &ArrayPlan, steps: &mut Vec<Step>) {
    let Some(imported) = &array.imported else {
        return;
    };
    if array.spec.is_zfs() {
        let pool = &array.spec.name;
        steps.push(Step {
            id: format!("adopt-pool:{pool}"),
            title: format!(
                "Import the ZFS pool '{pool}' (id {}, {}{}{}) mounted at {}: nothing erased",
                imported.uuid,
                array.spec.level,
                if imported.degraded { ", degraded" } else { "" },
                if imported.force {
                    ", last used by another system: -f"
                } else {
                    ""
                },
                array.spec.mount
            ),
            guard: Guard::PoolAdopted {
                pool: pool.clone(),
                id: imported.uuid.clone(),
                mount: array.spec.mount.clone(),
            },
            // zpool would load the module itself; modprobe fails first
            // with the kernel's reason when the module does not fit it.
            actions: vec![
                super::run(&["modprobe", "zfs"]),
                Action::AdoptPool {
                    pool: pool.clone(),
                    id: imported.uuid.clone(),
                    force: imported.force,
                    mount: array.spec.mount.clone(),
                },
            ],
            always: vec![],
        });
        return;
    }
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
