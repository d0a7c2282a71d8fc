"""The maintenance switches' shared page (queen_threads/background/flags.py): versions
decide, so an older read of the database never undoes a newer switch. Shared between the
worker processes of the real server: tests/acceptance/test_pop_maintenance.py."""

from __future__ import annotations

from queen_threads.background.flags import SharedFlags


def test_a_store_older_than_the_held_version_is_dropped() -> None:
    flags = SharedFlags(2, between_processes=False)
    assert not flags.value(0) and not flags.value(1) and flags.version(1) == 0
    assert flags.store(1, True, 1_700_000_000_000_002)  # a switch, its version
    assert not flags.store(1, False, 1_700_000_000_000_001)  # a refresh read before it
    assert flags.value(1) and flags.version(1) == 1_700_000_000_000_002
    assert flags.store(1, False, 1_700_000_000_000_003)  # the next switch
    assert not flags.value(1) and not flags.value(0)
    assert flags.memory[1] == 0  # what the pop path reads


def test_between_processes_it_takes_a_lock_processes_share() -> None:
    flags = SharedFlags(2, between_processes=True)
    assert flags.store(0, True, 5) and flags.value(0) and not flags.value(1)
    assert type(flags._lock).__module__ == "multiprocessing.synchronize"
