//! Building from a URL against a local HTTP server: cached by sha256,
//! resumed with Range after a cut, and nothing left behind on failure.

mod common;

use common::http::Server;
use common::*;
use std::process::Command;
use std::sync::atomic::Ordering;

struct Env {
    dir: tempfile::TempDir,
    cache: tempfile::TempDir,
    server: Server,
    sha: String,
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let served = dir.path().join("served");
    std::fs::create_dir(&served).unwrap();
    let img = RpiFixture {
        payload: 2 * MIB,
        ..Default::default()
    }
    .build(dir.path());
    run(Command::new("xz")
        .args(["-T2", "-1", "-c"])
        .arg(&img)
        .stdout(std::fs::File::create(served.join("rpi.img.xz")).unwrap()));
    let sha = sha256_file(&served.join("rpi.img.xz"));
    let server = Server::start(served);
    Env {
        dir,
        cache: tempfile::tempdir().unwrap(),
        server,
        sha,
    }
}

fn recipe(e: &Env, file: &str, sha: &str) {
    write_recipe(
        e.dir.path(),
        "r.toml",
        &format!(
            "[base]\nurl = \"{}\"\nsha256 = \"{sha}\"\n[board]\nmodel = \"pi4\"\n[output]\npath = \"out/r.img\"\n",
            e.server.url(file)
        ),
    );
}

