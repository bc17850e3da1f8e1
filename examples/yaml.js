// A guest library pack: js-yaml, compiled into a sandbox module on first use.
import { load, dump } from "@nodetool-ai/sandbox-yaml";

const config = load("service: nodetool\nports: [80, 443]\nlimits:\n  memory_mb: 64\n");
config.ports.push(8080);
return dump(config);
