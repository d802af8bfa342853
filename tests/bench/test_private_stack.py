"""Unit tests of the private stack a benchmark starts: its gateway runs the workers the benchmark asked for."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.private_stack import stack_config

pytestmark = pytest.mark.unit


def test_the_gateway_runs_the_workers_the_benchmark_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HEADWATER_GATEWAY_WORKERS", "1")
    assert stack_config(tmp_path).gateway_workers == 1
    monkeypatch.setenv("HEADWATER_GATEWAY_WORKERS", "3")
    assert stack_config(tmp_path).gateway_workers == 3


def test_without_a_choice_the_stack_keeps_its_own_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("HEADWATER_GATEWAY_WORKERS", raising=False)
    assert stack_config(tmp_path).gateway_workers == 2
