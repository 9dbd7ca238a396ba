"""Client half of scripts/k8s-test.sh: drive the chart's release through its Service.

Runs on the host inside one of the test cluster's worker namespaces (`ip netns exec`), where
the Service's ClusterIP and every pod's IP are routed, and speaks to the server with the OpenAI
SDK (retries off: a failed request counts). Subcommands, each printing one JSON line:

  ready     wait until the Service and the given pods answer /health "ready"
  serve     chat with `documents` through the Service (the repeat hits every chunk); a document
            ingested through pod A is cited through pod B (shared library); chunks computed on
            pod A are hits on pod B (Redis tier)
  loop      a bounded request loop through the Service until --stop-file appears (chat, and an
            ingest every --ingest-every requests, whose acknowledged ids go to --ids-file);
            counts failures and, given --mark-file (epoch seconds of an event such as a node
            kill), how long after it requests failed
  documents every id in --ids-file is still in the library (no acknowledged document lost)
  ingest    ingest one document through the Service and wait until it is cached
  cited     the given pods cite that document in a retrieval answer (a pod that never ingested
            it serves the shared library)
Failures exit 1 with the reason on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any, NamedTuple

import httpx
from check_client import CheckFailure, ask_with_documents, check, cited, wait_cached, wait_ready
from openai import OpenAI, OpenAIError

DOCUMENTS = [
    "The Velmar bridge opened in 1911 and carries the tram line across the Orsk river.",
    "Velmar's tram line runs from the harbour to the observatory on Kessel hill.",
    "The observatory on Kessel hill was built by the astronomer Ida Brenner in 1894.",
]
QUESTION = "When did the Velmar bridge open?"
LIBRARY_DOCUMENT_ID = "k8s-shared-library"
LIBRARY_DOCUMENT = (
    "The lighthouse keeper of Cape Ostra is Tomas Vell. He has kept the lamp on the northern "
    "rocks every night since the storm of 1987."
)
LIBRARY_QUESTION = "Who is the lighthouse keeper of Cape Ostra?"


def sdk(url: str, api_key: str, timeout: float = 300) -> OpenAI:
    return OpenAI(base_url=f"{url}/v1", api_key=api_key, timeout=timeout, max_retries=0)


def http_client(url: str, api_key: str, timeout: float = 120) -> httpx.Client:
    headers = {"Authorization": f"Bearer {api_key}"}
    return httpx.Client(base_url=url, headers=headers, timeout=timeout)


def model_of(client: OpenAI) -> str:
    return client.models.list().data[0].id


def blend_with_documents(client: OpenAI, model: str, documents: list[str]) -> dict[str, Any]:
    return ask_with_documents(client, model, QUESTION, documents)


def cites(client: OpenAI, model: str, timeout_s: float) -> dict[str, Any]:
    """The blend statistics of an answer on `client` citing the library document."""
    return cited(client, model, LIBRARY_QUESTION, LIBRARY_DOCUMENT_ID, timeout_s)


def ingest(http: httpx.Client, document_id: str, text: str) -> str:
    """The id the library acknowledged (a text it holds already keeps its first id)."""
    reply = http.post("/v1/documents", json={"documents": [{"id": document_id, "text": text}]})
    check(reply.status_code == 200, f"ingest {document_id}: {reply.status_code} {reply.text}")
    return reply.json()["data"][0]["id"]


def serve(args: argparse.Namespace) -> dict[str, Any]:
    check(len(args.pod) == 2, "serve needs two --pod URLs")
    service = sdk(args.url, args.api_key)
    pod_a, pod_b = (sdk(url, args.api_key) for url in args.pod)
    model = model_of(service)

    # Chat with documents through the Service; the reordered repeat hits every chunk, wherever
    # the Service sends it (its own tiers, or Redis when it lands on the other pod).
    cold = blend_with_documents(service, model, DOCUMENTS)
    check(cold["chunks_hit"] + cold["chunks_missed"] == 3, f"first request: {cold}")
    time.sleep(args.redis_write_wait)
    warm = blend_with_documents(service, model, [DOCUMENTS[2], DOCUMENTS[0], DOCUMENTS[1]])
    check(warm["chunks_hit"] == 3 and warm["chunks_missed"] == 0, f"repeat: {warm}")

    # Shared library: ingested through pod A, cited through pod B.
    with http_client(args.pod[0], args.api_key) as http_a:
        ingest(http_a, LIBRARY_DOCUMENT_ID, LIBRARY_DOCUMENT)
        wait_cached(http_a, LIBRARY_DOCUMENT_ID, timeout_s=300)
    library_blend = cites(pod_b, model, timeout_s=60)

    # Redis tier: chunks no pod has seen, computed on pod A, are hits on pod B.
    tag = uuid.uuid4().hex[:8]
    fresh = [f"[{tag}] {document}" for document in DOCUMENTS]
    computed = blend_with_documents(pod_a, model, fresh)
    check(computed["chunks_missed"] == 3, f"fresh chunks on pod A: {computed}")
    time.sleep(args.redis_write_wait)  # pod A writes to Redis asynchronously
    shared = blend_with_documents(pod_b, model, fresh)
    check(shared["chunks_hit"] == 3 and shared["chunks_missed"] == 0, f"on pod B: {shared}")
    return {
        "repeat_blend": warm,
        "library_cited_on_b": library_blend,
        "computed_on_a": computed,
        "redis_hits_on_b": shared,
    }


def failure_name(exc: BaseException) -> str:
    """The error and what caused it: a timeout on connect (no pod behind the address) reads
    differently from one waiting for an answer (a slow pod)."""
    cause = exc.__cause__
    name = type(exc).__name__ + (f" ({type(cause).__name__})" if cause is not None else "")
    return f"{name}: {str(exc)[:160]}"


class Attempt(NamedTuple):
    """One request of the loop. A request sent before the dead pod left the endpoints may fail
    a whole timeout later, and still counts as sent inside the window."""

    sent: float
    seconds: float
    error: str
    """Empty when it was answered."""
    kind: str
    """``chat`` or ``ingest``."""

    def described(self, started: float) -> dict[str, Any]:
        return {"sent_at_s": round(self.sent - started, 1), "took_s": round(self.seconds, 1),
                "kind": self.kind, "error": self.error}  # fmt: skip


def loop(args: argparse.Namespace) -> dict[str, Any]:
    """Requests one after another until the stop file appears, each either answered or failed."""
    client = sdk(args.url, args.api_key, timeout=args.request_timeout)
    model = model_of(client)
    records: list[Attempt] = []
    acknowledged: list[str] = []
    stop = Path(args.stop_file)
    started = time.time()
    with http_client(args.url, args.api_key, timeout=args.request_timeout) as http:
        while not stop.exists() and time.time() - started < args.max_seconds:
            index = len(records)
            sent = time.time()
            error = ""
            ingesting = (
                bool(args.ingest_every) and index % args.ingest_every == args.ingest_every - 1
            )
            try:
                if ingesting:
                    document_id = f"k8s-loop-{uuid.uuid4().hex[:12]}"
                    text = f"Loop note {document_id}: {DOCUMENTS[index % 3]}"
                    acknowledged.append(ingest(http, document_id, text))
                else:
                    client.chat.completions.create(
                        model=model,
                        messages=[{"role": "user", "content": f"Say the number {index}."}],
                        max_tokens=4,
                        temperature=0,
                    )
            except (OpenAIError, httpx.HTTPError, CheckFailure) as exc:
                error = failure_name(exc)
            kind = "ingest" if ingesting else "chat"
            records.append(Attempt(sent, time.time() - sent, error, kind))
            if error:
                time.sleep(0.2)
    if args.ids_file:
        Path(args.ids_file).write_text("\n".join(acknowledged) + ("\n" if acknowledged else ""))
    failures = [record for record in records if record.error]
    took = sorted(record.seconds for record in records)
    result: dict[str, Any] = {
        "requests": len(records),
        "failed": len(failures),
        "seconds": round(time.time() - started, 1),
        "documents_acknowledged": len(acknowledged),
        "request_p50_s": round(took[len(took) // 2], 2) if took else 0.0,
        "request_max_s": round(took[-1], 2) if took else 0.0,
        "errors": sorted({record.error for record in failures})[:5],
        "failures": [record.described(started) for record in failures[:5]],
        "slowest": [
            record.described(started)
            for record in sorted(records, key=lambda record: -record.seconds)[:3]
        ],
    }
    if args.mark_file and Path(args.mark_file).exists():
        mark = float(Path(args.mark_file).read_text().strip())
        after = [record for record in records if record.sent >= mark]
        failed_after = [record.sent for record in after if record.error]
        result["requests_after_mark"] = len(after)
        result["failed_after_mark"] = len(failed_after)
        if failed_after:
            last = max(failed_after)
            result["failing_seconds_after_mark"] = round(last - mark, 1)
            later = [record.sent for record in after if not record.error and record.sent > last]
            check(bool(later), "no request succeeded after the last failure")
            result["all_succeed_from_s"] = round(min(later) - mark, 1)
            result["succeeded_after_last_failure"] = len(later)
        else:
            result["failing_seconds_after_mark"] = 0.0
    return result


def documents(args: argparse.Namespace) -> dict[str, Any]:
    ids = [line for line in Path(args.ids_file).read_text().splitlines() if line]
    missing = []
    with http_client(args.url, args.api_key) as http:
        for document_id in ids:
            if http.get(f"/v1/documents/{document_id}").status_code != 200:
                missing.append(document_id)
    check(not missing, f"{len(missing)} of {len(ids)} acknowledged documents lost: {missing[:5]}")
    return {"acknowledged_documents_present": len(ids)}


def ingest_command(args: argparse.Namespace) -> dict[str, Any]:
    with http_client(args.url, args.api_key) as http:
        ingest(http, LIBRARY_DOCUMENT_ID, LIBRARY_DOCUMENT)
        wait_cached(http, LIBRARY_DOCUMENT_ID, timeout_s=300)
    return {"ingested": LIBRARY_DOCUMENT_ID}


def cited_command(args: argparse.Namespace) -> dict[str, Any]:
    blends = {}
    for url in args.pod:
        client = sdk(url, args.api_key)
        blends[url] = cites(client, model_of(client), timeout_s=60)
    return {"cited_on": blends}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "command", choices=["ready", "serve", "loop", "documents", "ingest", "cited"]
    )
    parser.add_argument("--url", required=True, help="the Service, http://<ClusterIP>:<port>")
    parser.add_argument("--pod", action="append", default=[], help="a pod's own URL")
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--ready-timeout", type=float, default=900)
    parser.add_argument("--redis-write-wait", type=float, default=3, help="seconds")
    parser.add_argument("--stop-file", help="loop: stop when this file exists")
    parser.add_argument("--max-seconds", type=float, default=600, help="loop: bound")
    parser.add_argument("--request-timeout", type=float, default=30, help="loop: per request")
    parser.add_argument("--ingest-every", type=int, default=5, help="loop: 0 for none")
    parser.add_argument("--ids-file", help="loop writes, documents reads acknowledged ids")
    parser.add_argument("--mark-file", help="loop: epoch seconds of the event to time from")
    args = parser.parse_args()
    try:
        if args.command == "ready":
            ready_s = max(wait_ready(url, args.ready_timeout)[1] for url in [args.url, *args.pod])
            result: dict[str, Any] = {"ready_s": round(ready_s, 1)}
        elif args.command == "loop":
            check(bool(args.stop_file), "loop needs --stop-file")
            result = loop(args)
        else:
            commands = {
                "serve": serve,
                "documents": documents,
                "ingest": ingest_command,
                "cited": cited_command,
            }
            result = commands[args.command](args)
    except (CheckFailure, OpenAIError, httpx.HTTPError) as exc:
        print(f"FAILED ({args.command}): {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
