//! The manage view's [`Backend`] over the engine: the survey and status for
//! the overview, care's replace and grow planners, apply's share and user
//! plans, and the alert channels, each run through the operation journal
//! as `nasforge-setup replace|grow|apply|user|alert` run them.

use super::backend::{Backend, ManageAction, Planned, StepEvent};
use super::model::{ArrayView, Candidate, DiskView, FilesystemView, Overview};
use nasforge_engine::alerts::{self, Event as Alert, Kind as AlertKind};
use nasforge_engine::apply::{self, ApplyPlan, users};
use nasforge_engine::care::{self, ArraySurvey, Fit, GrowRequest, MemberState, ReplaceRequest};
use nasforge_engine::executor::Event;
use nasforge_engine::machine::disks::{self, Host};
use nasforge_engine::operation::{self, Kind, Operation};
use nasforge_engine::runner::{self, Runner};
use nasforge_engine::spec::Share;
use nasforge_engine::{atomic_file, journal, setup, status};

pub struct EngineBackend {
    host: Host,
}

impl EngineBackend {
    pub fn new(host: &Host) -> EngineBackend {
        EngineBackend { host: host.clone() }
    }

    fn runner(&self) -> Result<Box<dyn Runner>, String> {
        runner::for_host(&self.host, Some(&setup::log_path(&self.host)), false)
            .map_err(|e| e.to_string())
    }

    fn apply_plan(&self, shares: &[nasforge_engine::spec::Share]) -> Result<ApplyPlan, String> {
        let journal = journal::finished(&self.host).map_err(|e| e.to_string())?;
        let mut recipe = journal.recipe.clone();
        recipe.shares = shares.to_vec();
        let plan = apply::prepare(&self.host, &recipe, &[], self.runner()?.as_mut())
            .map_err(|e| e.to_string())?;
        if !plan.refusals.is_empty() {
            return Err(plan.describe());
        }
        Ok(plan)
    }
}

fn view_of(array: &ArraySurvey) -> ArrayView {
    let disk = |m: &care::MemberReport| DiskView {
        name: m.disk.clone(),
        model: m.model.clone().unwrap_or_else(|| "unknown model".into()),
        serial: m.serial.clone().unwrap_or_else(|| "no serial".into()),
        size: m.size,
    };
    let with = |state: MemberState| -> Vec<DiskView> {
        array
            .members
            .iter()
            .filter(|m| m.state == state)
            .map(disk)
            .collect()
    };
    let candidates = array
        .candidates
        .iter()
        .map(|c| Candidate {
            disk: DiskView {
                name: Some(c.disk.clone()),
                model: c.summary.clone(),
                serial: c.path.clone(),
                size: c.size,
            },
            unfit: match &c.fit {
                Fit::Fits => None,
                other => Some(other.to_string()),
            },
        })
        .collect();
    let mut members = with(MemberState::Working);
    members.extend(with(MemberState::Rebuilding));
    ArrayView {
        name: array.name.clone(),
        level: array.level,
        md_device: array.device.clone(),
        expected: array.expected,
        working: array.working,
        degraded: array.degraded,
        sync: array.sync.clone(),
        members,
        failed: with(MemberState::Failed),
        missing: with(MemberState::Missing),
        candidates,
        cannot_grow: array.cannot_grow(),
    }
}

/// What the manage view shows of `event`: its steps. An array assembled
/// again before them is in the setup log (the runner's command line).
fn step_event(event: Event) -> Option<StepEvent> {
    match event {
        Event::Starting { index, total, step } => Some(StepEvent::Starting {
            index,
            total,
            title: step.title.clone(),
        }),
        Event::AlreadyDone { index, .. } => Some(StepEvent::AlreadyDone { index }),
        Event::Finished { index } => Some(StepEvent::Finished { index }),
        Event::Reassembled { .. } => None,
    }
}

