//! `nasforge-setup replace`, `grow` and `resume`: the survey and the plan
//! from the engine's `care`, a "Type yes" before anything changes (unless
//! --yes), then the steps through the operation journal, so a power cut
//! resumes them at the next boot (`nasforge-resume.service`).

use anyhow::{Context as _, bail};
use nasforge_engine::care::{self, CarePlan, GrowRequest, ReplaceRequest};
use nasforge_engine::machine::disks::{self, Host};
use nasforge_engine::runner::{self, Runner};
use nasforge_engine::setup;
use nasforge_engine::{journal, operation};
use std::io::BufRead;

pub fn replace(host: &Host, request: &ReplaceRequest, yes: bool) -> anyhow::Result<()> {
    let journal = journal::finished(host)?;
    let survey = care::survey(host, &journal)?;
    print!("{survey}");
    let inventory = disks::discover(host)?;
    let plan = care::replace(host, &journal, &survey, &inventory, request)?;
    run(host, plan, yes, "replace")
}

pub fn grow(host: &Host, request: &GrowRequest, yes: bool) -> anyhow::Result<()> {
    let journal = journal::finished(host)?;
    let survey = care::survey(host, &journal)?;
    print!("{survey}");
    let inventory = disks::discover(host)?;
    let plan = care::grow(host, &journal, &survey, &inventory, request)?;
    run(host, plan, yes, "grow")
}

pub fn resume(host: &Host) -> anyhow::Result<()> {
    let Some(pending) = operation::pending(host)? else {
        println!("nasforge-setup: no operation is pending; nothing to resume");
        return Ok(());
    };
    println!(
        "Resuming: {} ({} of {} steps done)",
        pending.title,
        pending.done.len(),
        pending.steps.len()
    );
    let mut runner = runner(host)?;
    operation::resume(host, runner.as_mut(), &mut super::print_step)?;
    println!("nasforge-setup: resume complete");
    Ok(())
}

fn run(host: &Host, plan: CarePlan, yes: bool, command: &str) -> anyhow::Result<()> {
    println!("\nPlan: {}\n{}", plan.title, plan.text);
    if !yes && !confirmed()? {
        bail!("not confirmed; nothing was changed");
    }
    let mut runner = runner(host)?;
    operation::start(
        host,
        plan.into_operation(),
        runner.as_mut(),
        &mut super::print_step,
    )?;
    println!("nasforge-setup: {command} complete");
    Ok(())
}

fn confirmed() -> anyhow::Result<bool> {
    println!("Type yes to go on:");
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("reading the answer")?;
    Ok(line.trim() == "yes")
}

fn runner(host: &Host) -> anyhow::Result<Box<dyn Runner>> {
    let log = setup::log_path(host);
    runner::for_host(host, Some(&log), true)
        .with_context(|| format!("opening the log {}", log.display()))
}
