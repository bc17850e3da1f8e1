//! The fetch policy, called the way a run's authority is called: the header limits hold (a
//! body that sends a huge header object is refused at once, not merged in quadratic time),
//! repeats merge, and only allowed hosts are reached.

use std::sync::{Arc, Mutex};

use nodetool_broker::{
    Authority, BodyReader, FetchGrant, FetchRequest, FetchResponse, FetchTransport,
    OutboundRequest, Received, Reply, Request, RunAuthority, TransportFuture,
};

/// Answers every request with an empty 200, keeping what it was asked.
#[derive(Default)]
struct Recorder(Mutex<Vec<OutboundRequest>>);

impl FetchTransport for Recorder {
    fn perform(&self, request: OutboundRequest, reader: BodyReader) -> TransportFuture {
        if let Ok(mut seen) = self.0.lock() {
            seen.push(request.clone());
        }
        Box::pin(std::future::ready(Ok(Received {
            response: FetchResponse {
                status: 200,
                url: request.url,
                ..FetchResponse::default()
            },
            charge: reader.charge,
        })))
    }
}

fn ask(authority: &RunAuthority, request: FetchRequest) -> Result<Reply, String> {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut future = authority.ask(Request::Fetch(request));
    match future.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(answer) => answer.map(|g| g.reply),
        std::task::Poll::Pending => panic!("the recorder answers at once"),
    }
}

fn authority(recorder: &Arc<Recorder>) -> RunAuthority {
    RunAuthority::new(
        None,
        Some(FetchGrant {
            allowed_hosts: vec!["api.example.com".into()],
            max_response_bytes: 1024,
            transport: Arc::clone(recorder) as Arc<dyn FetchTransport>,
        }),
    )
}

#[test]
fn too_many_headers_are_refused_at_once() {
    let recorder = Arc::new(Recorder::default());
    let authority = authority(&recorder);
    let headers: Vec<(String, String)> = (0..100_000)
        .map(|i| (format!("x-h{i}"), String::new()))
        .collect();
    let refused = ask(
        &authority,
        FetchRequest {
            url: "https://api.example.com/".into(),
            headers,
            ..FetchRequest::default()
        },
    )
    .err()
    .unwrap_or_default();
    assert!(refused.contains("at most 256 headers"), "{refused}");
    let refused = ask(
        &authority,
        FetchRequest {
            url: "https://api.example.com/".into(),
            headers: vec![("x-big".into(), "v".repeat(70 * 1024))],
            ..FetchRequest::default()
        },
    )
    .err()
    .unwrap_or_default();
    assert!(refused.contains("byte limit"), "{refused}");
    assert!(recorder.0.lock().map(|r| r.is_empty()).unwrap_or(false));
}

#[test]
fn repeated_headers_merge_and_only_allowed_hosts_are_reached() {
    let recorder = Arc::new(Recorder::default());
    let authority = authority(&recorder);
    let headers = (0..200)
        .map(|i| {
            let name = if i % 2 == 0 { "X-Tag" } else { "x-tag" };
            (name.to_string(), i.to_string())
        })
        .collect();
    let reply = ask(
        &authority,
        FetchRequest {
            url: "https://API.example.com/path#fragment".into(),
            headers,
            ..FetchRequest::default()
        },
    );
    assert!(reply.is_ok(), "{reply:?}");
    let sent = recorder.0.lock().map(|r| r.clone()).unwrap_or_default();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].url, "https://api.example.com/path");
    assert_eq!(sent[0].headers.len(), 1);
    assert!(
        sent[0].headers[0].1.starts_with("0, 1, 2"),
        "{:?}",
        sent[0].headers
    );
    let refused = ask(
        &authority,
        FetchRequest {
            url: "https://evil.example.com/".into(),
            ..FetchRequest::default()
        },
    )
    .err()
    .unwrap_or_default();
    assert!(refused.contains("not an allowed host"), "{refused}");
}
