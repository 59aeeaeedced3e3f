//! Does a disk satisfy an array's `disks = { ... }` rules? When it does not,
//! say which rule failed, so a refusal can tell the user what to change.

use crate::machine::disks::Disk;
use crate::spec::DiskMatch;
use crate::spec::glob::glob;

/// The first rule `disk` fails, in words; None when every rule holds.
pub fn mismatch(rules: &DiskMatch, disk: &Disk) -> Option<String> {
    if let Some(want) = rules.transport
        && disk.transport != Some(want)
    {
        let have = disk
            .transport
            .map_or("unknown".to_string(), |t| t.to_string());
        return Some(format!("transport is {have}, the rule wants {want}"));
    }
    if let Some(min) = rules.min_size
        && disk.size < min
    {
        return Some(format!("{} is smaller than min_size {}", disk.size, min));
    }
    if let Some(max) = rules.max_size
        && disk.size > max
    {
        return Some(format!("{} is larger than max_size {}", disk.size, max));
    }
    if let Some(want) = rules.rotational
        && disk.rotational != want
    {
        let what = if disk.rotational {
            "a spinning disk"
        } else {
            "an SSD"
        };
        return Some(format!("it is {what}, the rule wants rotational = {want}"));
    }
    let controller_names = disk
        .controller
        .as_ref()
        .map(|c| vec![c.label(), format!("{:04x}:{:04x}", c.vendor, c.device)])
        .unwrap_or_default();
    let globs = [
        (
            "model",
            &rules.model,
            disk.model.iter().cloned().collect::<Vec<_>>(),
        ),
        (
            "serial",
            &rules.serial,
            disk.serial.iter().cloned().collect(),
        ),
        ("wwn", &rules.wwn, disk.wwn.iter().cloned().collect()),
        ("controller", &rules.controller, controller_names),
    ];
    for (key, pattern, values) in globs {
        if let Some(pattern) = pattern
            && !values.iter().any(|v| glob(pattern, v))
        {
            let have = values
                .first()
                .map_or("unknown".to_string(), |v| format!("'{v}'"));
            return Some(format!("{key} {have} does not match '{pattern}'"));
        }
    }
    None
}
