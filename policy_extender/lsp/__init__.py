"""The language server (``policy-extender lsp``): the checker's diagnostics, the schema's fields,
the builtins, lets and params brought to an editor over the Language Server Protocol.
May import fixture_runner, policyset, decide, lang, schema and errors; only ``server`` imports pygls.

Modules: ``documents`` (the set a document belongs to, read the way serve reads it, with the
editor's unsaved text over the files, analysed by ``lang.analyse``), ``locate`` (positions and
the node under the cursor), ``features`` (hover, completion, definition, references, formatting,
quick fixes: plain functions of an analysis, tested in-process), ``fixtures`` (fixture files:
their errors and a lens per case that runs it) and ``server`` (pygls wiring, over stdio).
"""