impl Backend for EngineBackend {
    fn overview(&mut self) -> Result<Overview, String> {
        let journal = journal::finished(&self.host).map_err(|e| e.to_string())?;
        let survey = care::survey(&self.host, &journal).map_err(|e| e.to_string())?;
        let mut runner = self.runner()?;
        let now = status::collect(&self.host, Some(&journal), runner.as_mut());
        let users = users::accounts(&self.host)
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|a| a.name)
            .collect();
        Ok(Overview {
            arrays: survey.arrays.iter().map(view_of).collect(),
            filesystems: now
                .filesystems
                .iter()
                .map(|f| FilesystemView {
                    array: f.array.clone(),
                    mount: f.mount.clone(),
                    size: f.size,
                    used: f.used,
                })
                .collect(),
            shares: journal.recipe.shares.clone(),
            users,
            pending: operation::pending(&self.host)
                .map_err(|e| e.to_string())?
                .map(|op| op.title),
        })
    }

    fn plan(&mut self, action: &ManageAction) -> Result<Planned, String> {
        let host = &self.host;
        let planned = |title: String, text: String, steps| Planned {
            title,
            text,
            steps,
            erases: vec![],
        };
        match action {
            ManageAction::Grow { disks, .. } if disks.is_empty() => {
                Err("choose at least one disk to add".into())
            }
            ManageAction::Replace { array, .. } | ManageAction::Grow { array, .. } => {
                let journal = journal::finished(host).map_err(|e| e.to_string())?;
                let survey = care::survey(host, &journal).map_err(|e| e.to_string())?;
                let inventory = disks::discover(host).map_err(|e| e.to_string())?;
                let plan = match action {
                    ManageAction::Replace { .. } => care::replace(
                        host,
                        &journal,
                        &survey,
                        &inventory,
                        &ReplaceRequest {
                            array: Some(array.clone()),
                            disk: disk_list(action).pop(),
                            erase: vec![],
                        },
                    ),
                    _ => care::grow(
                        host,
                        &journal,
                        &survey,
                        &inventory,
                        &GrowRequest {
                            array: array.clone(),
                            disks: disk_list(action),
                            erase: vec![],
                        },
                    ),
                }
                .map_err(|e| e.to_string())?;
                Ok(planned(plan.title, plan.text, plan.steps))
            }
            ManageAction::Shares(shares) => {
                let plan = self.apply_plan(shares)?;
                if plan.nothing_to_change() {
                    return Err("the shares are as they were: nothing to change".into());
                }
                Ok(planned(plan.title(), plan.describe(), plan.steps.clone()))
            }
            ManageAction::AddUser { name, .. } | ManageAction::SetPassword { name, .. } => {
                let plan = if matches!(action, ManageAction::AddUser { .. }) {
                    users::plan_add(host, name)
                } else {
                    users::plan_passwd(host, name)
                }
                .map_err(|e| e.to_string())?;
                Ok(planned(
                    format!("User '{name}'"),
                    plan.describe(),
                    plan.steps,
                ))
            }
            ManageAction::TestAlerts => Ok(planned(
                "Test alerts".into(),
                "One test alert through each channel in [alerts] (email, webhook, ntfy); a failed delivery stays queued and is retried every 10 minutes.\n".into(),
                vec![],
            )),
        }
    }

    fn run(
        &mut self,
        action: &ManageAction,
        planned: &Planned,
        on_step: &mut dyn FnMut(StepEvent),
    ) -> Result<(), String> {
        let host = self.host.clone();
        let mut runner = self.runner()?;
        let mut on_event = |e: Event| {
            if let Some(step) = step_event(e) {
                on_step(step)
            }
        };
        let resume = "; `sudo nasforge-setup resume` goes on from the failed step";
        match action {
            ManageAction::Replace { .. } | ManageAction::Grow { .. } => {
                let kind = if matches!(action, ManageAction::Replace { .. }) {
                    Kind::Replace
                } else {
                    Kind::Grow
                };
                let op = Operation::new(
                    kind,
                    planned.title.clone(),
                    planned.text.clone(),
                    planned.steps.clone(),
                );
                operation::start(&host, op, runner.as_mut(), &mut on_event)
                    .map(|_| ())
                    .map_err(|e| format!("{e}{resume}"))
            }
            ManageAction::Shares(shares) => {
                let plan = self.apply_plan(shares)?;
                write_card_shares(&host, shares)?;
                apply::run(&host, &plan, runner.as_mut(), &mut on_event)
                    .map(|_| ())
                    .map_err(|e| format!("{e}{resume}"))
            }
            ManageAction::AddUser { name, password }
            | ManageAction::SetPassword { name, password } => {
                let plan = if matches!(action, ManageAction::AddUser { .. }) {
                    users::plan_add(&host, name)
                } else {
                    users::plan_passwd(&host, name)
                }
                .map_err(|e| e.to_string())?;
                users::run(&host, &plan, &password.0, runner.as_mut(), &mut on_event)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
            ManageAction::TestAlerts => test_alerts(&host),
        }
    }
}

