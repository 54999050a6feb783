"""Decoders for a new read set are built once, even when many threads ask at the same moment
(a fresh gunicorn worker's first 16 parallel predicates)."""

from __future__ import annotations

import threading

from policy_extender.wire import decode
from tests.support.bodies import SAMPLES


def test_threads_asking_together_for_a_new_read_set_share_one_decoder():
    reads = {"node": frozenset({("Node", "metadata", "annotations"), ("Capacity",)}),
             "task": frozenset({("Priority",), ("Pod", "spec", "priorityClassName")})}
    body = (SAMPLES / "predicate.json").read_bytes()
    start = threading.Barrier(16)
    built, answers, errors = [], [], []

    def ask():
        try:
            start.wait()
            built.append(decode._predicate_decoder(decode.freeze_reads(reads)))
            answers.append(decode.decode_predicate(body, reads).node.name)
        except Exception as exc:  # any failure is the finding
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len({id(d) for d in built}) == 1
    assert set(answers) == {"node-0000"} and len(answers) == 16


def test_prepare_builds_every_verb_decoder_before_a_request_asks():
    reads = {"task": frozenset({("TaskRole",)}), "node": frozenset({("Releasing",)}),
             "job": frozenset({("Priority",)}), "queue": frozenset({("Weight",)})}
    decode.prepare(reads)
    frozen = decode.freeze_reads(reads)
    first = decode.prioritize_body_decoder(frozen), decode._job_decoder(frozen), decode._queue_decoder(frozen)
    decode.prepare(reads)
    assert (decode.prioritize_body_decoder(frozen), decode._job_decoder(frozen), decode._queue_decoder(frozen)) == first
