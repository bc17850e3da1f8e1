//! The worker's second wall: once it is set up, a worker gives up everything computing does not
//! need.
//!
//! After its one-time set-up (the engine built, native libraries mapped, its channel open) a
//! worker calls [`confine`]:
//!
//! - the descriptor limit is cut to the highest descriptor it holds (stdin for orders, stdout
//!   and stderr for logs, the channel; the supervisor opens everything else close-on-exec, so
//!   nothing more is inherited), so no new one can be made;
//! - Landlock, where the kernel has it, denies every filesystem access;
//! - `no_new_privs` is set and a seccomp-bpf allowlist is installed on every thread (TSYNC).
//!   It holds only what computing needs: anonymous memory mappings, futexes, clocks, signals for the
//!   worker's own threads, thread creation (`clone` with `CLONE_THREAD`; `clone3`, whose flags
//!   the filter cannot read, answers `ENOSYS` so the C library falls back to `clone`), reads of
//!   stdin and writes to stdout, stderr and the channel, random bytes, and exit. Everything
//!   else fails with `EPERM`: `open`/`openat` of any path, sockets, `execve`, `fork`, `ptrace`,
//!   `mount`, signals to other processes.
//!
//! A worker that cannot be confined says why in its `Ready` frame; the supervisor then refuses
//! to run bodies unless the operator allowed unconfined workers.

use std::collections::BTreeMap;
use std::os::fd::RawFd;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// What confinement holds in a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Confined {
    /// Landlock denies filesystem access too (else only seccomp does).
    pub landlock: bool,
}

/// Confines this process for good (see the module documentation). `channel` is the frame
/// channel's descriptor. `Err` says what could not be enforced; the process may then be
/// partly confined (descriptors closed, Landlock applied) but has no seccomp filter.
pub(super) fn confine(channel: RawFd) -> Result<Confined, String> {
    // Landlock first: making its ruleset takes a descriptor, which the limit below forbids.
    let landlock = deny_filesystem();
    limit_descriptors(channel);
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|_| {
        format!(
            "seccomp filters are not built for {}",
            std::env::consts::ARCH
        )
    })?;
    let allow = allowlist(channel, arch).map_err(|e| format!("the seccomp allowlist: {e}"))?;
    let missing = unavailable(arch).map_err(|e| format!("the seccomp ENOSYS rules: {e}"))?;
    // The allowlist lets these calls through and the other filter answers them ENOSYS (the
    // most restrictive answer of all filters wins). The allowlist goes last: it refuses what
    // installing a filter takes.
    seccompiler::apply_filter_all_threads(&missing)
        .map_err(|e| format!("the kernel refused the seccomp filter ({e})"))?;
    seccompiler::apply_filter_all_threads(&allow)
        .map_err(|e| format!("the kernel refused the seccomp filter ({e})"))?;
    Ok(Confined { landlock })
}

/// The highest descriptor a worker keeps open.
fn highest_kept(channel: RawFd) -> RawFd {
    channel.max(2)
}

/// Cuts the descriptor limit to what is open: no new descriptor can be made.
fn limit_descriptors(channel: RawFd) {
    use rustix::process::{Resource, Rlimit, setrlimit};
    let limit = u64::try_from(highest_kept(channel)).unwrap_or(3) + 1;
    let _ = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(limit),
            maximum: Some(limit),
        },
    );
}

/// Denies all filesystem access with Landlock on this thread and the threads it starts, where
/// the kernel has it; whether it is in force.
fn deny_filesystem() -> bool {
    use landlock::{ABI, Access, AccessFs, Ruleset, RulesetAttr, RulesetStatus};
    let restricted = Ruleset::default()
        .handle_access(AccessFs::from_all(ABI::V5))
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self());
    matches!(
        restricted,
        Ok(status) if status.ruleset != RulesetStatus::NotEnforced
    )
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, seccompiler::BackendError> {
    SeccompRule::new(conditions)
}

fn arg_is(index: u8, value: u64) -> Result<SeccompCondition, seccompiler::BackendError> {
    SeccompCondition::new(index, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)
}

