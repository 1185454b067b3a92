"""SQS throughput of the moto stand-in at depth, stock moto versus kubespot's extended moto.

Starts ``MotoServer`` on loopback, fills one standard queue over HTTP with SendMessageBatch, then
runs ``--concurrency`` threads sharing one boto3 client, each looping ReceiveMessage (up to 10,
no long poll) + DeleteMessageBatch until ``--budget`` messages are consumed or ``--duration``
seconds pass. The queue is filled with ``--queued`` + ``--budget`` messages so it never holds
fewer than ``--queued`` while receive+delete is measured.

The stock-moto baseline runs first (extensions are class patches and cannot be removed once
installed) with a small budget and a time cap, since it manages only a few messages a second.

Prints one JSON object: ``queued``, ``receive_delete_per_s``, ``send_per_s`` (extended moto) and
the same figures under ``baseline`` (stock moto).

    python benchmarks/moto_sqs_throughput.py [--queued 2000] [--concurrency 4] [--no-baseline]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubespot.sim.awssim import MotoServer


def _fill(sqs: Any, url: str, count: int, concurrency: int) -> float:
    """Send ``count`` messages in batches of 10; return messages sent per second."""
    batches = [
        [{"Id": str(i), "MessageBody": json.dumps({"n": start + i})} for i in range(min(10, count - start))]
        for start in range(0, count, 10)
    ]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for result in pool.map(
            lambda entries: sqs.send_message_batch(QueueUrl=url, Entries=entries), batches
        ):
            if result.get("Failed"):
                raise RuntimeError(f"send failed: {result['Failed']}")
    return count / (time.perf_counter() - started)


def _drain(sqs: Any, url: str, budget: int, duration: float, concurrency: int) -> tuple[int, float]:
    """Receive+delete until ``budget`` messages or ``duration`` s; return (messages, seconds)."""
    lock = threading.Lock()
    done = 0
    deadline = time.perf_counter() + duration

    def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            with lock:
                if done >= budget:
                    return
            messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get(
                "Messages", []
            )
            if not messages:
                continue
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
            result = sqs.delete_message_batch(QueueUrl=url, Entries=entries)
            if result.get("Failed"):
                raise RuntimeError(f"delete failed: {result['Failed']}")
            with lock:
                done += len(messages)

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return done, time.perf_counter() - started


def measure(*, extended: bool, queued: int, budget: int, duration: float, concurrency: int) -> dict[str, Any]:
    with MotoServer(install_extensions=extended) as server:
        sqs = server.client("sqs", max_pool_connections=concurrency * 2)
        url = sqs.create_queue(QueueName="bench")["QueueUrl"]
        send_per_s = _fill(sqs, url, queued + budget, concurrency)
        depth_before = int(
            sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])[
                "Attributes"
            ]["ApproximateNumberOfMessages"]
        )
        received, seconds = _drain(sqs, url, budget, duration, concurrency)
        return {
            "depth_at_start": depth_before,
            "received_and_deleted": received,
            "seconds": round(seconds, 3),
            "receive_delete_per_s": round(received / seconds, 1),
            "send_per_s": round(send_per_s, 1),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--queued", type=int, default=2000, help="messages kept queued (minimum depth)")
    parser.add_argument("--budget", type=int, default=3000, help="messages to receive+delete (extended)")
    parser.add_argument("--duration", type=float, default=20.0, help="time cap for the drain, seconds")
    parser.add_argument("--concurrency", type=int, default=4, help="receiver threads sharing one client")
    parser.add_argument("--baseline-budget", type=int, default=100, help="messages for the stock run")
    parser.add_argument("--baseline-duration", type=float, default=15.0)
    parser.add_argument("--no-baseline", action="store_true", help="skip the stock-moto measurement")
    args = parser.parse_args(argv)

    out: dict[str, Any] = {"queued": args.queued, "concurrency": args.concurrency, "receive_batch": 10}
    if not args.no_baseline:
        out["baseline"] = measure(
            extended=False,
            queued=args.queued,
            budget=args.baseline_budget,
            duration=args.baseline_duration,
            concurrency=args.concurrency,
        )
    extended = measure(
        extended=True,
        queued=args.queued,
        budget=args.budget,
        duration=args.duration,
        concurrency=args.concurrency,
    )
    out.update(extended)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
