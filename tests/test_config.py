"""Configuration: precedence flags > environment > YAML > defaults, errors that say where, docs."""

from __future__ import annotations

from pathlib import Path

import pytest

from policy_extender import config
from policy_extender.config import MIB, Config, ConfigError, load
from policy_extender.decide.table import VERBS

DOCS = Path(__file__).parents[1] / "docs" / "configuration.md"


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "extender.yaml"
    path.write_text(text)
    return str(path)


def test_defaults_match_volcanos_sidecar_and_the_wire_doc():
    cfg = load({}, {})
    assert cfg.bind == "127.0.0.1:8713"
    assert cfg.policy_dirs == ("policies",)
    assert cfg.body_limit_for("predicate") == 16 * MIB
    # the wire doc's sizes: snapshot 268 MB at 500 nodes x 30 pods, prioritize up to 93 MB
    assert cfg.body_limit_for("onSessionOpen") == 1024 * MIB
    assert cfg.body_limit_for("prioritize") == 256 * MIB
    assert cfg.verb_paths()["/predicate"] == "predicate"
    assert sorted(cfg.verb_paths().values()) == sorted(VERBS)  # a path per verb of the table, no more


def test_flags_beat_environment_beat_yaml_beat_defaults(tmp_path):
    path = write(tmp_path, "workers: 3\nthreads: 5\nbind: 0.0.0.0:9000\nlog_level: debug\n")
    env = {"POLICY_EXTENDER_THREADS": "7", "POLICY_EXTENDER_BIND": "127.0.0.1:9001"}
    cfg = load({"bind": "127.0.0.1:9002"}, env, path)
    assert (cfg.bind, cfg.threads, cfg.workers, cfg.log_level) == ("127.0.0.1:9002", 7, 3, "debug")
    assert cfg.log_format == "text"  # untouched: the default


def test_config_file_can_come_from_the_environment(tmp_path):
    path = write(tmp_path, "workers: 9\n")
    assert load({}, {"POLICY_EXTENDER_CONFIG": path}).workers == 9


def test_renamed_verbs_map_paths_to_kinds_and_keep_the_rest(tmp_path):
    path = write(tmp_path, "verbs:\n  predicate: customFilter\npath_prefix: /extender\n")
    routes = load({}, {}, path).verb_paths()
    assert routes["/extender/customFilter"] == "predicate"
    assert routes["/extender/prioritize"] == "prioritize"
    assert "/extender/predicate" not in routes
    env_routes = load({}, {"POLICY_EXTENDER_VERBS": "prioritize=customScore"}).verb_paths()
    assert env_routes["/customScore"] == "prioritize"


def test_body_limits_merge_with_the_snapshot_default():
    cfg = load({"body_limits": "predicate=1MiB"}, {})
    assert cfg.body_limit_for("predicate") == MIB
    assert cfg.body_limit_for("onSessionOpen") == 1024 * MIB
    assert cfg.body_limit_for("jobReady") == 16 * MIB


def test_policy_dirs_from_a_list_or_comma_text(tmp_path):
    assert load({}, {"POLICY_EXTENDER_POLICY_DIRS": "a,b"}).policy_dirs == ("a", "b")
    assert load({}, {}, write(tmp_path, "policy_dirs: [x, y]\n")).policy_dirs == ("x", "y")


@pytest.mark.parametrize("flags, env, message", [
    ({"workers": "many"}, {}, "flag --workers: expected a whole number"),
    ({}, {"POLICY_EXTENDER_BODY_LIMIT": "lots"}, "environment variable POLICY_EXTENDER_BODY_LIMIT: expected a size"),
    ({"verbs": "filter=x"}, {}, "unknown verb kind 'filter'"),
    ({"session_store": "mysql://x"}, {}, "expected sqlite:PATH, redis://HOST:PORT/DB or redis.sentinel://"),
    ({"log_format": "xml"}, {}, "expected one of text, json"),
])
def test_bad_values_say_where_and_what(flags, env, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        load(flags, env)


def test_yaml_errors_point_at_file_line_column(tmp_path):
    path = write(tmp_path, "bind: 127.0.0.1:1\nworkerz: 4\n")
    with pytest.raises(ConfigError) as unknown:
        load({}, {}, path)
    assert str(unknown.value).startswith(f"{path}:2:1: workerz: unknown option 'workerz'")
    path = write(tmp_path, "workers: [1,\n")
    with pytest.raises(ConfigError, match=r"extender.yaml:\d+:\d+: invalid YAML"):
        load({}, {}, path)
    path = write(tmp_path, "bind: 127.0.0.1:1\nworkers: -3\n")
    with pytest.raises(ConfigError, match=r"extender.yaml:2:1: workers: expected a whole number"):
        load({}, {}, path)


def test_yaml_is_read_safely(tmp_path):
    path = write(tmp_path, "bind: !!python/object/apply:os.getcwd []\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load({}, {}, path)


def test_every_option_is_documented_in_the_generated_table():
    assert config.markdown_table() in DOCS.read_text()
    for option in config.OPTIONS:
        assert f"`{option.name}`" in config.markdown_table()


def test_the_dataclass_accepts_direct_construction():
    assert Config(workers=1).workers == 1


@pytest.mark.parametrize("value", ["0", "nan", "-1", "inf"])
def test_a_session_ttl_that_would_end_or_break_every_session_is_refused(value):
    # 0 expired every session at its open (answers stayed 200, allocations were dropped);
    # nan made every open fail with an IntegrityError
    with pytest.raises(ConfigError, match="POLICY_EXTENDER_SESSION_TTL"):
        load({}, {"POLICY_EXTENDER_SESSION_TTL": value})


def test_the_redis_timeout_is_configurable_and_reaches_the_store():
    from policy_extender.service import open_session_store
    store = open_session_store(load({"redis_timeout": "0.1", "session_store": "redis://127.0.0.1:1/0"}, {}))
    assert (store.timeout, store.session_timeout) == (0.1, 1.0)
    assert store._redis.connection_pool.connection_kwargs["socket_timeout"] == 0.1
    with pytest.raises(ConfigError, match="--redis-timeout"):
        load({"redis_timeout": "0"}, {})
