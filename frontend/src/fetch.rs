//! The HTTP transport behind `--allow-fetch`. The guest has already checked the host against
//! the allowlist and re-checks the final URL and the body size; this client never follows a
//! redirect (the guest sees the 3xx) and stops reading at the size limit.

use std::time::Duration;

use nodetool_guest::{FetchClient, FetchFuture, FetchRequest, FetchResponse};

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

impl FetchClient for HttpClient {
    fn fetch(&self, request: FetchRequest, max_response_bytes: usize) -> FetchFuture {
        let agent = self.agent.clone();
        Box::pin(nodetool_runtime::dispatch::on_own_thread(move |deliver| {
            deliver.send(perform(&agent, request, max_response_bytes));
        }))
    }
}

fn perform(
    agent: &ureq::Agent,
    request: FetchRequest,
    max: usize,
) -> Result<FetchResponse, String> {
    let method: ureq::http::Method = request
        .method
        .parse()
        .map_err(|_| format!("fetch: unsupported method {}", request.method))?;
    let mut builder = ureq::http::Request::builder()
        .method(method)
        .uri(&request.url);
    for (name, value) in &request.headers {
        builder = builder.header(name, value);
    }
    let http_request = builder
        .body(request.body.unwrap_or_default())
        .map_err(|e| format!("fetch: {e}"))?;
    let mut response = agent.run(http_request).map_err(|e| format!("fetch: {e}"))?;
    let status = response.status();
    let headers = response
        .headers()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect();
    let body = response
        .body_mut()
        .with_config()
        .limit(max as u64 + 1)
        .read_to_vec()
        .map_err(|e| format!("fetch: reading the response failed: {e}"))?;
    Ok(FetchResponse {
        status: status.as_u16(),
        status_text: status.canonical_reason().unwrap_or_default().to_string(),
        url: request.url,
        headers,
        body,
    })
}
