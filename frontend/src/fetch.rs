//! The HTTP transport behind `--allow-fetch`. The run's authority (`nodetool_broker`) has
//! already checked the request against the grant and re-checks the final URL and the body
//! size; this client never follows a redirect (the guest sees the 3xx), charges every chunk
//! it reads to the run's budget, and stops reading at the size limit.

use std::time::Duration;

use std::io::Read;

use nodetool_broker::{
    BodyReader, FetchResponse, FetchTransport, OutboundRequest, Received, TransportFuture,
};

/// A blocking HTTP client run on its own thread per request.
pub struct HttpClient {
    agent: ureq::Agent,
}

impl Default for HttpClient {
    fn default() -> Self {
        HttpClient::new()
    }
}

impl HttpClient {
    pub fn new() -> Self {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(Duration::from_secs(30)))
            .build();
        HttpClient {
            agent: ureq::Agent::new_with_config(config),
        }
    }
}

impl FetchTransport for HttpClient {
    fn perform(&self, request: OutboundRequest, reader: BodyReader) -> TransportFuture {
        let agent = self.agent.clone();
        Box::pin(nodetool_runtime::dispatch::on_own_thread(move |deliver| {
            deliver.send(perform(&agent, request, reader));
        }))
    }
}

/// How much of a body is read at a time (and charged to the run's budget before it is kept).
const CHUNK_BYTES: usize = 64 * 1024;

fn perform(
    agent: &ureq::Agent,
    request: OutboundRequest,
    reader: BodyReader,
) -> Result<Received, String> {
    let BodyReader {
        max_bytes: max,
        mut charge,
    } = reader;
    let method: ureq::http::Method = request
        .method
        .parse()
        .map_err(|_| format!("unsupported method {}", request.method))?;
    let mut builder = ureq::http::Request::builder()
        .method(method)
        .uri(&request.url);
    for (name, value) in &request.headers {
        builder = builder.header(name, value);
    }
    let http_request = builder
        .body(request.body.unwrap_or_default())
        .map_err(|e| e.to_string())?;
    let mut response = agent.run(http_request).map_err(|e| e.to_string())?;
    let status = response.status();
    let headers: Vec<(String, String)> = response
        .headers()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect();
    let mut source = response
        .body_mut()
        .with_config()
        .limit(max as u64 + 1)
        .reader();
    // Room for the announced length up front (never past the cap), so the body is not copied
    // as it grows; nothing is touched, or charged, until it arrives.
    let announced = headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = Vec::with_capacity(announced.min(max.saturating_add(1)));
    let mut chunk = vec![0u8; CHUNK_BYTES];
    loop {
        let n = source
            .read(&mut chunk)
            .map_err(|e| format!("reading the response failed: {e}"))?;
        if n == 0 {
            break;
        }
        charge.grow(n).map_err(|e| e.to_string())?;
        body.extend_from_slice(&chunk[..n]);
        if body.len() > max {
            break;
        }
    }
    Ok(Received {
        response: FetchResponse {
            status: status.as_u16(),
            status_text: status.canonical_reason().unwrap_or_default().to_string(),
            url: request.url,
            headers,
            body,
        },
        charge,
    })
}
