//! Spinning idle hard disks down (hd-idle), beside smartd's self-tests.

use super::{Action, Guard, Step, enable, run};
use crate::planner::Plan;
use crate::storage::spindown;

/// hd-idle's configuration and service, when the recipe asks for spin-down
/// and an array has a hard disk to spin down.
pub(super) fn spin_down_step(plan: &Plan) -> Option<Step> {
    let disks = spindown::disks(plan);
    if disks.is_empty() {
        return None;
    }
    let contents = spindown::default_file(plan.spin_down, &disks)?;
    Some(Step {
        id: "spin-down".into(),
        title: format!(
            "Spin idle hard disks down after {} (hd-idle)",
            plan.spin_down
        ),
        guard: Guard::Always,
        actions: vec![
            Action::WriteFile {
                path: spindown::DEFAULT_FILE.into(),
                contents,
                mode: 0o644,
            },
            enable(&[spindown::SERVICE], false),
            // hd-idle reads its options and resolves the by-id links only
            // when it starts.
            run(&["systemctl", "restart", spindown::SERVICE]),
        ],
        always: vec![],
    })
}
