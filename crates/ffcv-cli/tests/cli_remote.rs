//! The commands that take a FILE take an `http://` URL (a loopback range server from
//! page-cache's test harness) and print what they print for the local file; a missing
//! object is one `ffcv: error:` line naming the URL, exit status 1.

#[path = "../../page-cache/tests/servers/mod.rs"]
mod servers;

use std::process::{Command, Output};

use servers::HttpFileServer;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/ffcv-1.0.2/multipage.beton"
);

fn ffcv(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ffcv"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(args: &[&str]) -> String {
    let out = ffcv(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn inspect_dump_and_order_of_a_url_match_the_local_file() {
    let server = HttpFileServer::start("multipage.beton", std::fs::read(FIXTURE).unwrap());
    let url = server.url();
    let file_url = format!("file://{FIXTURE}");
    for args in [
        vec!["dump", "URL"],
        vec![
            "order",
            "URL",
            "--order",
            "quasi-random",
            "--seed",
            "3",
            "--batch-size",
            "4",
        ],
    ] {
        let with = |f: &str| -> Vec<String> {
            args.iter()
                .map(|a| {
                    if *a == "URL" {
                        f.to_string()
                    } else {
                        a.to_string()
                    }
                })
                .collect()
        };
        let local = stdout(&with(FIXTURE).iter().map(String::as_str).collect::<Vec<_>>());
        let remote = stdout(&with(&url).iter().map(String::as_str).collect::<Vec<_>>());
        let file = stdout(
            &with(&file_url)
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        );
        assert_eq!(remote, local, "{args:?}");
        assert_eq!(file, local, "{args:?}");
    }
    let local = stdout(&["inspect", FIXTURE, "--json"]).replace(FIXTURE, "FILE");
    let remote = stdout(&["inspect", &url, "--json"]).replace(&url, "FILE");
    assert_eq!(remote, local);
}

#[test]
fn a_missing_object_is_one_error_line_naming_the_url() {
    let server = HttpFileServer::start("multipage.beton", std::fs::read(FIXTURE).unwrap());
    let url = server.url().replace("multipage", "absent");
    let out = ffcv(&["inspect", &url]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("ffcv: error: {url}: cannot open")),
        "{err}"
    );
}
