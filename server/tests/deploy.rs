//! `docs/deploy.md` against the real server: every YAML block parses (with a YAML parser, as
//! `kubectl` would read it), the Deployment's arguments are flags `nodetool-server` accepts,
//! its probe paths answer `200` through the real router as a kubelet asks (the pod's IP as
//! `Host`, no token) while `/api/` needs the token, the ports line up from container to Service,
//! resources match `--max-runs`, and the grace period covers the longest deadline. The
//! Dockerfile's command line parses too.

mod support;

use std::path::PathBuf;

use axum::body::Body;
use axum::http::{Method, StatusCode};
use clap::Parser as _;
use nodetool_server::{Access, ServeArgs, ServerConfig, Token};
use serde::Deserialize as _;
use serde_json::Value;
use support::{World, must, send};

/// `nodetool-server`'s command line, as its binary reads it.
#[derive(clap::Parser)]
struct Cli {
    #[command(flatten)]
    serve: ServeArgs,
    #[arg(long = "packs")]
    _packs: Vec<PathBuf>,
}

fn guide() -> String {
    must(
        std::fs::read_to_string(support::repo().join("docs/deploy.md")),
        "read docs/deploy.md",
    )
}

/// The fenced blocks of `language`.
fn blocks(text: &str, language: &str) -> Vec<String> {
    let fence = format!("```{language}\n");
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(&fence) {
        let body = &rest[start + fence.len()..];
        let end = body
            .find("\n```")
            .unwrap_or_else(|| panic!("an unclosed {language} block"));
        out.push(body[..end + 1].to_string());
        rest = &body[end..];
    }
    out
}

/// Every document of every YAML block.
fn manifests() -> Vec<Value> {
    let yaml = blocks(&guide(), "yaml");
    assert!(!yaml.is_empty(), "docs/deploy.md has no yaml block");
    let mut documents = Vec::new();
    for block in &yaml {
        for document in serde_norway::Deserializer::from_str(block) {
            let value = must(Value::deserialize(document), "parse a YAML document");
            assert!(
                value["kind"].is_string(),
                "a document without a kind: {value}"
            );
            documents.push(value);
        }
    }
    documents
}

fn kind<'a>(documents: &'a [Value], kind: &str) -> &'a Value {
    documents
        .iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in docs/deploy.md"))
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {value}"))
        .iter()
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

fn parse_args(args: &[String]) -> ServeArgs {
    let argv = std::iter::once("nodetool-server".to_string()).chain(args.iter().cloned());
    match Cli::try_parse_from(argv) {
        Ok(cli) => cli.serve,
        Err(e) => panic!("nodetool-server does not accept {args:?}: {e}"),
    }
}

/// Mebibytes of a Kubernetes quantity such as `1536Mi` or `2Gi`.
fn mebibytes(quantity: &str) -> u64 {
    if let Some(n) = quantity.strip_suffix("Gi") {
        return must(n.parse::<u64>(), "a Gi quantity") * 1024;
    }
    let n = quantity
        .strip_suffix("Mi")
        .unwrap_or_else(|| panic!("{quantity} is not in Mi or Gi"));
    must(n.parse(), "a Mi quantity")
}

