//! The `nodetool-server` binary; everything lives in the library so it can be tested.

fn main() -> std::process::ExitCode {
    nodetool_server::main()
}