/// The system calls a confined worker may make, each unconditional unless it has rules.
fn allowlist(channel: RawFd, arch: TargetArch) -> Result<BpfProgram, seccompiler::Error> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let always = [
        // Memory (mappings of files are refused below).
        libc::SYS_munmap,
        libc::SYS_mprotect,
        libc::SYS_mremap,
        libc::SYS_madvise,
        libc::SYS_brk,
        libc::SYS_membarrier,
        // Threads and waiting.
        libc::SYS_futex,
        libc::SYS_set_robust_list,
        libc::SYS_rseq,
        libc::SYS_sched_yield,
        libc::SYS_sched_getaffinity,
        libc::SYS_gettid,
        libc::SYS_getpid,
        libc::SYS_exit,
        libc::SYS_exit_group,
        // Clocks.
        libc::SYS_clock_gettime,
        libc::SYS_clock_getres,
        libc::SYS_clock_nanosleep,
        libc::SYS_nanosleep,
        libc::SYS_gettimeofday,
        // Signals of its own (WASM traps, thread start-up).
        libc::SYS_rt_sigaction,
        libc::SYS_rt_sigprocmask,
        libc::SYS_rt_sigreturn,
        libc::SYS_sigaltstack,
        // Randomness, and facts about what it already holds.
        libc::SYS_getrandom,
        libc::SYS_sysinfo,
        libc::SYS_fstat,
        libc::SYS_lseek,
        libc::SYS_close,
    ];
    for call in always {
        rules.insert(call, Vec::new());
    }
    // Anonymous mappings only: a descriptor the worker inherited is never mapped to be read.
    rules.insert(
        libc::SYS_mmap,
        vec![rule(vec![SeccompCondition::new(
            3,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(libc::MAP_ANONYMOUS as u64),
            libc::MAP_ANONYMOUS as u64,
        )?])?],
    );
    // Reads: orders on stdin only. Writes: logs and frames.
    rules.insert(libc::SYS_read, vec![rule(vec![arg_is(0, 0)?])?]);
    let writable = || -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
        [1u64, 2, u64::try_from(channel).unwrap_or(1)]
            .into_iter()
            .map(|fd| rule(vec![arg_is(0, fd)?]))
            .collect()
    };
    rules.insert(libc::SYS_write, writable()?);
    rules.insert(libc::SYS_writev, writable()?);
    // New threads only (a new process shares nothing it could be stopped by), and never in a
    // new namespace (which a worker running as root could otherwise make).
    let namespaces = (libc::CLONE_NEWNS
        | libc::CLONE_NEWUSER
        | libc::CLONE_NEWNET
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWCGROUP) as u64;
    rules.insert(
        libc::SYS_clone,
        vec![rule(vec![
            SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(libc::CLONE_THREAD as u64),
                libc::CLONE_THREAD as u64,
            )?,
            SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(namespaces),
                0,
            )?,
        ])?],
    );
    // Answered by the second filter; this one lets them through to it.
    rules.insert(libc::SYS_clone3, Vec::new());
    rules.insert(libc::SYS_memfd_create, Vec::new());
    // Signals to itself only (abort).
    rules.insert(
        libc::SYS_tgkill,
        vec![rule(vec![arg_is(0, u64::from(std::process::id()))?])?],
    );
    // Descriptor flags only: no F_DUPFD (a copy of an inherited descriptor), F_SETOWN/F_SETSIG
    // (signals to any process of its user), F_SETPIPE_SZ or locks. F_SETFL may not set
    // O_ASYNC.
    rules.insert(
        libc::SYS_fcntl,
        vec![
            rule(vec![arg_is(1, libc::F_GETFD as u64)?])?,
            rule(vec![arg_is(1, libc::F_SETFD as u64)?])?,
            rule(vec![arg_is(1, libc::F_GETFL as u64)?])?,
            rule(vec![
                arg_is(1, libc::F_SETFL as u64)?,
                SeccompCondition::new(
                    2,
                    SeccompCmpArgLen::Qword,
                    SeccompCmpOp::MaskedEq(libc::O_ASYNC as u64),
                    0,
                )?,
            ])?,
        ],
    );
    // Naming its own threads.
    rules.insert(
        libc::SYS_prctl,
        vec![rule(vec![arg_is(0, libc::PR_SET_NAME as u64)?])?],
    );
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        arch,
    )?;
    Ok(filter.try_into()?)
}

/// Calls that fail as if the kernel lacked them (`ENOSYS`), so their callers take the path
/// they take on older kernels: `clone3`, so the C library creates threads with `clone`, whose
/// flags the allowlist can check; `memfd_create`, so wasmtime builds a module's memory image
/// without a file descriptor.
fn unavailable(arch: TargetArch) -> Result<BpfProgram, seccompiler::Error> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_clone3, Vec::new());
    rules.insert(libc::SYS_memfd_create, Vec::new());
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )?;
    Ok(filter.try_into()?)
}
