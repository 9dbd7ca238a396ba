"""Client half of scripts/docker-test.sh: drive a server started by `docker compose up`.

``first`` waits for /health, sends a chat request with three ``documents`` twice in two orders
(the second must hit every chunk), uploads a small file to ``POST /v1/documents``, waits until it
is ``cached`` and asks a ``retrieval`` question that must cite it. ``restarted`` runs after
``docker compose down`` and ``up``, and again with ``--restarts 1`` after the engine process was
killed and Docker restarted the container: the document must still be ``cached`` and the next
retrieval request must hit its chunk KV. Each prints one JSON line of measurements; failures
exit 1.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from check_client import (
    CheckFailure,
    ask_with_documents,
    ask_with_retrieval,
    check,
    wait_cached,
    wait_ready,
)
from openai import OpenAI

DOCUMENTS = [
    "The Velmar bridge opened in 1931 and carries trams across the river Oss.",
    "Harbour pilots in Velmar must pass an exam on the river's sandbanks every year.",
    "The old Velmar lighthouse now houses a museum of ships' clocks.",
]
UPLOAD_NAME = "port-varen.md"
UPLOAD_TEXT = (
    "# Port Varen notes\n\n"
    "The lighthouse keeper of Port Varen is Idris Calloway. He lights the lamp at dusk and "
    "logs every passing ship in a green ledger kept in the lamp room.\n"
)
QUESTION = "Who is the lighthouse keeper of Port Varen?"
DOCUMENTS_QUESTION = "When did the Velmar bridge open?"


def restarts(container: str) -> int:
    inspect = ["docker", "inspect", "--format", "{{.RestartCount}}", container]
    answer = subprocess.run(inspect, capture_output=True, text=True, check=True)
    return int(answer.stdout)


def restarted(container: str, expected: int) -> Callable[[], str | None]:
    """A container that exits is restarted by its policy, so its restart count, not its state,
    tells a crash from a slow start: /health is asked only once the count is the expected one."""

    def waiting() -> str | None:
        count = restarts(container)
        check(count <= expected, f"{container} exited unexpectedly: see its logs")
        return None if count == expected else f"restarted {count} times, waiting for {expected}"

    return waiting


def first_start(client: OpenAI, http: httpx.Client, model: str, state: Path) -> dict[str, Any]:
    cold = ask_with_documents(client, model, DOCUMENTS_QUESTION, DOCUMENTS)
    reordered = [DOCUMENTS[2], DOCUMENTS[0], DOCUMENTS[1]]
    warm = ask_with_documents(client, model, DOCUMENTS_QUESTION, reordered)
    check(cold["chunks_hit"] + cold["chunks_missed"] == 3, f"first request: {cold}")
    check(warm["chunks_hit"] == 3 and warm["chunks_missed"] == 0, f"reordered: {warm}")

    files = {"file": (UPLOAD_NAME, UPLOAD_TEXT.encode(), "text/markdown")}
    uploaded = http.post("/v1/documents", files=files)
    check(uploaded.status_code == 200, f"upload: {uploaded.status_code} {uploaded.text}")
    document_id = uploaded.json()["data"][0]["id"]
    wait_cached(http, document_id, timeout_s=300)
    sources, blend = ask_with_retrieval(client, model, QUESTION, max_tokens=12)
    check(sources and sources[0]["document_id"] == document_id, f"not cited: {sources}")
    state.write_text(json.dumps({"document_id": document_id}))
    return {"reordered_blend": warm, "document_id": document_id, "retrieval_blend": blend}


def after_restart(client: OpenAI, http: httpx.Client, model: str, state: Path) -> dict[str, Any]:
    document_id = json.loads(state.read_text())["document_id"]
    document = http.get(f"/v1/documents/{document_id}")
    check(document.status_code == 200, f"document lost: {document.status_code} {document.text}")
    check(document.json()["status"] == "cached", f"not cached after restart: {document.json()}")
    sources, blend = ask_with_retrieval(client, model, QUESTION, max_tokens=12)
    check(sources and sources[0]["document_id"] == document_id, f"not cited: {sources}")
    check(blend["chunks_hit"] >= 1 and blend["chunks_missed"] == 0, f"KV recomputed: {blend}")
    return {"document_id": document_id, "retrieval_blend": blend}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("phase", choices=["first", "restarted"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--container", required=True, help="the compose service's container")
    parser.add_argument("--state", type=Path, required=True, help="JSON file passed between phases")
    parser.add_argument("--ready-timeout", type=float, default=1200)
    parser.add_argument(
        "--restarts", type=int, default=0, help="times Docker restarted the container by now"
    )
    args = parser.parse_args()
    try:
        waiting = restarted(args.container, args.restarts)
        health, ready_s = wait_ready(args.url, args.ready_timeout, waiting)
        model = health["model"]
        client = OpenAI(base_url=f"{args.url}/v1", api_key=args.api_key, timeout=600)
        headers = {"Authorization": f"Bearer {args.api_key}"}
        with httpx.Client(base_url=args.url, headers=headers, timeout=120) as http:
            phase = first_start if args.phase == "first" else after_restart
            result = phase(client, http, model, args.state)
    except CheckFailure as exc:
        print(f"FAILED ({args.phase}): {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"phase": args.phase, "ready_s": round(ready_s, 1), **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