#[tokio::test]
async fn the_manifests_parse_and_their_probes_ports_and_flags_match_the_server() {
    let documents = manifests();
    let deployment = kind(&documents, "Deployment");
    let service = kind(&documents, "Service");
    let secret = kind(&documents, "Secret");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args = parse_args(&strings(&container["args"]));

    // Beyond loopback, with a token from the Secret's volume.
    assert_eq!(args.host, "0.0.0.0");
    let token_file = args
        .token_file
        .clone()
        .unwrap_or_else(|| panic!("the Deployment binds 0.0.0.0 without --token-file"));
    let mount = container["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| token_file.starts_with(m["mountPath"].as_str().unwrap_or("-")))
        .unwrap_or_else(|| panic!("no volume mounted where --token-file points"));
    let volume = pod["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == mount["name"])
        .unwrap_or_else(|| panic!("no volume {}", mount["name"]));
    assert_eq!(volume["secret"]["secretName"], secret["metadata"]["name"]);
    let key = token_file
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    assert!(
        !secret["stringData"][key].is_null() || !secret["data"][key].is_null(),
        "the Secret has no key {key}"
    );

    // The container port is the port the server binds; probes and the Service use it.
    let port = &container["ports"][0];
    assert_eq!(port["containerPort"], Value::from(args.port));
    let name = port["name"].as_str().unwrap_or_default();
    let probes = [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")];
    for (probe, path) in probes {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert!(
            get["port"] == name || get["port"] == args.port,
            "{probe} port {}",
            get["port"]
        );
    }
    let target = &service["spec"]["ports"][0]["targetPort"];
    assert!(
        *target == name || *target == args.port,
        "the Service targets {target}"
    );
    for (label, value) in service["spec"]["selector"]
        .as_object()
        .unwrap_or_else(|| panic!("the Service has no selector"))
    {
        assert_eq!(
            &deployment["spec"]["template"]["metadata"]["labels"][label], value,
            "the Service selects {label}={value}, which the pods do not carry"
        );
    }

    // Resources: one CPU per run slot; memory for every worker's ceiling plus the server.
    let max_runs = args
        .max_runs
        .unwrap_or_else(|| panic!("the Deployment should state --max-runs"));
    let resources = &container["resources"];
    assert_eq!(
        resources["requests"]["cpu"],
        Value::from(max_runs.to_string())
    );
    let worker_mib = args.worker_memory_mb.unwrap_or(512);
    let limit = mebibytes(resources["limits"]["memory"].as_str().unwrap_or("0Mi"));
    assert!(
        limit >= max_runs as u64 * worker_mib + 256,
        "a {limit} MiB limit for {max_runs} workers of {worker_mib} MiB"
    );

    // Graceful termination: the preStop pause, the longest deadline and the grace.
    let pause: u64 = container["lifecycle"]["preStop"]["exec"]["command"]
        .as_array()
        .and_then(|c| c.last())
        .and_then(|s| s.as_str())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let deadline = nodetool_guest::RunLimits::STANDARD.timeout.as_secs();
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap_or(30);
    assert!(
        grace > pause + deadline,
        "terminationGracePeriodSeconds {grace} <= {pause} s pause + {deadline} s deadline"
    );

    // The probes as a kubelet sends them, through the real router configured by these flags.
    let world = World::fixtures();
    let state = world.state(ServerConfig {
        access: Access {
            public_hosts: args.public_hosts.clone(),
            token: Some(must(Token::new("deploy-test-token-0123456789"), "a token")),
            ..Access::loopback(args.port)
        },
        ..support::test_config()
    });
    let pod_ip = format!("10.1.2.3:{}", args.port);
    for (_, path) in probes {
        let answer = send(
            &state,
            Method::GET,
            path,
            &[("host", &pod_ip)],
            Body::empty(),
        )
        .await;
        assert_eq!(answer.status, StatusCode::OK, "{path}: {}", answer.text());
    }
    let api = send(
        &state,
        Method::GET,
        "/api/packs",
        &[("host", &pod_ip)],
        Body::empty(),
    )
    .await;
    assert_eq!(api.status, StatusCode::UNAUTHORIZED);
    // In-cluster clients reach the Service by its name, on the Service's port.
    let service_host = format!(
        "{}:{}",
        service["metadata"]["name"].as_str().unwrap_or_default(),
        service["spec"]["ports"][0]["port"]
    );
    let answer = send(
        &state,
        Method::GET,
        "/healthz",
        &[("host", &service_host)],
        Body::empty(),
    )
    .await;
    assert_eq!(
        answer.status,
        StatusCode::OK,
        "Host {service_host}: {}",
        answer.text()
    );
}

#[test]
fn the_dockerfiles_command_line_is_one_the_server_accepts() {
    let dockerfile = blocks(&guide(), "dockerfile");
    assert_eq!(dockerfile.len(), 1, "one Dockerfile in docs/deploy.md");
    let text = &dockerfile[0];
    let instruction = |name: &str| -> Value {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in the Dockerfile"));
        must(serde_json::from_str(line), "an exec-form instruction")
    };
    assert_eq!(
        instruction("ENTRYPOINT"),
        serde_json::json!(["nodetool-server"])
    );
    let args = parse_args(&strings(&instruction("CMD")));
    let exposed = text
        .lines()
        .find_map(|l| l.strip_prefix("EXPOSE "))
        .unwrap_or_default();
    assert_eq!(exposed, args.port.to_string());
    assert_eq!(args.host, "0.0.0.0");
    assert!(
        args.token_file.is_some(),
        "the image's default binds 0.0.0.0 with a token"
    );
}