/// The new share list written to nasforge.toml on the card before it is
/// applied, as `share add|remove` do: the card stays what is set up, so a
/// later `apply` does not undo the change. Other sections keep their text
/// and comments.
fn write_card_shares(host: &Host, shares: &[Share]) -> Result<(), String> {
    let path = setup::recipe_path(host);
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let new = crate::recipe_shares::set(&text, shares)
        .map_err(|e| format!("{}: {e:#}", path.display()))?;
    atomic_file::write(&path, new.as_bytes(), 0o644)
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

fn disk_list(action: &ManageAction) -> Vec<String> {
    match action {
        ManageAction::Grow { disks, .. } => disks.clone(),
        ManageAction::Replace { disk, .. } => vec![disk.clone()],
        _ => vec![],
    }
}

fn test_alerts(host: &Host) -> Result<(), String> {
    let hostname = nasforge_engine::machine::hostname(host);
    let event = Alert::new(
        AlertKind::Test,
        &hostname,
        "",
        &format!(
            "A test from the manage view of nasforge-setup on {hostname}: alerts reach you here."
        ),
    );
    let mut runner = runner::for_host(host, None, false).map_err(|e| e.to_string())?;
    let sent = alerts::raise(host, &event, runner.as_mut()).map_err(|e| e.to_string())?;
    if sent.is_empty() {
        return Err(
            "no alert channel is set up; add email, webhook or ntfy to [alerts] in nasforge.toml and run `sudo nasforge-setup apply`".into(),
        );
    }
    let failed: Vec<String> = sent
        .iter()
        .filter_map(|d| {
            d.result
                .as_ref()
                .err()
                .map(|e| format!("{}: {e}", d.channel))
        })
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}; queued and retried every 10 minutes",
            failed.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_chosen_in_the_manage_view_reach_the_card_and_its_comments_stay() {
        use nasforge_engine::spec::DeviceRecipe;
        let dir = tempfile::tempdir().unwrap();
        let host = Host::new(dir.path());
        let card = dir.path().join("boot/firmware/nasforge.toml");
        std::fs::create_dir_all(card.parent().unwrap()).unwrap();
        let text = "# my NAS\n[storage]\nmode = \"unattended\" # keep\n[[storage.arrays]]\nname = \"data\"\nlevel = \"raid1\"\ndisks = { count = 2 }\nfilesystem = \"ext4\"\nmount = \"/srv/data\"\n\n[[shares]]\nname = \"media\"\npath = \"/srv/data/media\"\nsmb = { users = [\"admin\"] }\n";
        std::fs::write(&card, text).unwrap();
        let mut shares = DeviceRecipe::parse(text, &card).unwrap().shares;
        let mut photos = shares[0].clone();
        photos.name = "photos".into();
        photos.path = "/srv/data/photos".into();
        shares.push(photos);
        write_card_shares(&host, &shares).unwrap();
        let written = std::fs::read_to_string(&card).unwrap();
        assert!(
            written.starts_with("# my NAS\n") && written.contains("# keep"),
            "{written}"
        );
        assert_eq!(DeviceRecipe::parse(&written, &card).unwrap().shares, shares);
        write_card_shares(&host, &[]).unwrap();
        let written = std::fs::read_to_string(&card).unwrap();
        assert!(
            DeviceRecipe::parse(&written, &card)
                .unwrap()
                .shares
                .is_empty(),
            "{written}"
        );
    }
}
