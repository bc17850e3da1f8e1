"""botocore's SigV4 signers over requests read as JSON from stdin, for aws_interop.rs.

Input: {"cases": [case, ...]}; output: {"results": [result, ...]}, one per case, in order.
Every case names the signing time ("timestamp", as 20150830T123600Z), which replaces
botocore's clock, and its scope and credentials ("service", "region", "access_key",
"secret_key", "token" or null).

- "sigv4": SigV4Auth (S3SigV4Auth for s3) signs {"method", "url", "headers": [[name, value],
  ...] (repeats kept, in order), "body_b64" or null, "unsigned"} and the result is
  {"authorization", "headers": [[name, value], ...]} as botocore leaves the request.
- "presign": SigV4QueryAuth (S3SigV4QueryAuth for s3) signs {"method", "url", "expires"} and
  the result is {"url"}, the presigned URL.
- "client": an S3 client's generate_presigned_url("get_object") for {"bucket", "key",
  "expires"}, botocore encoding the key itself; the result is {"url"}.
- "verify": botocore's own canonical request, string to sign and signature over a presigned URL
  made elsewhere ({"method", "url"} without its X-Amz-Signature); the result is {"signature"}.
"""

import base64
import datetime
import json
import sys

import botocore.auth
from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth, SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials


def frozen(stamp):
    moment = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ")
    botocore.auth.get_current_datetime = lambda *args, **kwargs: moment


def credentials(case):
    return Credentials(case["access_key"], case["secret_key"], case["token"])


def sigv4(case):
    frozen(case["timestamp"])
    body = base64.b64decode(case["body_b64"]) if case["body_b64"] is not None else None
    request = AWSRequest(method=case["method"], url=case["url"], data=body)
    for name, value in case["headers"]:
        request.headers[name] = value
    if case["unsigned"]:
        request.context["client_config"] = Config(s3={"payload_signing_enabled": False})
    signer = S3SigV4Auth if case["service"] == "s3" else SigV4Auth
    signer(credentials(case), case["service"], case["region"]).add_auth(request)
    return {
        "authorization": request.headers["Authorization"],
        "headers": [[name, value] for name, value in request.headers.items()],
    }


def presign(case):
    frozen(case["timestamp"])
    request = AWSRequest(method=case["method"], url=case["url"])
    signer = S3SigV4QueryAuth if case["service"] == "s3" else SigV4QueryAuth
    signer(credentials(case), case["service"], case["region"], expires=case["expires"]).add_auth(
        request
    )
    return {"url": request.url}


def verify(case):
    signer_class = S3SigV4QueryAuth if case["service"] == "s3" else SigV4QueryAuth
    signer = signer_class(credentials(case), case["service"], case["region"])
    request = AWSRequest(method=case["method"], url=case["url"])
    request.context["timestamp"] = case["timestamp"]
    canonical = signer.canonical_request(request)
    string_to_sign = signer.string_to_sign(request, canonical)
    return {"signature": signer.signature(string_to_sign, request)}


def client(case):
    frozen(case["timestamp"])
    import botocore.session

    s3 = botocore.session.get_session().create_client(
        "s3",
        region_name=case["region"],
        aws_access_key_id=case["access_key"],
        aws_secret_access_key=case["secret_key"],
        aws_session_token=case["token"],
        config=Config(signature_version="s3v4", s3={"addressing_style": "virtual"}),
    )
    url = s3.generate_presigned_url(
        "get_object",
        Params={"Bucket": case["bucket"], "Key": case["key"]},
        ExpiresIn=case["expires"],
    )
    return {"url": url}


KINDS = {"sigv4": sigv4, "presign": presign, "verify": verify, "client": client}


def main():
    cases = json.load(sys.stdin)["cases"]
    results = [KINDS[case["kind"]](case) for case in cases]
    json.dump({"results": results}, sys.stdout)


if __name__ == "__main__":
    main()
