"""Record and replay: capture whole scheduling cycles from the running service, then re-run them
through a candidate policy set and report what would change (see ``docs/replay.md``).

Modules, one idea each:

* ``frames``    — the recording file format: framed, checksummed msgpack records
* ``redact``    — blanking annotation and container env values before anything is written
* ``recorder``  — ``Recorder``: sampling, a bounded queue and one writer thread per worker
* ``rotation``  — the size cap: oldest cycles deleted first
* ``capture``   — the service's hook: one verb call in, one ``Recorder.record`` out
* ``reading``   — a recording directory back into cycles (workers' files merged in time order)
* ``engine``    — replay a cycle through an in-process service on a policy set
* ``diff``      — recorded (or current) answers vs candidate answers: the changes
* ``report``    — the human table and the JSON report
* ``to_fixtures`` — recorded cases into ``*.fixtures.yaml`` files for the fixture runner
"""
