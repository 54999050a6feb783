"""The recording hook names a deciding call's session from the head its handler read, so
recording adds no second ``head()`` read to predicate, prioritize and the other decisions; calls
refused before the handler ran still name their session."""

from __future__ import annotations

from policy_extender.config import Config
from policy_extender.replay.reading import read_cycles
from policy_extender.session.sqlite import SqliteStore
from policy_extender.web import create_app
from tests.support.bodies import sample
from tests.support.policies import write_policies
from tests.support.recorded import RECORDED


class CountingStore(SqliteStore):
    """The real SQLite store, counting its head() reads."""

    heads = 0

    def head(self):
        self.heads += 1
        return super().head()


def test_deciding_calls_read_the_head_once_and_every_call_names_the_session(tmp_path):
    store = CountingStore(str(tmp_path / "sessions.sqlite3"))
    app = create_app(Config(policy_dirs=(str(write_policies(tmp_path / "p", RECORDED)),), reload_interval=0.0,
                            record=str(tmp_path / "recording")), sessions=store)
    client = app.test_client()
    post = lambda verb, body, **kw: client.post(f"/{verb}", data=body, **kw).status_code  # noqa: E731
    assert post("onSessionOpen", sample("onSessionOpen"), content_type="application/json") == 200
    for verb in ("predicate", "prioritize", "jobEnqueueable", "queueOverused", "jobReady", "preemptable"):
        before = store.heads
        assert post(verb, sample(verb), content_type="application/json") == 200
        assert store.heads - before == 1, verb
    assert post("predicate", sample("predicate"), content_type="text/plain") == 415  # no handler ran
    assert post("onSessionClose", b"{}", content_type="application/json") == 200
    app.extensions["policy_extender"].stop()

    problems: list = []
    [cycle] = list(read_cycles(str(tmp_path / "recording"), problems))
    assert problems == [] and cycle.session_id
    assert [call.verb for call in cycle.calls] == ["onSessionOpen", "predicate", "prioritize", "jobEnqueueable",
                                                   "queueOverused", "jobReady", "preemptable", "predicate",
                                                   "onSessionClose"]
    assert [call.status for call in cycle.calls][-2:] == [415, 200]
