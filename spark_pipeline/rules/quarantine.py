"""Quarantine of the rules that crashed or stalled the pipeline: the manager's `Journal` seam and its recovery.

The journal (journal.CheckpointJournal) remembers, where only the pipeline writes, which rules were running and
which are quarantined. `recover`, run once when the manager starts with every stored rule read, quarantines each
rule the previous run left in a micro-batch when it died (crash, OOM, `kill -9`: the running set was not cleared by
a clean stop), loads the quarantine and removes the checkpoint folders no stored rule version owns. So a rule that
takes the JVM down does it once, not in a loop, and a rule deleted or re-applied while the pipeline was down never
resumes an old checkpoint. A quarantined rule is not started until it is applied again (a new checkpoint id) or
deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from spark_pipeline.rules.model import Rule

log = logging.getLogger("spark_pipeline.rules")
STALLED = ("stalled: a micro-batch ran over {:.0f} s (HEADWATER_RULE_MAX_BATCH_S), holding task slots the other "
           "queries need; apply the rule again to run it")
CRASHED = ("crashed: the pipeline died while this rule's micro-batch ran (it may have taken the JVM down); apply the "
           "rule again to run it")


class Journal(Protocol):
    """What survives a crash of the pipeline (journal.CheckpointJournal; module doc)."""

    def unclean_running(self) -> dict[str, str]: ...
    def record_running(self, running: Mapping[str, str]) -> None: ...
    def clean_stop(self) -> None: ...
    def in_flight(self, rule: Rule) -> bool: ...
    def quarantined(self) -> dict[str, tuple[str, str]]: ...
    def quarantine(self, rule: Rule, reason: str) -> None: ...
    def release(self, name: str) -> None: ...
    def drop_orphans(self, rules: Mapping[str, Rule]) -> list[str]: ...


class NoJournal:
    """A journal that remembers nothing (unit tests of other behaviour; a runtime without checkpoints)."""

    def unclean_running(self) -> dict[str, str]:
        return {}

    def record_running(self, running: Mapping[str, str]) -> None:
        pass

    def clean_stop(self) -> None:
        pass

    def in_flight(self, rule: Rule) -> bool:
        return False

    def quarantined(self) -> dict[str, tuple[str, str]]:
        return {}

    def quarantine(self, rule: Rule, reason: str) -> None:
        pass

    def release(self, name: str) -> None:
        pass

    def drop_orphans(self, rules: Mapping[str, Rule]) -> list[str]:
        return []


def recover(journal: Journal, rules: Mapping[str, Rule]) -> dict[str, tuple[str, str]]:
    """Quarantine what the previous run died in (module doc), drop orphan checkpoints; the quarantine
    (name -> (checkpoint id, reason))."""
    for name, checkpoint in journal.unclean_running().items():
        rule = rules.get(name)
        if rule is not None and rule.checkpoint_id == checkpoint and journal.in_flight(rule):
            journal.quarantine(rule, CRASHED)
            log.error("rule %s version %d quarantined: %s", name, rule.version, CRASHED)
    for dropped in journal.drop_orphans(rules):
        log.info("rule checkpoint %s removed: no stored rule version owns it", dropped)
    return journal.quarantined()


def in_one_batch_since(slot: Any, query: Any, batch_id: int | None, now: float) -> float | None:
    """Since when (as first seen) `query` has been inside the micro-batch that follows batch `batch_id`, None when
    it is between batches. Kept on `slot` (`busy_since`, `busy_batch`): the manager looks once per round."""
    try:
        active = bool(query.status.get("isTriggerActive"))
    except Exception:  # no status to read (yet): not known to be busy
        active = False
    if not active:
        slot.busy_since = None
        return None
    if slot.busy_since is None or slot.busy_batch != batch_id:
        slot.busy_since, slot.busy_batch = now, batch_id
    return float(slot.busy_since)
