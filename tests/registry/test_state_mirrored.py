"""The state replayed from a mirrored `_schemas` copy that kept an aborted transaction's records: one id still
means one schema (the committed one, the later record), and the conflict is logged."""

from __future__ import annotations

import json
import logging

import pytest

from registry.canonical import canonical_form
from registry.state import State, Version, schema_key, schema_value

pytestmark = pytest.mark.unit
X = json.dumps({"type": "record", "name": "x", "fields": [{"name": "a", "type": "long"}]})
Y = json.dumps({"type": "record", "name": "y", "fields": [{"name": "b", "type": "string"}]})


def test_the_same_schema_under_many_subjects_is_one_id_and_no_error(caplog: pytest.LogCaptureFixture) -> None:
    state = State()
    reformatted = json.dumps(json.loads(X), indent=2)
    for subject, text in (("s", X), ("t", X), ("u", reformatted)):
        state.apply(schema_key(subject, 1), schema_value(Version(subject, 1, 1), text))
    assert state.schemas[1].text == X and state.by_canonical == {canonical_form(json.loads(X)): 1}
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_an_aborted_decision_copied_before_the_committed_one_loses_to_it(caplog: pytest.LogCaptureFixture) -> None:
    state = State()
    # A fenced writer's transaction (aborted at the source, but copied by a read_uncommitted mirror) gave id 7 to X;
    # the writer that won gave id 7 to Y, and that is what producers were told.
    state.apply(schema_key("fenced", 1), schema_value(Version("fenced", 1, 7), X))
    state.apply(schema_key("winner", 1), schema_value(Version("winner", 1, 7), Y))
    assert state.schemas[7].text == Y
    assert state.by_canonical == {canonical_form(json.loads(Y)): 7}
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "isolation.level=read_committed" in errors[0].getMessage()
