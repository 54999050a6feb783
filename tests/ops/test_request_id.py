"""Generated request ids are version-4 UUIDs in hex, as ``uuid.uuid4().hex`` gives, and distinct."""

import uuid

from policy_extender import logs


def test_generated_ids_are_uuid4_hex_and_distinct():
    ids = [logs.new_request_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(hex=text)
        assert (parsed.version, parsed.variant, parsed.hex) == (4, uuid.RFC_4122, text)


def test_a_sane_caller_id_is_kept_and_an_insane_one_replaced():
    assert logs.request_id_from("from-volcano") == "from-volcano"
    replaced = logs.request_id_from("has space")
    assert replaced != "has space" and uuid.UUID(hex=replaced).version == 4