#[test]
fn a_url_build_downloads_once_and_then_uses_the_cache() {
    let e = env();
    recipe(&e, "rpi.img.xz", &e.sha);
    let r = nasforge(&["build", "r.toml"], e.dir.path(), e.cache.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(e.server.request_count(), 1);
    let cached = e
        .cache
        .path()
        .join(format!("downloads/{}/rpi.img.xz", e.sha));
    assert_eq!(sha256_file(&cached), e.sha);
    assert_eq!(
        files_under(&e.cache.path().join("downloads/partial")),
        Vec::<String>::new()
    );

    let r = nasforge(&["build", "r.toml"], e.dir.path(), e.cache.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(r.stderr.contains("(cached)"), "{}", r.stderr);
    assert_eq!(
        e.server.request_count(),
        1,
        "a cached, verified file is never downloaded again"
    );
}

#[test]
fn a_body_cut_half_way_is_resumed_to_the_right_hash() {
    let e = env();
    e.server.behaviour.cut_responses.store(1, Ordering::SeqCst);
    recipe(&e, "rpi.img.xz", &e.sha);
    let r = nasforge(&["build", "r.toml"], e.dir.path(), e.cache.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("interrupted (attempt 1/5)"),
        "{}",
        r.stderr
    );
    let reqs = e.server.requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    assert_eq!(reqs[0], "GET /rpi.img.xz range=None");
    let len = std::fs::metadata(e.dir.path().join("served/rpi.img.xz"))
        .unwrap()
        .len();
    assert_eq!(
        reqs[1],
        format!("GET /rpi.img.xz range=Some({})", len / 2),
        "the second request resumes where the cut was"
    );
    assert_eq!(
        sha256_file(
            &e.cache
                .path()
                .join(format!("downloads/{}/rpi.img.xz", e.sha))
        ),
        e.sha
    );
}

#[test]
fn a_wrong_sha256_fails_and_leaves_no_file() {
    let e = env();
    let wrong = "0".repeat(64);
    recipe(&e, "rpi.img.xz", &wrong);
    let r = nasforge(&["build", "r.toml"], e.dir.path(), e.cache.path());
    assert_eq!(r.status, 1);
    assert!(
        r.stderr.contains("sha256 mismatch")
            && r.stderr.contains(&wrong)
            && r.stderr.contains(&e.sha),
        "{}",
        r.stderr
    );
    assert_eq!(files_under(e.cache.path()), Vec::<String>::new());
    assert_eq!(files_under(&e.dir.path().join("out")), Vec::<String>::new());
}

#[test]
fn http_errors_are_clear_and_leave_no_file() {
    let e = env();
    recipe(&e, "missing.img.xz", &e.sha);
    let r = nasforge(&["build", "r.toml"], e.dir.path(), e.cache.path());
    assert_eq!(r.status, 1);
    assert!(
        r.stderr.contains("HTTP 404 Not Found") && r.stderr.contains("missing.img.xz"),
        "{}",
        r.stderr
    );
    assert_eq!(files_under(e.cache.path()), Vec::<String>::new());
}

#[test]
fn a_server_that_keeps_cutting_gives_up_and_keeps_the_part_for_next_time() {
    let e = env();
    e.server.behaviour.cut_responses.store(5, Ordering::SeqCst);
    recipe(&e, "rpi.img.xz", &e.sha);
    let r = nasforge(&["build", "r.toml"], e.dir.path(), e.cache.path());
    assert_eq!(r.status, 1);
    assert!(
        r.stderr.contains("failed after 5 attempts")
            && r.stderr.contains("the next run resumes from there"),
        "{}",
        r.stderr
    );
    assert_eq!(
        files_under(&e.cache.path().join("downloads")),
        vec![format!("partial/{}.part", e.sha)]
    );
    assert_eq!(files_under(&e.dir.path().join("out")), Vec::<String>::new());
    // The next run resumes and finishes.
    let r = nasforge(&["build", "r.toml"], e.dir.path(), e.cache.path());
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        e.server
            .requests
            .lock()
            .unwrap()
            .last()
            .unwrap()
            .contains("range=Some(")
    );
}

#[test]
fn a_corrupt_cached_kernel_source_is_downloaded_again_or_refused() {
    let e = env();
    let url = e.server.url("rpi.img.xz");
    let (first, cached) = nasforge::fetch::fetch_rehashed(&url, &e.sha, e.cache.path()).unwrap();
    assert!(!cached);
    assert_eq!(e.server.request_count(), 1);
    let good = std::fs::read(&first).unwrap();

    // Same length, one byte flipped: only the hash can tell.
    let mut bad = good.clone();
    bad[1000] ^= 0xff;
    std::fs::write(&first, &bad).unwrap();
    let (again, cached) = nasforge::fetch::fetch_rehashed(&url, &e.sha, e.cache.path()).unwrap();
    assert!(!cached, "a corrupt copy is not reported as the cache");
    assert_eq!(
        e.server.request_count(),
        2,
        "the corrupt copy was fetched anew"
    );
    assert_eq!(std::fs::read(&again).unwrap(), good);

    // With the source gone, the corrupt copy is deleted, never used.
    std::fs::write(&again, &bad).unwrap();
    std::fs::remove_file(e.dir.path().join("served/rpi.img.xz")).unwrap();
    let err = format!(
        "{:#}",
        nasforge::fetch::fetch_rehashed(&url, &e.sha, e.cache.path()).unwrap_err()
    );
    assert!(
        err.contains("HTTP 404") && err.contains("rpi.img.xz"),
        "{err}"
    );
    assert!(!again.exists());
}

#[test]
fn a_file_url_is_copied_into_the_cache_and_checked() {
    let e = env();
    let served = e.dir.path().join("served/rpi.img.xz");
    let url = format!("file://{}", served.display());
    let got = nasforge::fetch::fetch(&url, &e.sha, e.cache.path()).unwrap();
    assert_eq!(sha256_file(&got), e.sha);
    assert_eq!(e.server.request_count(), 0);

    let wrong = "0".repeat(64);
    let err = format!(
        "{:#}",
        nasforge::fetch::fetch(&url, &wrong, e.cache.path()).unwrap_err()
    );
    assert!(
        err.contains("sha256 mismatch") && err.contains(&e.sha),
        "{err}"
    );
    assert!(!nasforge::fetch::cached_path(e.cache.path(), &url, &wrong).exists());
    assert_eq!(
        files_under(&e.cache.path().join("downloads/partial")),
        Vec::<String>::new()
    );
}
