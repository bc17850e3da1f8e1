//! The workspace's file rules, called the way a run's authority is called: no hard-linked file
//! is read (its other name may be outside the workspace), a read is charged to the run's
//! budget while its bytes are held, and a refusal names no host path.

use nodetool_broker::{
    Authority, BudgetLimits, Reply, Request, RunAuthority, WorkspaceGrant, WorkspaceMethod,
    WorkspaceReply, WorkspaceRequest,
};

fn must<T, E: std::fmt::Display>(result: Result<T, E>, what: &str) -> T {
    result.unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn read(authority: &RunAuthority, path: &str) -> Result<Reply, String> {
    let future = authority.ask(Request::Workspace(WorkspaceRequest {
        method: WorkspaceMethod::ReadText,
        path: path.into(),
        data: Vec::new(),
    }));
    // Workspace calls are performed when asked: the future is ready.
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut future = future;
    match future.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(answer) => answer.map(|granted| granted.reply),
        std::task::Poll::Pending => panic!("a workspace call waited"),
    }
}

#[cfg(unix)]
#[test]
fn a_hard_linked_file_is_never_read() {
    let outer = must(tempfile::tempdir(), "tempdir");
    let root = outer.path().join("root");
    must(std::fs::create_dir(&root), "create the root");
    let secret = outer.path().join("secret.txt");
    must(std::fs::write(&secret, "top secret"), "write the secret");
    // A second name for the secret inside the workspace (made before the run, by anyone who
    // could write the directory).
    must(
        std::fs::hard_link(&secret, root.join("innocent.txt")),
        "hard link",
    );
    must(
        std::fs::write(root.join("plain.txt"), "plain"),
        "write plain",
    );
    let authority = RunAuthority::new(Some(WorkspaceGrant::standard(&root)), None);

    let refused = read(&authority, "innocent.txt").err().unwrap_or_default();
    assert!(refused.contains("hard links"), "{refused}");
    assert!(!refused.contains("top secret"), "{refused}");
    assert!(
        !refused.contains(&*outer.path().to_string_lossy()),
        "a refusal names a host path: {refused}"
    );
    assert_eq!(
        read(&authority, "plain.txt"),
        Ok(Reply::Workspace(WorkspaceReply::Text("plain".into())))
    );
}

#[test]
fn a_read_holds_its_bytes_against_the_budget_until_handed_over() {
    let root = must(tempfile::tempdir(), "tempdir");
    must(
        std::fs::write(root.path().join("big.bin"), vec![7u8; 4096]),
        "write",
    );
    let authority = RunAuthority::with_budget(
        Some(WorkspaceGrant::standard(root.path())),
        None,
        BudgetLimits {
            bytes: 6000,
            fetches: 1,
            workspace_ops: 8,
        },
    );
    let ask = || {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut future = authority.ask(Request::Workspace(WorkspaceRequest {
            method: WorkspaceMethod::ReadBytes,
            path: "big.bin".into(),
            data: Vec::new(),
        }));
        match future.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(answer) => answer,
            std::task::Poll::Pending => panic!("a workspace call waited"),
        }
    };
    let held = must(ask(), "the first read");
    assert_eq!(authority.budget().bytes_in_flight(), 4096);
    // A second 4 KiB read while the first is held would pass the 6000-byte budget.
    let refused = ask().err().unwrap_or_default();
    assert!(refused.contains("in flight"), "{refused}");
    drop(held);
    assert_eq!(authority.budget().bytes_in_flight(), 0);
    assert!(ask().is_ok());
}

/// A directory inside the workspace swapped for a link to outside it, over and over, while the
/// run reads and writes through it: every step is opened relative to the one before and never
/// follows a link, so nothing outside is ever read or written, whatever the timing.
#[cfg(target_os = "linux")]
#[test]
fn a_link_swapped_in_mid_call_is_never_followed() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let outer = must(tempfile::tempdir(), "tempdir");
    let root = outer.path().join("root");
    let outside = outer.path().join("outside");
    must(std::fs::create_dir_all(root.join("a")), "create root/a");
    must(std::fs::create_dir_all(&outside), "create outside");
    must(std::fs::write(root.join("a/g"), "inside"), "write a/g");
    must(
        std::fs::write(outside.join("g"), "OUTSIDE-SECRET"),
        "write outside/g",
    );
    must(
        std::os::unix::fs::symlink(&outside, root.join("link")),
        "make the link",
    );
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, root) = (Arc::clone(&stop), root.clone());
        std::thread::spawn(move || {
            let dir = must(
                rustix::fs::open(
                    &root,
                    rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
                    rustix::fs::Mode::empty(),
                ),
                "open root",
            );
            while !stop.load(Ordering::Relaxed) {
                let _ = rustix::fs::renameat_with(
                    &dir,
                    "a",
                    &dir,
                    "link",
                    rustix::fs::RenameFlags::EXCHANGE,
                );
            }
        })
    };
    let authority = RunAuthority::new(Some(WorkspaceGrant::standard(&root)), None);
    let ask = |method: WorkspaceMethod, path: &str, data: &[u8]| {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut future = authority.ask(Request::Workspace(WorkspaceRequest {
            method,
            path: path.into(),
            data: data.to_vec(),
        }));
        match future.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(answer) => answer.map(|g| g.reply),
            std::task::Poll::Pending => panic!("a workspace call waited"),
        }
    };
    let mut read_inside = 0;
    for i in 0..3000 {
        match ask(WorkspaceMethod::ReadText, "a/g", b"") {
            Ok(Reply::Workspace(WorkspaceReply::Text(text))) => {
                assert_eq!(text, "inside", "read through the swapped-in link");
                read_inside += 1;
            }
            Ok(other) => panic!("{other:?}"),
            Err(refusal) => assert!(!refusal.contains("SECRET"), "{refusal}"),
        }
        let _ = ask(WorkspaceMethod::WriteText, &format!("a/w{i}"), b"ESCAPED");
        if let Ok(Reply::Workspace(WorkspaceReply::Entries(entries))) =
            ask(WorkspaceMethod::List, "a", b"")
        {
            assert!(
                entries.iter().all(|e| e.name != "g" || e.size == 6),
                "listed the outside directory: {entries:?}"
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = swapper.join();
    // Nothing was written outside, not even a temporary file.
    let outside_names: Vec<String> = std::fs::read_dir(&outside)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(outside_names, vec!["g".to_string()], "written outside");
    assert_eq!(
        must(std::fs::read_to_string(outside.join("g")), "read outside/g"),
        "OUTSIDE-SECRET"
    );
    assert!(read_inside > 0, "never read the file at all");
}
