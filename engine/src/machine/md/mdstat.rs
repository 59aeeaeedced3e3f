//! The kernel's list of md arrays, /proc/mdstat: which arrays exist,
//! whether they run, their level, how many members they expect and have,
//! their hot spares and the arrays they are made of. What an array is
//! doing (rebuild, reshape, scrub) is read from sysfs instead, where md
//! gives exact counts rather than a rounded percentage.

use crate::machine::host::Host;

/// One array as /proc/mdstat lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// md's kernel name, `md127`.
    pub device: String,
    pub active: bool,
    pub level: Option<String>,
    /// Members md expects and members working (`[3/2]`); 0 and 0 for
    /// raid0 and linear, which show no counts.
    pub expected: usize,
    pub working: usize,
    /// Hot spares: members md holds idle, `(S)`.
    pub spares: usize,
    /// The md arrays it is made of (`md126[1] md127[0]`), by kernel name
    /// in the order of their slots.
    pub legs: Vec<String>,
}

impl Listed {
    pub fn degraded(&self) -> bool {
        self.working < self.expected
    }
}

/// The arrays in the host's /proc/mdstat; none when it cannot be read.
pub fn listed(host: &Host) -> Vec<Listed> {
    parse(&std::fs::read_to_string(host.path("/proc/mdstat")).unwrap_or_default())
}

pub fn parse(text: &str) -> Vec<Listed> {
    let mut arrays: Vec<Listed> = Vec::new();
    for line in text.lines() {
        if let Some((device, rest)) = line.split_once(" : ")
            && device.starts_with("md")
        {
            let mut words = rest.split_whitespace().peekable();
            let active = words.next() == Some("active");
            let level = words
                .next_if(|w| w.starts_with("raid") || *w == "linear")
                .map(str::to_string);
            // The members: `sdb1[0]`, `sdp1[7](S)` for a spare, `md127[0]`
            // for a leg.
            let members: Vec<&str> = words.filter(|w| w.contains('[')).collect();
            arrays.push(Listed {
                device: device.trim().to_string(),
                active,
                level,
                expected: 0,
                working: 0,
                spares: members.iter().filter(|m| m.ends_with("(S)")).count(),
                legs: legs_in_order(&members),
            });
            continue;
        }
        let Some(array) = arrays.last_mut() else {
            continue;
        };
        let trimmed = line.trim();
        if trimmed.contains(" blocks")
            && let Some(counts) = trimmed
                .split_whitespace()
                .find(|w| w.starts_with('[') && w.contains('/'))
            && let Some((e, w)) = counts.trim_matches(['[', ']']).split_once('/')
        {
            array.expected = e.parse().unwrap_or(0);
            array.working = w.parse().unwrap_or(0);
        }
    }
    arrays
}

/// The md members of an array's mdstat line (`md126[1] md127[0]`), in
/// the order of their slots.
fn legs_in_order(members: &[&str]) -> Vec<String> {
    let mut legs: Vec<(usize, &str)> = members
        .iter()
        .filter(|m| m.starts_with("md"))
        .filter_map(|m| {
            let (name, rest) = m.split_once('[')?;
            Some((rest.split(']').next()?.parse().ok()?, name))
        })
        .collect();
    legs.sort();
    legs.into_iter().map(|(_, name)| name.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_degraded_recovering_raid5_and_a_raid0() {
        let mdstat = "Personalities : [raid0] [raid6] [raid5] [raid4]\n\
md126 : active raid0 sdd1[1] sdc1[0]\n      1953260544 blocks super 1.2 512k chunks\n      \n\
md127 : active raid5 sdc1[3] sdb1[1] sda1[0]\n      2093056 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/2] [UU_]\n      [=>...................]  recovery =  8.5% (89088/1046528) finish=0.5min speed=29696K/sec\n      bitmap: 0/1 pages [0KB], 65536KB chunk\n\nunused devices: <none>\n";
        let arrays = parse(mdstat);
        assert_eq!(arrays.len(), 2);
        assert_eq!(arrays[0].level.as_deref(), Some("raid0"));
        assert!(!arrays[0].degraded());
        let r5 = &arrays[1];
        assert_eq!(
            (r5.device.as_str(), r5.expected, r5.working, r5.degraded()),
            ("md127", 3, 2, true)
        );
    }

    #[test]
    fn spares_and_legs_in_slot_order() {
        let mdstat = "Personalities : [raid0] [raid6] [raid5] [raid4]\n\
md125 : active raid0 md126[1] md127[0]\n      46861787136 blocks super 1.2 2560k chunks\n      \n\
md126 : active raid6 sdp1[7](S) sdo1[6] sdn1[5] sdm1[4] sdl1[3] sdk1[2] sdj1[1] sdi1[0]\n      19530645504 blocks super 1.2 level 6, 512k chunk, algorithm 2 [7/7] [UUUUUUU]\n      bitmap: 0/30 pages [0KB], 65536KB chunk\n\n\
md127 : inactive sdh1[6](S)\n      3906885632 blocks super 1.2\n\nunused devices: <none>\n";
        assert_eq!(
            parse(mdstat)
                .iter()
                .map(|a| (a.device.as_str(), a.active, a.spares, a.legs.clone()))
                .collect::<Vec<_>>(),
            [
                (
                    "md125",
                    true,
                    0,
                    vec!["md127".to_string(), "md126".to_string()]
                ),
                ("md126", true, 1, vec![]),
                ("md127", false, 1, vec![]),
            ]
        );
    }
}
